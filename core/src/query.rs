//! The query, analysed once per search. Every ranking stage of the engine
//! reads what it needs from this one value — the verbatim phrase, the terms
//! the head is read again for, the shape the code ranking follows — instead
//! of splitting the text again.

use crate::code_rank::QueryShape;
use crate::evidence;

/// One search's query, with what the ranking stages read of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The query as the user wrote it (no model prefix).
    pub text: String,
    /// Its words when it has two or more, as a verbatim match compares them
    /// ([`contains_verbatim`]).
    pub phrase: Option<String>,
    /// The stemmed terms a candidate's evidence is read for
    /// ([`crate::evidence`]); none for a query of stopwords.
    pub terms: Vec<String>,
    /// What the query is for the code ranking.
    pub shape: QueryShape,
}

impl Query {
    pub fn new(text: &str) -> Query {
        Query {
            text: text.to_owned(),
            phrase: verbatim_phrase(text),
            terms: evidence::query_terms(text),
            shape: QueryShape::of(text),
        }
    }

    /// The index tokens whose document frequencies weigh [`Query::terms`],
    /// each once, in first-seen order.
    pub fn lookup_tokens(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for token in self.terms.iter().flat_map(|t| evidence::lookup_tokens(t)) {
            if !out.iter().any(|o| o == token) {
                out.push(token.to_owned());
            }
        }
        out
    }
}

/// The words of a query of two words or more, as [`contains_verbatim`]
/// looks for them; `None` for a query of fewer words.
pub fn verbatim_phrase(query: &str) -> Option<String> {
    let phrase = normalized_words(query);
    (phrase.split(' ').filter(|w| !w.is_empty()).count() >= 2).then_some(phrase)
}

/// Whether `document` holds `phrase` ([`verbatim_phrase`]) word for word:
/// letters and digits compared case-insensitively, anything else between
/// words ignored.
pub fn contains_verbatim(document: &str, phrase: &str) -> bool {
    normalized_words(document).contains(phrase)
}

/// Lower-cased runs of letters and digits, each between single spaces.
fn normalized_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        out.extend(word.chars().flat_map(char::to_lowercase));
        out.push(' ');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_analysed_for_every_stage() {
        let q = Query::new("where is loadConfig parsing the files");
        assert_eq!(q.phrase.as_deref(), Some(" where is loadconfig parsing the files "));
        assert_eq!(q.terms, ["load", "config", "loadconfig", "pars", "file"]);
        assert_eq!(q.lookup_tokens(), ["load", "config", "loadconfig", "pars", "file"]);
        assert_eq!(q.shape.identifiers, ["loadConfig"]);
        let symbol = Query::new("spawn_blocking");
        assert_eq!(symbol.shape.symbol.as_deref(), Some("spawn_blocking"));
        assert_eq!(symbol.phrase.as_deref(), Some(" spawn blocking "));
        // Each part stemmed, then the whole name; a name is looked up by its parts.
        assert_eq!(symbol.terms, ["spawn", "block", "spawn_blocking"]);
        assert_eq!(symbol.lookup_tokens(), ["spawn", "block", "blocking"]);
        assert!(Query::new("how is the").terms.is_empty());
    }
}
