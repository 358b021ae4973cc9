//! Finding and replacing model entries in `manifest.json` as text.
//!
//! The manifest is pretty-printed with two-space indents and no string holds a raw
//! newline (JSON escapes them), so its lines are its structure: the `"models"` object
//! opens on a line of its own at indent 2, each model's entry starts with a key line at
//! indent 4 and its value closes on a line `    }` (or `    },`).

/// The byte range of each model entry's value (`{` to `}` inclusive), by model name, in
/// manifest order; `None` when the text is not laid out as the compiler writes it.
pub(crate) fn model_ranges(manifest: &str) -> Option<Vec<(String, (usize, usize))>> {
    const OPEN: &str = "\n  \"models\": {";
    let models_start = manifest.find(OPEN)? + OPEN.len();
    let body = &manifest[models_start..];
    if body.starts_with('}') {
        return Some(Vec::new()); // "models": {}
    }
    let mut ranges = Vec::new();
    let mut offset = models_start;
    let mut open: Option<(String, usize)> = None;
    for line in body.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let text = line.trim_end_matches('\n');
        if let Some(rest) = text.strip_prefix("    \"") {
            if open.is_some() || rest.starts_with(' ') {
                continue; // deeper lines start with more spaces; never a key here
            }
            let (name, value) = rest.split_once("\": ")?;
            if value != "{" || name.contains('\\') {
                return None;
            }
            open = Some((name.to_owned(), start + text.len() - 1));
        } else if text == "    }" || text == "    }," {
            let (name, from) = open.take()?;
            ranges.push((name, (from, start + 5)));
        } else if text == "  }" || text == "  }," {
            return open.is_none().then_some(ranges);
        }
    }
    None
}

/// `manifest` with each range replaced by its new text; ranges sorted and disjoint.
pub(crate) fn replace(manifest: &str, replacements: &[((usize, usize), &str)]) -> String {
    let added: usize = replacements.iter().map(|(_, text)| text.len()).sum();
    let mut out = String::with_capacity(manifest.len() + added);
    let mut last = 0;
    for ((from, to), text) in replacements {
        out.push_str(&manifest[last..*from]);
        out.push_str(text);
        last = *to;
    }
    out.push_str(&manifest[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "{\n  \"artifacts\": [],\n  \"models\": {\n    \"a\": {\n      \"name\": \"a\",\n      \"refs\": [\n        \"b\"\n      ]\n    },\n    \"b\": {\n      \"name\": \"b\"\n    }\n  },\n  \"tests\": {}\n}\n";

    #[test]
    fn finds_each_entry_value_and_splices_replacements() {
        let ranges = model_ranges(MANIFEST).expect("laid out as compiled");
        let names: Vec<&str> = ranges.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        for (name, (from, to)) in &ranges {
            let value = &MANIFEST[*from..*to];
            assert!(value.starts_with('{') && value.ends_with('}'), "{value}");
            let parsed: serde_json::Value = serde_json::from_str(value).expect("one value");
            assert_eq!(parsed["name"], name.as_str());
        }
        let spliced = replace(
            MANIFEST,
            &[(ranges[1].1, "{\n      \"name\": \"B\"\n    }")],
        );
        let parsed: serde_json::Value = serde_json::from_str(&spliced).expect("still JSON");
        assert_eq!(parsed["models"]["b"]["name"], "B");
        assert_eq!(parsed["models"]["a"]["refs"][0], "b");
    }

    #[test]
    fn an_empty_models_object_or_an_unknown_layout() {
        assert_eq!(
            model_ranges("{\n  \"models\": {},\n  \"x\": 1\n}\n"),
            Some(Vec::new())
        );
        assert_eq!(model_ranges("{\"models\":{\"a\":{}}}"), None, "not pretty");
        assert_eq!(
            model_ranges("{\n  \"models\": {\n    \"a\": {\n      \"x\": 1\n"),
            None,
            "cut short"
        );
    }
}
