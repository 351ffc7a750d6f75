//! The few Python `str` semantics the reference indexer relies on.
//!
//! The reference works on Python strings, whose whitespace set and line
//! boundaries are wider than Rust's defaults. Every place that decides where a
//! chunk starts or whether it is blank goes through these helpers, so that a
//! form feed, a vertical tab or U+2028 behaves exactly as it does there.

/// `str.isspace()` for one character: Unicode `White_Space` plus the four
/// information separators U+001C..U+001F, which Python also counts.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `not s.strip()`: empty or whitespace only.
pub(crate) fn is_blank(s: &str) -> bool {
    s.chars().all(is_space)
}

/// `s.lstrip()`.
pub(crate) fn lstrip(s: &str) -> &str {
    s.trim_start_matches(is_space)
}

/// `s.strip()`.
pub(crate) fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Whether `c` ends a line for `str.splitlines()`.
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `s.splitlines(keepends=True)`, as byte ranges of `s`.
pub(crate) fn line_ranges(s: &str) -> Vec<(usize, usize)> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !is_line_break(c) {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, next)| next == '\n') {
            chars.next();
            end += 1;
        }
        lines.push((start, end));
        start = end;
    }
    if start < s.len() {
        lines.push((start, s.len()));
    }
    lines
}

/// The byte length of the character starting at `at` (1 past the end).
pub(crate) fn char_len_at(s: &str, at: usize) -> usize {
    s[at..].chars().next().map_or(1, char::len_utf8)
}

/// `json.dumps(value, ensure_ascii=False)` for one string: quotes, the short
/// escapes, `\u00xx` for other control characters, everything else verbatim.
pub(crate) fn json_string(value: &str, out: &mut String) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_matches_python() {
        for c in ['\u{1c}', '\u{1f}', '\u{85}', '\u{a0}', '\u{2028}', '\u{3000}', '\u{0b}'] {
            assert!(is_space(c), "{c:?}");
        }
        for c in ['\u{200b}', '\u{180e}', '\u{feff}', 'x'] {
            assert!(!is_space(c), "{c:?}");
        }
    }

    #[test]
    fn splitlines_matches_python() {
        let s = "a\nb\r\nc\rd\u{0c}e\u{2028}f";
        let lines: Vec<&str> = line_ranges(s).into_iter().map(|(a, b)| &s[a..b]).collect();
        assert_eq!(lines, ["a\n", "b\r\n", "c\r", "d\u{0c}", "e\u{2028}", "f"]);
        assert!(line_ranges("").is_empty());
        assert_eq!(line_ranges("x\n"), [(0, 2)]);
    }

    #[test]
    fn json_escapes_like_python() {
        let mut out = String::new();
        json_string("a\"b\\c\nd\u{1}é\u{7f}", &mut out);
        assert_eq!(out, "\"a\\\"b\\\\c\\nd\\u0001é\u{7f}\"");
    }
}
