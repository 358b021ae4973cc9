//! Small lexical rules shared by configuration and model headers.

/// `^[A-Za-z_][A-Za-z0-9_]*$`
#[must_use]
pub fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `<int><d|h|m|s>`, lower-case, no spaces, no compounds. Returns seconds.
#[must_use]
pub fn parse_duration(text: &str) -> Option<u64> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let scale = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m"), Some(600));
        assert_eq!(parse_duration("7d"), Some(604_800));
        assert_eq!(parse_duration("0s"), Some(0));
        for bad in ["", "m", "10", "1h30m", "10 m", "10M", "-1s", "1.5h", "ms"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("orders_2"));
        assert!(is_identifier("_x"));
        assert!(!is_identifier("2x"));
        assert!(!is_identifier("a-b"));
        assert!(!is_identifier(""));
    }
}
