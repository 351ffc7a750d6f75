//! Byte-level JSON encoding shared by both transports.
//!
//! The reference server encodes with Go's `encoding/json`, which escapes
//! `<`, `>` and `&` as `\u003c`, `\u003e`, `\u0026` and the line separators
//! U+2028/U+2029 as `\u2028`/`\u2029`. Those characters can only occur inside
//! JSON strings, so rewriting them in already-encoded JSON keeps the document
//! valid and equal in meaning while making its bytes identical.

/// Rewrites encoded JSON with Go's escaping of HTML-significant characters.
pub fn go_escape(json: &str) -> String {
    if !json.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return json.to_owned();
    }
    let mut out = String::with_capacity(json.len() + 32);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes only U+2028/U+2029, which Go's encoder escapes in every string.
pub fn escape_line_separators(json: &str) -> String {
    if !json.contains(['\u{2028}', '\u{2029}']) {
        return json.to_owned();
    }
    json.replace('\u{2028}', "\\u2028").replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_go() {
        let v = serde_json::json!({"text": "a<b>&c\u{2028}\u{2029}é"});
        let enc = go_escape(&serde_json::to_string(&v).unwrap());
        assert_eq!(enc, r#"{"text":"a\u003cb\u003e\u0026c\u2028\u2029é"}"#);
        let back: serde_json::Value = serde_json::from_str(&enc).unwrap();
        assert_eq!(back, v);
    }
}
