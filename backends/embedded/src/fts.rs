//! What goes into the full-text index and how a query becomes an FTS5 match
//! expression.
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
//! then scores above any other form of the word. The same column holds the
//! word each short form of code stands for (`num_args` → "number"), so a
//! question's words reach code that abbreviates them. A `names` column
//! holds what a chunk is about by its names: the file's path, the symbols
//! the chunker recorded and the names the chunk's lines define; `bm25()`
//! weighs it above the text ([`COLUMNS`]), so "how does the parser
//! handle ..." prefers `parser.rs`, BM25F-style.
//!
//! In code, what the comments say counts less than what the code does: a
//! `comments` column holds a code chunk's comment lines (and their
//! identifier parts and stems), which leave `body`, `idents` and `stems`,
//! and it weighs a quarter of a word of code. Without it, a builder method's
//! long doc comment, whose examples name every option, outranks the parser
//! code a question is about, and a doc comment that repeats a question's
//! words outranks the definition it documents. Markdown and other text are
//! not split: their headings are not comments.
//!
//! Every column is searched by every term, so FTS5's IDF (rows holding the
//! term in any column) and the bound `lexical.rs` prunes with stay valid.

use rr_core::Metadata;
use rust_stemmers::{Algorithm, Stemmer};

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
/// them from [`columns`]; every ranking (FTS5's `bm25()` and the scoring in
/// `postings.rs`) reads the weights from here. The weights only scale a
/// term's frequency, so a row's score per term stays below `idf · (k1 + 1)`.
/// Chosen on the real query sets (docs/evaluation.md, "Tuning the lexical
/// ranking" and "Comments and code"): a name match counts three times a word
/// of code (2 and 5 measure alike), a stem match and a comment word a quarter
/// (comments at 0.5 keep most of the doc-comment noise, 0.1 loses the
/// comments that do answer).
pub(crate) const COLUMNS: &[Column] = &[
    Column { name: "body", weight: 1.0 },
    Column { name: "idents", weight: 1.0 },
    Column { name: "stems", weight: 0.25 },
    Column { name: "names", weight: 3.0 },
    Column { name: "comments", weight: 0.25 },
];

/// The `chunking_strategy` of records whose comments go to their own column.
pub(crate) const CODE_STRATEGY: &str = "code";

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
pub(crate) fn columns(document: &str, metadata: &Metadata) -> [String; COLUMNS.len()] {
    let names = names(document, metadata);
    if metadata.chunking_strategy != CODE_STRATEGY {
        return [document.to_owned(), idents(document), stems(document), names, String::new()];
    }
    let (code, comments) = split_comments(document);
    let (code_idents, code_stems) = (idents(&code), stems(&code));
    let comments = [idents(&comments), stems(&comments)].into_iter().fold(comments, |mut text, more| {
        if !more.is_empty() {
            text.push('\n');
            text.push_str(&more);
        }
        text
    });
    [code, code_idents, code_stems, names, comments]
}

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
pub(crate) fn split_comments(document: &str) -> (String, String) {
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

/// Short forms code spells words with, and the words they stand for.
/// Questions say "number of values" where code says `num_args`, so a
/// chunk's `stems` column also holds the word of each short form it uses
/// (its stem, when that differs): the question's word then finds the code
/// at the weight of a stem, below a chunk that spells the word out.
/// Keywords and forms that stand in nearly every chunk (`fn`, `impl`, `var`,
/// `err`, `str`, `src`, `id`) are left out: they would add a word to every
/// chunk of a language and name nothing. Measured in docs/evaluation.md,
/// "Short forms spelled out".
const SPELLED_OUT: &[(&str, &[&str])] = &[
    ("addr", &["address"]),
    ("admin", &["administrator"]),
    ("alloc", &["allocate", "allocation"]),
    ("arg", &["argument"]),
    ("args", &["arguments"]),
    ("attr", &["attribute"]),
    ("attrs", &["attributes"]),
    ("auth", &["authentication", "authorization"]),
    ("buf", &["buffer"]),
    ("bufs", &["buffers"]),
    ("calc", &["calculate"]),
    ("cert", &["certificate"]),
    ("certs", &["certificates"]),
    ("cfg", &["configuration", "config"]),
    ("cmd", &["command"]),
    ("cmds", &["commands"]),
    ("cmp", &["compare"]),
    ("config", &["configuration"]),
    ("conn", &["connection"]),
    ("conns", &["connections"]),
    ("ctx", &["context"]),
    ("curr", &["current"]),
    ("db", &["database"]),
    ("delim", &["delimiter"]),
    ("desc", &["description"]),
    ("dest", &["destination"]),
    ("dir", &["directory"]),
    ("dirs", &["directories"]),
    ("dst", &["destination"]),
    ("env", &["environment"]),
    ("exec", &["execute"]),
    ("expr", &["expression"]),
    ("exprs", &["expressions"]),
    ("hex", &["hexadecimal"]),
    ("idx", &["index"]),
    ("info", &["information"]),
    ("init", &["initialize", "initialization"]),
    ("iter", &["iterator"]),
    ("len", &["length"]),
    ("max", &["maximum"]),
    ("min", &["minimum"]),
    ("msg", &["message"]),
    ("msgs", &["messages"]),
    ("num", &["number"]),
    ("nums", &["numbers"]),
    ("obj", &["object"]),
    ("opt", &["option"]),
    ("opts", &["options"]),
    ("param", &["parameter"]),
    ("params", &["parameters"]),
    ("passwd", &["password"]),
    ("pkg", &["package"]),
    ("pos", &["position"]),
    ("prev", &["previous"]),
    ("ptr", &["pointer"]),
    ("recv", &["receive"]),
    ("ref", &["reference"]),
    ("refs", &["references"]),
    ("repo", &["repository"]),
    ("req", &["request"]),
    ("resp", &["response"]),
    ("sep", &["separator"]),
    ("seq", &["sequence"]),
    ("spec", &["specification"]),
    ("stmt", &["statement"]),
    ("subcmd", &["subcommand"]),
    ("tmp", &["temporary"]),
    ("tx", &["transaction"]),
    ("txn", &["transaction"]),
    ("util", &["utility"]),
    ("utils", &["utilities"]),
    ("val", &["value"]),
    ("vals", &["values"]),
];

/// The words [`SPELLED_OUT`] gives for a short form (lower-case).
fn spelled_out(part: &str) -> &'static [&'static str] {
    SPELLED_OUT.binary_search_by(|(k, _)| (*k).cmp(part)).map_or(&[], |i| SPELLED_OUT[i].1)
}

/// The stems of the document's words and identifier parts that differ from
/// the word, and the word of each short form among them ([`SPELLED_OUT`]),
/// stemmed as a query stems it.
fn stems(document: &str) -> String {
    let stemmer = stemmer();
    let mut out = String::new();
    let mut push = |text: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(text);
    };
    for word in document.split(|c: char| !c.is_ascii_alphanumeric()) {
        for part in camel_parts(word) {
            let part = part.to_ascii_lowercase();
            if let Some(stem) = stem_of(&stemmer, &part) {
                push(&stem);
            }
            for word in spelled_out(&part) {
                match stem_of(&stemmer, word) {
                    Some(stem) => push(&stem),
                    None => push(word),
                }
            }
        }
    }
    out
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

/// The names a chunk is about: its file's path, the chunker's symbols and
/// the names its lines define, each whole, by parts and by stems.
fn names(document: &str, metadata: &Metadata) -> String {
    let mut raw: Vec<&str> = metadata.path.split(['/', '.', '-']).collect();
    for symbol in metadata.symbol.split(", ") {
        raw.push(symbol.rsplit(':').next().unwrap_or(symbol));
    }
    raw.extend(document.lines().filter_map(defined_name));
    let stemmer = stemmer();
    let mut out: Vec<String> = Vec::new();
    for name in raw {
        for piece in name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
            out.push(piece.to_ascii_lowercase());
            let parts = camel_parts(piece);
            if parts.len() > 1 {
                out.extend(parts.iter().map(|p| p.to_ascii_lowercase()));
            }
            for part in parts {
                out.extend(stem_of(&stemmer, &part.to_ascii_lowercase()));
            }
        }
    }
    out.join(" ")
}

/// The name a line defines (`pub fn parse_long_arg(`, `func (c *Client) Do(`,
/// `export const ZodString =`), if it starts with a definition keyword.
pub(crate) fn defined_name(line: &str) -> Option<&str> {
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

/// One term of a lexical query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Term {
    /// Lower-cased letters, digits and `_`.
    pub text: String,
    /// Whether `unicode61` indexes the term as exactly this one token (ASCII
    /// letters and digits only), so its document frequency can be looked up.
    pub single_token: bool,
}

/// English words that carry no topic in a question ("how does the parser
/// handle ..."): articles, pronouns, auxiliaries, question words, the
/// commonest prepositions, and the words that frame a question ("what
/// happens when", "like", "whether"). Code rarely uses them, so their IDF
/// is high and they would pull in whatever chunk's comments talk the most;
/// a query made of nothing else keeps them. Words that name things in code
/// stay searchable even where a question uses them as plain English: `any`
/// (`matched_path_or_any_parents`), `each` (`for_each`), `some` (`Some`),
/// `work`.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "being", "by", "can", "could", "did", "do", "does",
    "doing", "for", "from", "had", "happen", "happens", "has", "have", "how", "i", "in", "into", "is", "it", "its",
    "like", "me", "my", "of", "on", "or", "our", "should", "so", "such", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "was", "way", "we", "were", "what", "when", "where", "whether",
    "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Whether `word` (lower-cased) is one of [`STOPWORDS`].
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// The terms of `query`: each run of letters, digits and `_`, plus its
/// camelCase / snake_case parts, lower-cased, without [`STOPWORDS`] (unless
/// nothing else is left), each followed by its stem when that differs.
/// Without repeats, at most [`MAX_TERMS`].
pub(crate) fn query_terms(query: &str) -> Vec<Term> {
    let mut words: Vec<String> = Vec::new();
    for word in query.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        words.push(word.to_lowercase());
        let pieces: Vec<&str> = word.split('_').collect();
        for piece in &pieces {
            let parts = camel_parts(piece);
            if pieces.len() > 1 || parts.len() > 1 {
                words.extend(parts.into_iter().map(str::to_lowercase));
            }
        }
    }
    words.retain(|w| !w.is_empty());
    if words.iter().any(|w| !is_stopword(w)) {
        words.retain(|w| !is_stopword(w));
    }
    let stemmer = stemmer();
    let stemmed = words.into_iter().flat_map(|word| {
        let stem = stem_of(&stemmer, &word);
        std::iter::once(word).chain(stem)
    });
    let mut terms: Vec<Term> = Vec::new();
    for text in stemmed {
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

/// Splits at lower→upper, letter↔digit and `ABCd` → `AB`, `Cd` boundaries.
pub(crate) fn camel_parts(piece: &str) -> Vec<&str> {
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
        assert_eq!(expr("parse_config"), Some(r#""parse_config" OR "parse" OR "pars" OR "config""#.into()));
        assert_eq!(expr(r#"a" OR x:* NEAR(b)"#), Some(r#""x" OR "near" OR "b""#.into()));
        assert_eq!(expr("  ?! "), None);
        assert_eq!(expr("café"), Some(r#""café""#.into()));
        let single: Vec<bool> = query_terms("parse_config café x2").iter().map(|t| t.single_token).collect();
        assert_eq!(single, [false, true, true, true, false, true, true, true]);
    }

    #[test]
    fn questions_lose_their_stopwords_and_gain_stems() {
        let texts = |q: &str| query_terms(q).into_iter().map(|t| t.text).collect::<Vec<_>>();
        assert_eq!(
            texts("where are conflicting arguments detected?"),
            ["conflicting", "conflict", "arguments", "argument", "detected", "detect",]
        );
        // The words of a question's frame go; `each` names code (`for_each`).
        assert_eq!(texts("what happens to each value, like whether"), ["each", "value", "valu"]);
        // Nothing but stopwords: they are the query.
        assert_eq!(texts("how is it"), ["how", "is", "it"]);
        assert_eq!(texts(&"word ".repeat(100)), ["word"]);
        // An identifier's stopword parts go, the identifier stays.
        assert_eq!(texts("is_set"), ["is_set", "set"]);
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
    fn comments_get_their_own_column_in_code_only() {
        let document = "Source: a/b@main:src/x.rs\n/// Loads the parsedConfig.\nfn load() {}";
        let code = Metadata { path: "src/x.rs".into(), chunking_strategy: "code".into(), ..Default::default() };
        let [body, idents, stems, _, comments] = columns(document, &code);
        assert_eq!(body, "Source: a/b@main:src/x.rs\nfn load() {}");
        assert_eq!((idents.as_str(), stems.as_str()), ("", "sourc"));
        assert_eq!(comments, "/// Loads the parsedConfig.\nparsed config\nload pars configur");
        let markdown = Metadata { chunking_strategy: "markdown".into(), ..code };
        let [body, _, _, _, comments] = columns("# Loading\n\nHow it loads.", &markdown);
        assert_eq!((body.as_str(), comments.as_str()), ("# Loading\n\nHow it loads.", ""));
    }

    #[test]
    fn stems_column_holds_the_stems_that_differ() {
        assert_eq!(stems("fn parsedValues(x) { parse(); cats do it }"), "pars valu pars cat");
    }

    #[test]
    fn short_forms_are_spelled_out_in_the_stems_column() {
        // `num` → "number" (its own stem), `vals` → its stem `val` and
        // "valu" (the stem of "values"), `cfg` → both of its words; `fn` and
        // `id` stay short.
        assert_eq!(stems("fn num_args(vals) { cfg.id }"), "number arg argument val valu configur config");
        assert_eq!(spelled_out("env"), ["environment"]);
        assert_eq!(spelled_out("fn"), [] as [&str; 0]);
    }

    #[test]
    fn word_tables_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(SPELLED_OUT.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn names_come_from_path_symbol_and_definitions() {
        let metadata = Metadata {
            path: "src/parser/arg_matcher.rs".into(),
            symbol: "impl_item:ArgMatcher, function_item:start".into(),
            ..Default::default()
        };
        let document = "Source: a/b@main:src/parser/arg_matcher.rs\n\
                        pub(crate) fn fill_in_global_values(&mut self) {}\n\
                        /// fn not_a_definition\n";
        assert_eq!(
            names(document, &metadata),
            "src parser arg matcher rs argmatcher arg matcher start fill in global values valu"
        );
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
