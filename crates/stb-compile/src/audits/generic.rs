//! Generic audits: definitions under `audits/generic/` with `@param` placeholders, and the
//! instances MODEL headers declare.

use std::collections::BTreeMap;

use stb_diagnostics::{Diagnostic, Location, Position};
use stb_model::header::{HeaderValue, Spanned};

use super::{Attachment, CODE, Draft, OPTION_KEYS, Options, fail, single_query};
use crate::model::AnalysedModel;

/// A generic audit definition.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub file: String,
    pub query: String,
    /// Parameters in order of first appearance.
    pub params: Vec<Param>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    pub name: String,
    /// `@'name'`: rendered as a string literal; `@name`: spliced as written.
    pub quoted: bool,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// One `@name` or `@'name'` in a definition, by byte span.
struct Placeholder {
    start: usize,
    end: usize,
    param: Param,
}

fn parameter_name(name: &str) -> bool {
    stb_project::is_identifier(name) && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Every placeholder of a definition, found with the SQL lexer: in the query's code and in
/// the model argument of `__ref(...)`, never in other string literals or in comments (the
/// reference replaced text inside strings). An `@` right after a word character is text
/// (`owner@x`).
fn placeholders(text: &str) -> Vec<Placeholder> {
    use stb_sql::lexer::Kind;
    let Ok(tokens) = stb_sql::lexer::lex(text) else {
        return Vec::new();
    };
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].kind, Kind::Space | Kind::Comment))
        .collect();
    let mut found = Vec::new();
    for (position, &index) in significant.iter().enumerate() {
        let token = &tokens[index];
        let previous = |back: usize| position.checked_sub(back).map(|p| &tokens[significant[p]]);
        if token.kind == Kind::Punct && token.text == "@" {
            if text[..token.start]
                .chars()
                .next_back()
                .is_some_and(is_ident_char)
            {
                continue;
            }
            let Some(next) = tokens.get(index + 1).filter(|n| n.start == token.end) else {
                continue;
            };
            let (name, quoted) = match next.kind {
                Kind::Word => (next.text, false),
                Kind::String => (next.text.trim_matches('\''), true),
                _ => continue,
            };
            if parameter_name(name) {
                found.push(Placeholder {
                    start: token.start,
                    end: next.end,
                    param: Param {
                        name: name.to_owned(),
                        quoted,
                    },
                });
            }
        } else if matches!(token.kind, Kind::String | Kind::QuotedIdent)
            && previous(1).is_some_and(|p| p.text == "(")
            && previous(2).is_some_and(|p| p.is_keyword("__ref"))
        {
            // `__ref("@model")`: the model argument is the one string that takes a value.
            for (at, _) in token.text.match_indices('@') {
                let rest = &token.text[at + 1..];
                let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
                let preceded = token.text[..at]
                    .chars()
                    .next_back()
                    .is_some_and(is_ident_char);
                if !preceded && parameter_name(&rest[..end]) {
                    found.push(Placeholder {
                        start: token.start + at,
                        end: token.start + at + 1 + end,
                        param: Param {
                            name: rest[..end].to_owned(),
                            quoted: false,
                        },
                    });
                }
            }
        }
    }
    found
}

/// The parameters a definition uses, in order of first appearance.
pub(crate) fn params(text: &str) -> Vec<Param> {
    let mut found: Vec<Param> = Vec::new();
    for placeholder in placeholders(text) {
        if !found.contains(&placeholder.param) {
            found.push(placeholder.param);
        }
    }
    found
}

fn stem(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// Reads every definition; a definition is one empty `AUDIT ();` header and one query.
pub(crate) fn definitions(
    files: &[(String, String)],
    diagnostics: &mut stb_diagnostics::Diagnostics,
) -> BTreeMap<String, Definition> {
    let mut out: BTreeMap<String, Definition> = BTreeMap::new();
    for (file, text) in files {
        let blocks = match crate::blocks::split(text, "AUDIT") {
            Ok(blocks) => blocks,
            Err(e) => {
                diagnostics.push(e.into_diagnostic(
                    CODE,
                    file,
                    text,
                    "Generic audit",
                    "write AUDIT (); then the SELECT, using @model and other @parameters",
                ));
                continue;
            }
        };
        let [block] = blocks.as_slice() else {
            diagnostics.push(fail(
                file,
                text,
                blocks[1].keyword_offset,
                format!("Generic audit '{file}' must contain exactly one AUDIT block"),
                "put each generic audit in its own file; the file name is its name",
            ));
            continue;
        };
        if let Some((key, _)) = block.entries.first() {
            diagnostics.push(fail(
                file,
                text,
                block.header_offset + key.offset,
                format!("Generic audit '{file}' must not define AUDIT() header fields"),
                "severity, cadence and names are set where the audit is used, in MODEL headers",
            ));
            continue;
        }
        if let Err((offset, message)) = single_query(block.body) {
            diagnostics.push(fail(
                file,
                text,
                block.body_offset + offset,
                format!("Generic audit '{file}' {message}"),
                "a generic audit is one SELECT returning the failing rows",
            ));
            continue;
        }
        let name = stem(file);
        if let Some(first) = out.get(&name) {
            diagnostics.push(
                Diagnostic::new(
                    CODE,
                    format!(
                        "Duplicate generic audit '{name}' in '{}' and '{file}'",
                        first.file
                    ),
                    "generic audits are named by their file; rename one",
                )
                .at(Location::file(file)),
            );
            continue;
        }
        out.insert(
            name,
            Definition {
                file: file.clone(),
                query: block.body.to_owned(),
                params: params(block.body),
            },
        );
    }
    out
}

fn raw_scalar(value: &HeaderValue) -> Option<String> {
    match value {
        HeaderValue::Str(s) => Some(s.clone()),
        HeaderValue::Int(i) => Some(i.to_string()),
        HeaderValue::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(format!("{f:.1}")),
        HeaderValue::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

/// The text a parameter becomes, or why the value does not fit.
fn render_value(param: &Param, value: &HeaderValue) -> Result<String, String> {
    let items: Vec<&HeaderValue> = match value {
        HeaderValue::List(items) => items.iter().map(|i| &i.value).collect(),
        other => vec![other],
    };
    let rendered: Option<Vec<String>> = if param.quoted {
        items
            .iter()
            .map(|v| match v {
                HeaderValue::Str(s) => Some(stb_ddl::string_literal(s)),
                _ => None,
            })
            .collect()
    } else {
        items.iter().map(|v| raw_scalar(v)).collect()
    };
    rendered.map(|parts| parts.join(", ")).ok_or_else(|| {
        if param.quoted {
            format!("@'{}' takes a string or a list of strings", param.name)
        } else {
            format!(
                "@{} takes a string, a number or a list of them, not {}",
                param.name,
                value.kind()
            )
        }
    })
}

/// Renders a definition with its arguments; placeholders without an argument stay as
/// written (the caller reports missing arguments).
pub(crate) fn render(
    definition: &Definition,
    args: &BTreeMap<String, HeaderValue>,
) -> Result<String, String> {
    let text = &definition.query;
    let mut query = String::with_capacity(text.len());
    let mut last = 0;
    for placeholder in placeholders(text) {
        let Some(value) = args.get(&placeholder.param.name) else {
            continue;
        };
        query.push_str(&text[last..placeholder.start]);
        query.push_str(&render_value(&placeholder.param, value)?);
        last = placeholder.end;
    }
    query.push_str(&text[last..]);
    Ok(query)
}

/// `key value` arguments as written in a header.
type Args = Vec<(Spanned<String>, Spanned<HeaderValue>)>;

/// One item of an `audits [...]` list: `name` or `name (arg value, ...)`.
fn item(value: &Spanned<HeaderValue>) -> Option<(String, Args)> {
    match &value.value {
        HeaderValue::Str(name) => Some((name.clone(), Vec::new())),
        HeaderValue::Map(entries) => match entries.as_slice() {
            [(name, args)] => match &args.value {
                HeaderValue::Map(args) => Some((name.value.clone(), args.clone())),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// Where an audit list sits: its model, and its column for column-level lists.
struct Context<'m> {
    model: &'m AnalysedModel<'m>,
    column: Option<&'m str>,
    header_offset: usize,
}

/// Every generic audit instance declared by the models' headers.
pub(crate) fn instances(
    analysed: &[AnalysedModel<'_>],
    definitions: &BTreeMap<String, Definition>,
    diagnostics: &mut stb_diagnostics::Diagnostics,
) -> Vec<Draft> {
    let mut drafts = Vec::new();
    for model in analysed {
        let Ok(header_offset) = stb_model::file::split(&model.model.text).map(|f| f.header_offset)
        else {
            continue;
        };
        let mut lists: Vec<(Option<&str>, &[Spanned<HeaderValue>])> =
            vec![(None, model.header.audits.as_slice())];
        lists.extend(
            model
                .header
                .columns
                .iter()
                .map(|c| (Some(c.name.as_str()), c.audits.as_slice())),
        );
        for (column, list) in lists {
            let context = Context {
                model,
                column,
                header_offset,
            };
            for (index, value) in list.iter().enumerate() {
                match instance(&context, index + 1, value, definitions) {
                    Ok(draft) => drafts.push(draft),
                    Err(problem) => diagnostics.push(problem),
                }
            }
        }
    }
    drafts
}

fn instance(
    context: &Context<'_>,
    position: usize,
    value: &Spanned<HeaderValue>,
    definitions: &BTreeMap<String, Definition>,
) -> Result<Draft, Diagnostic> {
    let model = context.model;
    let file = &model.model.file;
    let text = &model.model.text;
    let location = |offset: usize| {
        Location::at(
            file,
            Position::of_offset(text, context.header_offset + offset),
        )
    };
    let problem = |offset: usize, message: String, hint: &str| {
        Diagnostic::new(CODE, message, hint).at(location(offset))
    };
    let Some((definition_name, args)) = item(value) else {
        return Err(problem(
            value.offset,
            format!(
                "MODEL(...) in '{file}': an audit is a generic audit name like not_null, or a call like accepted_values (values [\"a\"])"
            ),
            "write audits [not_null, accepted_values (values [\"a\", \"b\"])]",
        ));
    };
    let Some(definition) = definitions.get(&definition_name) else {
        let known: Vec<&str> = definitions.keys().map(String::as_str).collect();
        return Err(problem(
            value.offset,
            format!(
                "MODEL(...) in '{file}' uses unknown generic audit '{definition_name}'. Available: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
            "define it as audits/generic/<name>.sql",
        ));
    };
    let mut implicit: BTreeMap<String, HeaderValue> = BTreeMap::new();
    implicit.insert(
        "model".to_owned(),
        HeaderValue::Str(model.model.name.clone()),
    );
    if let Some(column) = context.column {
        implicit.insert("column".to_owned(), HeaderValue::Str(column.to_owned()));
    }
    let mut options = Options::default();
    let mut explicit: BTreeMap<String, HeaderValue> = BTreeMap::new();
    for (key, arg) in &args {
        if OPTION_KEYS.contains(&key.value.as_str()) {
            options.read(&key.value, &arg.value).map_err(|message| {
                problem(
                    key.offset,
                    format!("Generic audit '{definition_name}' in '{file}': {message}"),
                    "fix the audit setting",
                )
            })?;
            continue;
        }
        if let Some(given) = implicit.get(&key.value)
            && *given != arg.value
        {
            return Err(problem(
                key.offset,
                format!(
                    "Generic audit '{definition_name}' in '{file}' must not override implicit {} from its header context",
                    key.value
                ),
                "drop the argument; it comes from where the audit is declared",
            ));
        }
        explicit.insert(key.value.clone(), arg.value.clone());
    }
    let missing: Vec<&str> = definition
        .params
        .iter()
        .map(|p| p.name.as_str())
        .filter(|p| !explicit.contains_key(*p) && !implicit.contains_key(*p))
        .collect();
    if !missing.is_empty() {
        return Err(problem(
            value.offset,
            format!(
                "missing arguments for generic audit '{definition_name}': {}",
                missing.join(", ")
            ),
            "pass them as accepted_values (values [\"a\"]) style arguments",
        ));
    }
    let unsupported: Vec<&str> = explicit
        .keys()
        .map(String::as_str)
        .filter(|k| !definition.params.iter().any(|p| p.name == *k))
        .collect();
    if !unsupported.is_empty() {
        return Err(problem(
            value.offset,
            format!(
                "unsupported arguments for generic audit '{definition_name}': {}",
                unsupported.join(", ")
            ),
            "the definition uses only its @parameters; remove the others",
        ));
    }
    let mut values = implicit;
    values.extend(explicit);
    let query = render(definition, &values).map_err(|message| {
        problem(
            value.offset,
            format!("Generic audit '{definition_name}' in '{file}': {message}"),
            "pass a value the placeholder can take",
        )
    })?;
    let name = options
        .name
        .clone()
        .unwrap_or_else(|| match context.column {
            Some(column) => format!("{}.{column}.{definition_name}.{position}", model.model.name),
            None => format!("{}.{definition_name}.{position}", model.model.name),
        });
    // The model file's path mirrors under compiled/audits/.
    let path_stem = format!(
        "compiled/audits/{}",
        file.strip_suffix(".sql").unwrap_or(file)
    );
    Ok(Draft {
        name: Some(name),
        file: file.clone(),
        path_stem,
        attachment: if context.column.is_some() {
            Attachment::Column
        } else {
            Attachment::Model
        },
        model: Some(model.model.name.clone()),
        column: context.column.map(str::to_owned),
        generic: Some(definition_name),
        query,
        options,
        location: location(value.offset),
    })
}
