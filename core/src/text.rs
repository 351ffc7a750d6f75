//! How text becomes words, for every ranking that reads words: the
//! embedded store's full-text index and its queries, the code ranking, the
//! lexical rerankers and the evaluation's BM25 baseline. One split, so that
//! a word a query is searched by is a word the index holds.
//!
//! A *word* is a run of letters, digits and `_` (`parse_config`,
//! `loadConfig`, `v2`); its *parts* split it again at `_` and where code
//! joins words without a separator: lower → upper (`loadConfig` → `load`,
//! `Config`), an acronym before a word (`HTTPServer` → `HTTP`, `Server`) and
//! letter ↔ digit (`utf8` → `utf`, `8`).
//!
//! The hash embedder keeps its own split: it is part of what its vectors
//! are, and a store's vectors must stay comparable with its queries'.

/// The words of `text`, in order, with repeats.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// The parts of `word` (see the module docs), in order, not lower-cased;
/// a word of one part gives itself.
pub fn parts(word: &str) -> Vec<&str> {
    word.split('_').filter(|p| !p.is_empty()).flat_map(case_parts).collect()
}

/// `piece` (no `_`) split at case and digit boundaries.
fn case_parts(piece: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = piece.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (prev, cur) = (chars[i - 1].1, chars[i].1);
        let next = chars.get(i + 1).map(|c| c.1);
        if (prev.is_lowercase() && cur.is_uppercase())
            || prev.is_alphabetic() != cur.is_alphabetic()
            || (prev.is_uppercase() && cur.is_uppercase() && next.is_some_and(char::is_lowercase))
        {
            out.push(&piece[start..chars[i].0]);
            start = chars[i].0;
        }
    }
    if start < piece.len() {
        out.push(&piece[start..]);
    }
    out
}

/// The lower-cased tokens of `text`: each word, then its parts when it has
/// more than one (`loadConfig` → `loadconfig`, `load`, `config`).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in words(text) {
        out.push(word.to_lowercase());
        let parts = parts(word);
        if parts.len() > 1 {
            out.extend(parts.into_iter().map(str::to_lowercase));
        }
    }
    out
}

/// English words that carry no topic in a question ("how does the parser
/// handle ..."): articles, pronouns, auxiliaries, question words, the
/// commonest prepositions, and the words that frame a question ("what
/// happens when", "like", "whether"). Code rarely uses them, so their IDF
/// is high and they would pull in whatever chunk's comments talk the most.
/// Words that name things in code stay: `any`
/// (`matched_path_or_any_parents`), `each` (`for_each`), `some` (`Some`),
/// `work`. Sorted, for [`is_stopword`].
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "being", "between", "by", "can", "could", "did", "do",
    "does", "doing", "for", "from", "had", "happen", "happens", "has", "have", "how", "i", "in", "into", "is", "it",
    "its", "like", "me", "my", "of", "on", "or", "our", "should", "so", "such", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "use", "used", "using", "via", "was", "way", "we", "were", "what",
    "when", "where", "whether", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Whether `word` (lower-cased) is one of the stopwords above.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_punctuation_and_keep_underscores() {
        assert_eq!(
            words("fn parse_config(x: &str) -> Café {}").collect::<Vec<_>>(),
            ["fn", "parse_config", "x", "str", "Café"]
        );
        assert_eq!(words("  ?! ").count(), 0);
    }

    #[test]
    fn parts_split_identifiers_as_code_joins_them() {
        assert_eq!(parts("loadConfig"), ["load", "Config"]);
        assert_eq!(parts("HTTPServer2go"), ["HTTP", "Server", "2", "go"]);
        assert_eq!(parts("parse_jsonBody"), ["parse", "json", "Body"]);
        assert_eq!(parts("__init__"), ["init"]);
        assert_eq!(parts("plain"), ["plain"]);
        assert_eq!(parts("_"), [] as [&str; 0]);
    }

    #[test]
    fn tokens_are_the_word_then_its_parts_lower_cased() {
        assert_eq!(tokens("loadConfig now"), ["loadconfig", "load", "config", "now"]);
        assert_eq!(tokens("is_set"), ["is_set", "is", "set"]);
    }

    #[test]
    fn the_stopword_list_is_sorted() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stopword("the") && is_stopword("whether") && !is_stopword("each"));
    }
}
