//! The second look at the hybrid ranking's head: how much of the query each
//! of the first candidates holds, and where.
//!
//! Reciprocal-rank fusion knows only ranks. Read query by query, the chunk
//! a question is about is most often already among the first twenty, below
//! chunks that one ranking loves for a single rare word: a doc comment that
//! mentions it, a file's license header, a test. What tells them apart is
//! plain to see in the text: the right chunk names the query's words
//! (its path, its symbols, the names it defines), holds most of them, and
//! holds them in code rather than in comments. So the first
//! [`HybridOptions::rerank`](crate::HybridOptions) fused candidates are
//! ordered again by
//!
//! `−ln(rank) + 2.6·names + 1.7·coverage − 0.8·comments − first`
//!
//! where `names` is the fraction of the query's terms found in the chunk's
//! names (path, symbols, the names its lines define), `coverage` the
//! IDF-weighted fraction found anywhere in it (names included), `comments`
//! the share of the chunk's words that stand in comments (code chunks), and
//! `first` whether the chunk starts its file (a license, imports, a
//! module's preamble). The weights' proportions were fitted by pairwise
//! logistic regression on the tuned query sets and held stable when each
//! language was left out in turn; their scale (twice the fitted one) and
//! the unweighted `names` measured best on the tuned sets' mean. docs/evaluation.md ("The head of
//! the hybrid ranking read again") has the numbers. A chunk that holds
//! every term in its names outweighs a fused lead of `e^4.3 ≈ 74` ranks, so
//! within the head the evidence decides, and the fused rank breaks what it
//! leaves even.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

use crate::record::Metadata;
use crate::text;

/// The English Snowball stemmer, as the lexical index stems its words.
fn stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

/// The weights of the score above, in its order.
const W_NAMES: f64 = 2.6;
const W_COVERAGE: f64 = 1.7;
const W_COMMENTS: f64 = 0.8;
const W_FIRST: f64 = 1.0;

/// One term of the query with its weight.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Weighted {
    pub term: String,
    pub idf: f64,
}

/// A query's terms as [`score`] compares them: each word that is not a
/// stopword, by its stemmed identifier parts and, when it has several, as
/// the whole identifier lower-cased; without repeats. A query of stopwords
/// only has none.
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let stemmer = stemmer();
    let mut out: Vec<String> = Vec::new();
    for word in words(query).filter(|w| !text::is_stopword(&w.to_lowercase())) {
        for term in word_terms(&stemmer, word) {
            if !out.contains(&term) {
                out.push(term);
            }
        }
    }
    out
}

/// The tokens FTS5 indexes of `term`, whose rarest gives its document
/// frequency: a stem is a token of the `stems` column, `load_config` is in
/// no more rows than its rarer part.
pub(crate) fn lookup_tokens(term: &str) -> impl Iterator<Item = &str> {
    term.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty())
}

/// FTS5's IDF, kept positive: `ln(1 + (N − n + 0.5) / (n + 0.5))`; a term no
/// row holds weighs `ln(1 + N)`.
pub(crate) fn idf(rows: u64, hits: Option<u64>) -> f64 {
    let n = rows as f64;
    match hits {
        Some(h) if h > 0 => (1.0 + (n - h as f64 + 0.5) / (h as f64 + 0.5)).ln(),
        _ => (1.0 + n).ln(),
    }
}

/// What a chunk holds of the query, each in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Evidence {
    /// Share of the terms in the chunk's names, each counting the same.
    pub names: f64,
    /// IDF-weighted share of the terms anywhere in the chunk, names included.
    pub coverage: f64,
    /// Share of the chunk's words that stand in comments.
    pub comments: f64,
    /// Whether the chunk starts its file.
    pub first: bool,
}

/// Reads chunks for the query's terms. Each distinct word part is stemmed
/// once per query, however many of the chunks use it: stemming every word
/// of twenty chunks again would cost more than the fused search itself.
pub(crate) struct Matcher<'a> {
    terms: &'a [Weighted],
    /// Each term's position in `terms`.
    index: HashMap<&'a str, usize>,
    /// A lower-cased word part and the term its stem is, if any.
    parts: HashMap<String, Option<usize>>,
    stemmer: Stemmer,
    buffer: String,
}

impl<'a> Matcher<'a> {
    pub fn new(terms: &'a [Weighted]) -> Self {
        let index = terms.iter().enumerate().map(|(i, t)| (t.term.as_str(), i)).collect();
        Matcher { terms, index, parts: HashMap::new(), stemmer: stemmer(), buffer: String::new() }
    }

    /// The evidence of one chunk.
    pub fn of(&mut self, document: &str, metadata: &Metadata) -> Evidence {
        let body = without_header(document);
        let (code, comments) = if metadata.chunking_strategy == CODE_STRATEGY {
            split_comments(body)
        } else {
            (body.to_owned(), String::new())
        };
        let mut anywhere = vec![false; self.terms.len()];
        let mut counts = [0usize; 2];
        for (i, text) in [&code, &comments].into_iter().enumerate() {
            for word in words(text) {
                counts[i] += 1;
                self.mark(word, &mut anywhere);
            }
        }
        let mut named = vec![false; self.terms.len()];
        let symbols = metadata.symbol.split(", ").map(|s| s.rsplit(':').next().unwrap_or(s));
        let defined = body.lines().filter_map(defined_name);
        for name in metadata.path.split(['/', '.']).chain(symbols).chain(defined) {
            for word in words(name) {
                self.mark(word, &mut named);
            }
        }
        for (a, n) in anywhere.iter_mut().zip(&named) {
            *a |= n;
        }
        let total: f64 = self.terms.iter().map(|t| t.idf).sum();
        let weighted = self.terms.iter().zip(&anywhere).filter(|(_, f)| **f).map(|(t, _)| t.idf).sum::<f64>();
        let words = counts[0] + counts[1];
        Evidence {
            // A name is a few words: one that holds a common term of the
            // query says as much about the chunk as one that holds its rarest.
            names: if named.is_empty() {
                0.0
            } else {
                named.iter().filter(|f| **f).count() as f64 / named.len() as f64
            },
            coverage: if total > 0.0 { weighted / total } else { 0.0 },
            comments: if words > 0 { counts[1] as f64 / words as f64 } else { 0.0 },
            first: metadata.start_line == 1,
        }
    }

    /// Marks the terms `word` holds ([`word_terms`]) in `found`.
    fn mark(&mut self, word: &str, found: &mut [bool]) {
        let mut parts = 0;
        for piece in word.split(['_', '$']).filter(|p| !p.is_empty()) {
            for part in AsciiCamelParts::new(piece) {
                parts += 1;
                self.buffer.clear();
                self.buffer.push_str(part);
                self.buffer.make_ascii_lowercase();
                let hit = match self.parts.get(self.buffer.as_str()) {
                    Some(&hit) => hit,
                    None => {
                        let hit = self.index.get(self.stemmer.stem(&self.buffer).as_ref()).copied();
                        self.parts.insert(self.buffer.clone(), hit);
                        hit
                    }
                };
                if let Some(i) = hit {
                    found[i] = true;
                }
            }
        }
        if parts > 1 {
            self.buffer.clear();
            self.buffer.push_str(word);
            self.buffer.make_ascii_lowercase();
            if let Some(&i) = self.index.get(self.buffer.as_str()) {
                found[i] = true;
            }
        }
    }
}

impl Evidence {
    /// The score of the chunk at 1-based `rank` of the fused list.
    pub fn score(&self, rank: usize) -> f64 {
        -(rank as f64).ln() + W_NAMES * self.names + W_COVERAGE * self.coverage
            - W_COMMENTS * self.comments
            - if self.first { W_FIRST } else { 0.0 }
    }
}

/// The order of the first `evidence.len()` fused candidates by
/// [`Evidence::score`]: indices into them, best first; equal scores keep
/// the fused order.
pub(crate) fn order(evidence: &[Evidence]) -> Vec<usize> {
    let scores: Vec<f64> = evidence.iter().enumerate().map(|(i, e)| e.score(i + 1)).collect();
    let mut order: Vec<usize> = (0..evidence.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// The query terms weighted by `frequency` (rows holding a token, `None`
/// when it cannot be read) over `rows` rows; each token looked up once.
pub(crate) fn weigh<E>(
    terms: Vec<String>,
    rows: u64,
    mut frequency: impl FnMut(&str) -> Result<u64, E>,
) -> Result<Vec<Weighted>, E> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::with_capacity(terms.len());
    for term in terms {
        let mut hits: Option<u64> = None;
        for token in lookup_tokens(&term) {
            let df = match seen.get(token) {
                Some(&df) => df,
                None => {
                    let df = frequency(token)?;
                    seen.insert(token.to_owned(), df);
                    df
                }
            };
            hits = Some(hits.map_or(df, |h| h.min(df)));
        }
        out.push(Weighted { idf: idf(rows, hits), term });
    }
    Ok(out)
}

/// Runs of letters, digits, `_` and `$` (a JavaScript name's letter).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')).filter(|w| !w.is_empty())
}

/// A word's stemmed identifier parts, then the whole word lower-cased when
/// it has several parts.
fn word_terms(stemmer: &Stemmer, word: &str) -> Vec<String> {
    let parts: Vec<&str> = word.split(['_', '$']).filter(|p| !p.is_empty()).flat_map(text::parts).collect();
    let mut out: Vec<String> = parts.iter().map(|p| stemmer.stem(&p.to_ascii_lowercase()).into_owned()).collect();
    if parts.len() > 1 {
        out.push(word.to_ascii_lowercase());
    }
    out
}

/// [`text::parts`] of an ASCII word, without allocating: [`words`]
/// yields ASCII only, and the chunks' words are the bulk of a second look.
struct AsciiCamelParts<'a> {
    piece: &'a str,
    start: usize,
}

impl<'a> AsciiCamelParts<'a> {
    fn new(piece: &'a str) -> Self {
        debug_assert!(piece.is_ascii());
        AsciiCamelParts { piece, start: 0 }
    }
}

impl<'a> Iterator for AsciiCamelParts<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let b = self.piece.as_bytes();
        if self.start >= b.len() {
            return None;
        }
        let mut i = self.start + 1;
        while i < b.len() {
            let (prev, cur) = (b[i - 1], b[i]);
            let next_lower = b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            if (prev.is_ascii_lowercase() && cur.is_ascii_uppercase())
                || prev.is_ascii_alphabetic() != cur.is_ascii_alphabetic()
                || (prev.is_ascii_uppercase() && cur.is_ascii_uppercase() && next_lower)
            {
                break;
            }
            i += 1;
        }
        let part = &self.piece[self.start..i];
        self.start = i;
        Some(part)
    }
}

/// The document without the header the indexer puts before a chunk's text
/// (`Source: …`, `Type: …`, up to the first empty line).
fn without_header(document: &str) -> &str {
    if !document.starts_with("Source: ") {
        return document;
    }
    document.find("\n\n").map_or(document, |i| &document[i + 2..])
}

/// The `chunking_strategy` of records whose comments go to their own column.
pub(crate) const CODE_STRATEGY: &str = "code";

/// Where a comment that spans lines ends, while inside one.
#[derive(Clone, Copy, PartialEq)]
enum Open {
    /// `*/`
    Block,
    /// A docstring's closing quotes.
    Docstring(&'static str),
}

/// The document's code lines and its comment lines, each joined by `\n`: a
/// line is a comment when it starts (after indentation) with `//`, `/*` or
/// `# `, lies inside a `/* */` block, or is part of a Python docstring (a
/// string that starts its line). A trailing comment stays with its code.
fn split_comments(document: &str) -> (String, String) {
    let mut code = String::with_capacity(document.len());
    let mut comments = String::new();
    let mut open: Option<Open> = None;
    for line in document.lines() {
        let t = line.trim_start();
        let is_comment = match open {
            Some(Open::Block) => {
                if t.contains("*/") {
                    open = None;
                }
                true
            }
            Some(Open::Docstring(quote)) => {
                if t.contains(quote) {
                    open = None;
                }
                true
            }
            None => {
                if t.starts_with("//") {
                    true
                } else if let Some(rest) = t.strip_prefix("/*") {
                    if !rest.contains("*/") {
                        open = Some(Open::Block);
                    }
                    true
                } else if let Some(rest) = t.strip_prefix('#') {
                    rest.is_empty() || rest.starts_with([' ', '\t', '#'])
                } else if let Some(quote) = ["\"\"\"", "'''"].into_iter().find(|q| docstring_start(t, q)) {
                    let after = &t[t.find(quote).map_or(0, |i| i + 3)..];
                    if !after.contains(quote) {
                        open = Some(Open::Docstring(quote));
                    }
                    true
                } else {
                    false
                }
            }
        };
        let out = if is_comment { &mut comments } else { &mut code };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    (code, comments)
}

/// Whether `line` (indentation removed) opens a string with `quote`, after
/// at most a string prefix (`r"""`, `b'''`).
fn docstring_start(line: &str, quote: &str) -> bool {
    let prefix = line.find(quote).map(|i| &line[..i]);
    prefix
        .is_some_and(|p| p.len() <= 2 && p.bytes().all(|b| matches!(b.to_ascii_lowercase(), b'r' | b'b' | b'u' | b'f')))
}

/// Words that may precede a definition keyword on its line.
const MODIFIERS: &[&str] = &[
    "abstract",
    "async",
    "declare",
    "default",
    "export",
    "extern",
    "final",
    "private",
    "protected",
    "pub",
    "public",
    "static",
    "unsafe",
];

/// Keywords that introduce a named definition at the start of a line, in the
/// languages the indexer parses most.
const DEFINERS: &[&str] = &[
    "class",
    "def",
    "enum",
    "fn",
    "func",
    "function",
    "impl",
    "interface",
    "macro_rules",
    "mod",
    "module",
    "namespace",
    "struct",
    "trait",
    "type",
];

/// Keywords that define a name only at the top level (no indentation): a
/// module's constants, not a function's locals.
const TOP_LEVEL_DEFINERS: &[&str] = &["const", "let", "static", "var"];

/// The name a line defines (`pub fn parse_long_arg(`, `func (c *Client) Do(`,
/// `export const ZodString =`), if it starts with a definition keyword.
fn defined_name(line: &str) -> Option<&str> {
    let top_level = !line.starts_with([' ', '\t']);
    let mut rest = line.trim_start();
    loop {
        let word_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let word = &rest[..word_end];
        rest = &rest[word_end..];
        if MODIFIERS.contains(&word) {
            // `pub(crate)`
            if let Some(after) = rest.strip_prefix('(') {
                rest = &after[after.find(')')? + 1..];
            }
            rest = rest.trim_start();
            continue;
        }
        if !(DEFINERS.contains(&word) || (top_level && TOP_LEVEL_DEFINERS.contains(&word))) {
            return None;
        }
        break;
    }
    let mut rest = rest.strip_prefix('!').unwrap_or(rest);
    if !rest.starts_with(char::is_whitespace) && !rest.starts_with(['(', '<']) {
        return None;
    }
    rest = rest.trim_start();
    // A Go receiver or a Rust `impl<T>`'s parameters come before the name.
    for (open, close) in [('(', ')'), ('<', '>')] {
        if let Some(after) = rest.strip_prefix(open) {
            rest = after[after.find(close)? + 1..].trim_start();
        }
    }
    // `$` is part of a JavaScript name (`$ZodType`).
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str, symbol: &str, strategy: &str, start_line: i64) -> Metadata {
        Metadata {
            path: path.into(),
            symbol: symbol.into(),
            chunking_strategy: strategy.into(),
            start_line,
            ..Metadata::default()
        }
    }

    #[test]
    fn query_terms_are_stemmed_parts_and_whole_identifiers() {
        assert_eq!(
            query_terms("how does the parser handle loadConfig"),
            ["parser", "handl", "load", "config", "loadconfig"]
        );
        assert_eq!(query_terms("parse_long_arg parsing"), ["pars", "long", "arg", "parse_long_arg"]);
        assert!(query_terms("what is the").is_empty());
    }

    #[test]
    fn idf_follows_fts5_and_weighs_an_unseen_term_most() {
        assert!((idf(100, Some(10)) - (1.0 + 90.5 / 10.5f64).ln()).abs() < 1e-12);
        assert_eq!(idf(100, None), 101f64.ln());
        assert_eq!(idf(100, Some(0)), 101f64.ln());
        let frequencies = HashMap::from([("load", 40), ("config", 10), ("loadconfig", 2)]);
        let mut asked = Vec::new();
        let weighted = weigh::<()>(vec!["load".into(), "load_config".into(), "loadconfig".into()], 100, |t| {
            asked.push(t.to_owned());
            Ok(frequencies.get(t).copied().unwrap_or(0))
        })
        .unwrap();
        assert_eq!(asked, ["load", "config", "loadconfig"]);
        let idfs: Vec<f64> = weighted.iter().map(|w| w.idf).collect();
        assert_eq!(idfs, [idf(100, Some(40)), idf(100, Some(10)), idf(100, Some(2))]);
    }

    #[test]
    fn evidence_counts_names_code_and_comments() {
        let terms = vec![Weighted { term: "parser".into(), idf: 3.0 }, Weighted { term: "arg".into(), idf: 1.0 }];
        let document = "Source: o/r@main:src/parser.rs\nType: code\n\n// checks each arg\nfn check(x: u8) {\n    x\n}";
        let e = Matcher::new(&terms).of(document, &meta("src/parser.rs", "", "code", 10));
        // "parser" is in the path, one term of two; "arg" only in the comment.
        assert_eq!(e.names, 0.5);
        assert_eq!(e.coverage, 1.0);
        // comment: checks each arg; code: fn check x u8 x.
        assert_eq!(e.comments, 3.0 / 8.0);
        assert!(!e.first);
        // The header's path is not the chunk's text.
        let other = Matcher::new(&terms).of(document, &meta("src/lib.rs", "check", "markdown", 1));
        assert_eq!((other.names, other.coverage, other.comments, other.first), (0.0, 0.25, 0.0, true));
    }

    #[test]
    fn ascii_camel_parts_are_those_of_fts() {
        for word in ["parseHTTPConfig", "loadConfig2", "ABCd", "x", "URL", "v2beta1", "already", "HTTPServer9X"] {
            assert_eq!(AsciiCamelParts::new(word).collect::<Vec<_>>(), text::parts(word), "{word}");
        }
    }

    #[test]
    fn a_matcher_read_again_answers_as_a_new_one() {
        let terms: Vec<Weighted> = query_terms("parse the config loadConfig")
            .into_iter()
            .enumerate()
            .map(|(i, term)| Weighted { term, idf: 1.0 + i as f64 })
            .collect();
        let chunks = [
            (
                "Source: o/r@main:a.rs\nType: code\n\nfn load_config() {\n    // parses it\n}",
                meta("a.rs", "", "code", 3),
            ),
            ("fn run() { parsing(); loadConfig(); }", meta("src/config.rs", "run", "code", 1)),
            ("Nothing here, and nothing parsed.", meta("README.md", "", "markdown", 7)),
        ];
        let mut shared = Matcher::new(&terms);
        for _ in 0..2 {
            for (document, metadata) in &chunks {
                assert_eq!(shared.of(document, metadata), Matcher::new(&terms).of(document, metadata));
            }
        }
        // "loadConfig" as a whole and by its parts, "parsing" by its stem.
        let e = Matcher::new(&terms).of(chunks[1].0, &chunks[1].1);
        assert_eq!((e.coverage, e.first), (1.0, true));
        assert_eq!(e.names, 0.25);
    }

    #[test]
    fn evidence_outweighs_the_fused_rank_within_the_head() {
        let none = Evidence::default();
        let named = Evidence { names: 1.0, coverage: 1.0, ..Evidence::default() };
        let mut head = vec![none; 19];
        head.push(named);
        assert_eq!(order(&head)[..2], [19, 0]);
        // Half the terms (0.85) lifts the fourth over the second and third (ln 4 − ln 2 < 0.85 < ln 4).
        let half = Evidence { coverage: 0.5, ..Evidence::default() };
        assert_eq!(order(&[none, none, none, half]), [0, 3, 1, 2]);
        // Every term, in comments only: 1.7 − 0.8 = 0.9 lifts the third over the second, not the first.
        let commented = Evidence { coverage: 1.0, comments: 1.0, ..Evidence::default() };
        assert_eq!(order(&[none, none, commented]), [0, 2, 1]);
        // A file's first chunk (−1) falls below the next one, not two (ln 2 < 1 < ln 3).
        let preamble = Evidence { first: true, ..Evidence::default() };
        assert_eq!(order(&[preamble, none, none, none]), [1, 0, 2, 3]);
        assert_eq!(order(&[none, none]), [0, 1]);
    }

    #[test]
    fn comment_lines_leave_the_code() {
        let rust = "Source: a/b@main:src/lib.rs\n\
                    /// Parses `--name=value`.\n\
                    #[inline]\n\
                    pub fn parse(x: u8) -> u8 { // trailing\n\
                    \x20   /* a block\n\
                    \x20    * that goes on\n\
                    \x20    */\n\
                    \x20   x /* inline */ + 1\n\
                    }";
        let (code, comments) = split_comments(rust);
        assert_eq!(
            code,
            "Source: a/b@main:src/lib.rs\n#[inline]\npub fn parse(x: u8) -> u8 { // trailing\n    x /* inline */ + 1\n}"
        );
        assert_eq!(comments, "/// Parses `--name=value`.\n    /* a block\n     * that goes on\n     */");

        let python = "def f(x):\n    \"\"\"Doubles x.\n\n    Returns it.\n    \"\"\"\n    # why\n    return 2 * x\n\
                      r'''one line'''\n#include <x.h>\n#!/bin/sh\n##";
        let (code, comments) = split_comments(python);
        assert_eq!(code, "def f(x):\n    return 2 * x\n#include <x.h>\n#!/bin/sh");
        assert_eq!(comments, "    \"\"\"Doubles x.\n\n    Returns it.\n    \"\"\"\n    # why\nr'''one line'''\n##");
    }

    #[test]
    fn finds_the_name_a_line_defines() {
        let cases = [
            ("pub(crate) fn parse_long_arg(", Some("parse_long_arg")),
            ("func (c *Client) Do(req *Request) (*Response, error) {", Some("Do")),
            ("type Handler interface {", Some("Handler")),
            ("export const ZodString: core.$constructor<ZodString> = ", Some("ZodString")),
            ("    async def handle_request(self):", Some("handle_request")),
            ("impl<T: Clone> TypedValueParser for Wrapped<T> {", Some("TypedValueParser")),
            ("macro_rules! arg_impl {", Some("arg_impl")),
            ("export default class Foo {", Some("Foo")),
            ("export interface $ZodCatch<T extends SomeType = $ZodType> extends $ZodType {", Some("$ZodCatch")),
            // A local, a call and prose are not definitions.
            ("    let value = 1;", None),
            ("    fnord(x)", None),
            ("// type of the value", None),
            ("const (", None),
        ];
        for (line, want) in cases {
            assert_eq!(defined_name(line), want, "{line}");
        }
    }
}
