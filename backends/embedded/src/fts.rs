//! What goes into the full-text index and how a query becomes an FTS5 match
//! expression.
//!
//! FTS5's `unicode61` tokenizer splits on `_` and punctuation but keeps
//! `loadConfig` as one token. So each chunk also gets an `idents` column with
//! the camelCase parts of its identifiers, and a query term is searched both
//! whole and by its parts: `loadConfig` finds `loadConfig`, `load_config` and
//! a chunk that mentions `config` alone, the exact identifier ranking first.

/// Most terms one match expression carries; longer queries are cut, so a
/// pasted file cannot turn into a huge query.
const MAX_TERMS: usize = 64;

/// One column of `chunks_fts`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Column {
    pub name: &'static str,
    /// Its weight in `bm25()`: each occurrence of a phrase in this column
    /// counts this much towards the phrase's frequency.
    pub weight: f64,
}

/// The columns of `chunks_fts`, in table order: the one place that says what
/// the full-text index holds and how much each column weighs. Writes fill
/// them from [`column_texts`]; every ranking (FTS5's `bm25()` and the
/// scoring in `lexical.rs`) reads the weights from here.
pub(crate) const COLUMNS: &[Column] = &[Column { name: "body", weight: 1.0 }, Column { name: "idents", weight: 1.0 }];

/// The text of each of [`COLUMNS`] for a chunk's document, in table order.
pub(crate) fn column_texts(document: &str) -> Vec<std::borrow::Cow<'_, str>> {
    vec![document.into(), idents(document).into()]
}

/// The camelCase parts of the document's identifiers, lower-cased, for every
/// identifier piece that has more than one part.
pub(crate) fn idents(document: &str) -> String {
    let mut out = String::new();
    for word in document.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        for piece in word.split('_') {
            let parts = camel_parts(piece);
            if parts.len() > 1 {
                for p in parts {
                    if !out.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(&p.to_ascii_lowercase());
                }
            }
        }
    }
    out
}

/// One term of a lexical query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Term {
    /// Lower-cased letters, digits and `_`.
    pub text: String,
    /// Whether `unicode61` indexes the term as exactly this one token (ASCII
    /// letters and digits only), so its document frequency can be looked up.
    pub single_token: bool,
}

/// The terms of `query`: each run of letters, digits and `_`, plus its
/// camelCase / snake_case parts, lower-cased, without repeats, at most
/// [`MAX_TERMS`].
pub(crate) fn query_terms(query: &str) -> Vec<Term> {
    let mut terms: Vec<Term> = Vec::new();
    let mut add = |t: &str| {
        let text = t.to_lowercase();
        if !text.is_empty() && !terms.iter().any(|x| x.text == text) && terms.len() < MAX_TERMS {
            let single_token = text.bytes().all(|b| b.is_ascii_alphanumeric());
            terms.push(Term { text, single_token });
        }
    };
    for word in query.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        add(word);
        let pieces: Vec<&str> = word.split('_').collect();
        for piece in &pieces {
            let parts = camel_parts(piece);
            if pieces.len() > 1 || parts.len() > 1 {
                for part in parts {
                    add(part);
                }
            }
        }
    }
    terms
}

/// An FTS5 expression matching any of `terms`, each a quoted phrase (so no
/// FTS5 syntax can be injected). `None` when there is no term.
pub(crate) fn match_expression<'a>(terms: impl IntoIterator<Item = &'a Term>) -> Option<String> {
    // Terms hold no `"` (only letters, digits and `_`), so quoting is safe.
    let quoted: Vec<String> = terms.into_iter().map(|t| format!("\"{}\"", t.text)).collect();
    (!quoted.is_empty()).then(|| quoted.join(" OR "))
}

/// Splits at lower→upper, letter↔digit and `ABCd` → `AB`, `Cd` boundaries.
fn camel_parts(piece: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = piece.char_indices().collect();
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (prev, cur) = (chars[i - 1].1, chars[i].1);
        let next = chars.get(i + 1).map(|c| c.1);
        let boundary = (prev.is_lowercase() && cur.is_uppercase())
            || (prev.is_alphabetic() != cur.is_alphabetic())
            || (prev.is_uppercase() && cur.is_uppercase() && next.is_some_and(char::is_lowercase));
        if boundary {
            parts.push(&piece[start..chars[i].0]);
            start = chars[i].0;
        }
    }
    if start < piece.len() {
        parts.push(&piece[start..]);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers() {
        assert_eq!(camel_parts("loadConfig"), ["load", "Config"]);
        assert_eq!(camel_parts("HTTPServer2go"), ["HTTP", "Server", "2", "go"]);
        assert_eq!(camel_parts("plain"), ["plain"]);
        assert_eq!(idents("fn loadConfig(path) { parse_jsonBody(x); plain }"), "load config json body");
    }

    #[test]
    fn builds_safe_match_expressions() {
        let expr = |q: &str| match_expression(&query_terms(q));
        assert_eq!(expr("loadConfig now"), Some(r#""loadconfig" OR "load" OR "config" OR "now""#.into()));
        assert_eq!(expr("parse_config"), Some(r#""parse_config" OR "parse" OR "config""#.into()));
        assert_eq!(expr(r#"a" OR x:* NEAR(b)"#), Some(r#""a" OR "or" OR "x" OR "near" OR "b""#.into()));
        assert_eq!(expr("  ?! "), None);
        assert_eq!(expr("café"), Some(r#""café""#.into()));
        let single: Vec<bool> = query_terms("parse_config café x2").iter().map(|t| t.single_token).collect();
        assert_eq!(single, [false, true, true, false, true, true, true]);
    }
}
