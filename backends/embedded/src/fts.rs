//! What goes into the full-text index and how a query becomes an FTS5 match
//! expression. Words and their parts are `rr_core::text`'s, the split every
//! ranking shares.
//!
//! FTS5's `unicode61` tokenizer splits on `_` and punctuation but keeps
//! `loadConfig` as one token. So each chunk also gets an `idents` column with
//! the camelCase parts of its identifiers, and a query term is searched both
//! whole and by its parts: `loadConfig` finds `loadConfig`, `load_config` and
//! a chunk that mentions `config` alone, the exact identifier ranking first.
//!
//! Questions are worded unlike code ("where are conflicting arguments
//! detected" against `fn conflicts`), so a `stems` column holds the English
//! (Snowball) stem of every word whose stem differs from it, and a query
//! word whose stem differs is also searched by its stem: the exact form
//! then scores above any other form of the word.
//!
//! Every column is searched by every term, so FTS5's IDF (rows holding the
//! term in any column) and the score bounds of the lexical index stay valid.

use rr_core::text;
use rust_stemmers::{Algorithm, Stemmer};

/// Most terms one match expression carries; longer queries are cut, so a
/// pasted file cannot turn into a huge query.
const MAX_TERMS: usize = 64;

/// Most words a query may have to be searched also as one phrase. An error
/// message or a sentence pasted from the code then ranks the chunk holding
/// it verbatim first; a longer text is rarely a verbatim quote.
const MAX_PHRASE_WORDS: usize = 16;

/// One column of `chunks_fts`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    pub name: &'static str,
    /// Its weight in `bm25()`: each occurrence of a phrase in this column
    /// counts this much towards the phrase's frequency.
    pub weight: f64,
}

/// The columns of `chunks_fts`, in table order: the one place that says what
/// the full-text index holds and how much each column weighs. Writes fill
/// them from [`columns`]; every ranking (FTS5's `bm25()` and the lexical
/// index's) reads the weights from here. The weights only scale a term's
/// frequency, so a row's score per term stays below `idf · (k1 + 1)`. A
/// stem counts a quarter of the word itself.
pub const COLUMNS: &[Column] = &[
    Column { name: "body", weight: 1.0 },
    Column { name: "idents", weight: 1.0 },
    Column { name: "stems", weight: 0.25 },
];

/// The camelCase parts of the document's identifiers, lower-cased, for every
/// identifier piece that has more than one part.
pub(crate) fn idents(document: &str) -> String {
    let mut out = String::new();
    for word in text::words(document) {
        // `unicode61` already splits at `_`.
        for piece in word.split('_') {
            let parts = text::parts(piece);
            if parts.len() > 1 {
                for p in parts {
                    if !out.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(&p.to_lowercase());
                }
            }
        }
    }
    out
}

/// The `bm25()` call that ranks lexical matches, with the weights of [`COLUMNS`].
pub(crate) fn bm25_call() -> String {
    let weights: Vec<String> = COLUMNS.iter().map(|c| format!("{:?}", c.weight)).collect();
    format!("bm25(chunks_fts, {})", weights.join(", "))
}

/// The `INSERT` of one row of `chunks_fts`: rowid, then the columns.
pub(crate) fn insert_statement() -> String {
    let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
    let params: Vec<String> = (2..=names.len() + 1).map(|i| format!("?{i}")).collect();
    format!("INSERT OR REPLACE INTO chunks_fts (rowid, {}) VALUES (?1, {})", names.join(", "), params.join(", "))
}

/// The text of each of [`COLUMNS`] for one chunk, in table order.
pub fn columns(document: &str) -> [String; COLUMNS.len()] {
    [document.to_owned(), idents(document), stems(document)]
}

pub(crate) fn stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

/// The stem of `word` (lower-case) when it is a plain ASCII word of at least
/// three letters whose stem differs from it.
fn stem_of(stemmer: &Stemmer, word: &str) -> Option<String> {
    if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let stem = stemmer.stem(word);
    (stem != word).then(|| stem.into_owned())
}

/// The stems of the document's words and identifier parts that differ from
/// the word.
fn stems(document: &str) -> String {
    let stemmer = stemmer();
    let mut out = String::new();
    for word in text::words(document) {
        for part in text::parts(word) {
            if let Some(stem) = stem_of(&stemmer, &part.to_lowercase()) {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(&stem);
            }
        }
    }
    out
}

/// One term of a lexical query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Lower-cased letters, digits and `_`.
    pub text: String,
    /// Whether `unicode61` indexes the term as exactly this one token (ASCII
    /// letters and digits only), so its document frequency can be looked up.
    pub single_token: bool,
}

/// The terms of `query`: each run of letters, digits and `_`, plus its
/// camelCase / snake_case parts, lower-cased, without [`STOPWORDS`] (unless
/// nothing else is left), each followed by its stem when that differs; then
/// the whole query as one phrase, stopwords included, when it has 2 to
/// [`MAX_PHRASE_WORDS`] words. Without repeats, at most [`MAX_TERMS`].
pub fn query_terms(query: &str) -> Vec<Term> {
    let mut words: Vec<String> = Vec::new();
    for word in text::words(query) {
        words.push(word.to_lowercase());
        let parts = text::parts(word);
        if parts.len() > 1 {
            words.extend(parts.into_iter().map(str::to_lowercase));
        }
    }
    if words.iter().any(|w| !text::is_stopword(w)) {
        words.retain(|w| !text::is_stopword(w));
    }
    let whole: Vec<&str> = text::words(query).collect();
    let phrase = (2..=MAX_PHRASE_WORDS).contains(&whole.len()).then(|| whole.join(" ").to_lowercase());
    let stemmer = stemmer();
    let stemmed = words.into_iter().flat_map(|word| {
        let stem = stem_of(&stemmer, &word);
        std::iter::once(word).chain(stem)
    });
    let mut terms: Vec<Term> = Vec::new();
    for text in stemmed.chain(phrase) {
        if !terms.iter().any(|x| x.text == text) && terms.len() < MAX_TERMS {
            let single_token = text.bytes().all(|b| b.is_ascii_alphanumeric());
            terms.push(Term { text, single_token });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idents_hold_the_camel_case_parts() {
        assert_eq!(idents("fn loadConfig(path) { parse_jsonBody(x); plain }"), "load config json body");
    }

    #[test]
    fn builds_safe_match_expressions() {
        let expr = |q: &str| match_expression(&query_terms(q));
        assert_eq!(
            expr("loadConfig now"),
            Some(r#""loadconfig" OR "load" OR "config" OR "now" OR "loadconfig now""#.into())
        );
        assert_eq!(expr("parse_config"), Some(r#""parse_config" OR "parse" OR "pars" OR "config""#.into()));
        assert_eq!(expr(r#"a" OR x:* NEAR(b)"#), Some(r#""x" OR "near" OR "b" OR "a or x near b""#.into()));
        assert_eq!(expr("  ?! "), None);
        assert_eq!(expr("café"), Some(r#""café""#.into()));
        let single: Vec<bool> = query_terms("parse_config café x2").iter().map(|t| t.single_token).collect();
        assert_eq!(single, [false, true, true, true, false, true, true, true, false]);
    }

    #[test]
    fn questions_lose_their_stopwords_and_gain_stems() {
        let texts = |q: &str| query_terms(q).into_iter().map(|t| t.text).collect::<Vec<_>>();
        assert_eq!(
            texts("where are conflicting arguments detected?"),
            [
                "conflicting",
                "conflict",
                "arguments",
                "argument",
                "detected",
                "detect",
                "where are conflicting arguments detected"
            ]
        );
        // The words of a question's frame go; `each` names code (`for_each`).
        assert_eq!(
            texts("what happens to each value, like whether"),
            ["each", "value", "valu", "what happens to each value like whether"]
        );
        // Nothing but stopwords: they are the query.
        assert_eq!(texts("how is it"), ["how", "is", "it", "how is it"]);
        assert_eq!(texts(&"word ".repeat(MAX_PHRASE_WORDS + 1)), ["word"]);
        // An identifier's stopword parts go, the identifier stays.
        assert_eq!(texts("is_set"), ["is_set", "set"]);
    }

    #[test]
    fn stems_column_holds_the_stems_that_differ() {
        assert_eq!(stems("fn parsedValues(x) { parse(); cats do it }"), "pars valu pars cat");
    }
}
