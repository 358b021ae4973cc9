//! User-facing diagnostics: every error StreamBuild reports about a user's input carries a
//! stable code, the file, line and column it comes from, and a one-line hint.

pub mod registry;
pub mod suggest;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

impl Position {
    #[must_use]
    pub const fn new(line: u32, column: u32) -> Self {
        Self { line, column }
    }

    /// The position of byte `offset` in `text`.
    #[must_use]
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        Self {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }
}

/// Where something is: a project-relative file and, when known, a position in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Location {
    pub file: PathBuf,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
}

impl Location {
    #[must_use]
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Self {
            file: file.into(),
            position: None,
        }
    }

    #[must_use]
    pub fn at(file: impl Into<PathBuf>, position: Position) -> Self {
        Self {
            file: file.into(),
            position: Some(position),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", display_path(&self.file))?;
        if let Some(position) = self.position {
            write!(f, ":{}:{}", position.line, position.column)?;
        }
        Ok(())
    }
}

fn display_path(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// A secondary location that explains the primary one ("first defined here").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Related {
    pub message: String,
    pub location: Location,
}

/// One problem in the user's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Stable identifier, e.g. `STB-CONFIG-003`.
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    pub hint: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<Related>,
}

impl Diagnostic {
    #[must_use]
    pub fn new(code: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            location: None,
            hint: hint.into(),
            related: Vec::new(),
        }
    }

    #[must_use]
    pub fn at(mut self, location: Location) -> Self {
        self.location = Some(location);
        self
    }

    #[must_use]
    pub fn with_related(mut self, message: impl Into<String>, location: Location) -> Self {
        self.related.push(Related {
            message: message.into(),
            location,
        });
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]", self.code)?;
        if let Some(location) = &self.location {
            write!(f, " {location}")?;
        }
        writeln!(f, ": {}", self.message)?;
        for related in &self.related {
            writeln!(f, "  note: {} ({})", related.message, related.location)?;
        }
        write!(f, "  hint: {}", self.hint)
    }
}

/// Diagnostics collected by a pass that keeps going after independent errors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    pub fn extend(&mut self, other: Self) {
        self.0.extend(other.0);
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Sorted by file and position, so output is stable whatever order checks ran in.
    #[must_use]
    pub fn into_sorted(mut self) -> Vec<Diagnostic> {
        self.0
            .sort_by(|a, b| a.location.cmp(&b.location).then_with(|| a.code.cmp(b.code)));
        self.0.dedup();
        self.0
    }

    /// `Ok(value)` when nothing was reported.
    ///
    /// # Errors
    /// The collected diagnostics, when there are any.
    pub fn into_result<T>(self, value: T) -> Result<T, Self> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(diagnostic: Diagnostic) -> Self {
        Self(vec![diagnostic])
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "ab\ncdé\nf";
        assert_eq!(Position::of_offset(text, 0), Position::new(1, 1));
        assert_eq!(Position::of_offset(text, 3), Position::new(2, 1));
        assert_eq!(
            Position::of_offset(text, text.find('f').unwrap_or(0)),
            Position::new(3, 1)
        );
        assert_eq!(
            Position::of_offset(text, 7),
            Position::new(2, 4),
            "é is one column"
        );
        assert_eq!(Position::of_offset(text, 999), Position::new(3, 2));
    }

    #[test]
    fn display_has_code_location_and_hint() {
        let diagnostic = Diagnostic::new("STB-TEST-001", "bad thing", "do the good thing")
            .at(Location::at("a/b.toml", Position::new(3, 7)))
            .with_related("first defined here", Location::file("c.sql"));
        assert_eq!(
            diagnostic.to_string(),
            "error[STB-TEST-001] a/b.toml:3:7: bad thing\n  note: first defined here (c.sql)\n  hint: do the good thing"
        );
    }

    #[test]
    fn sorting_is_by_location() {
        let mut all = Diagnostics::new();
        all.push(Diagnostic::new("B", "later", "h").at(Location::at("f", Position::new(9, 1))));
        all.push(Diagnostic::new("A", "earlier", "h").at(Location::at("f", Position::new(2, 1))));
        let sorted = all.into_sorted();
        assert_eq!(sorted[0].code, "A");
    }
}
