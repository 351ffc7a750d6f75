//! A query set from a repository's own doc comments, the CodeSearchNet way:
//! the first paragraph of a definition's doc comment is the query, the
//! definition is the target, and the comment is blanked from a copy of the
//! repository so that the answer is not simply the text of the question.
//!
//! Definitions are the nodes the navigation tools call functions and
//! classes ([`entity_type_of`]), found with the indexer's own tree-sitter
//! grammars. The chunk metadata alone is not enough here: the chunker splits
//! only at top-level declarations (the reference indexer's split points),
//! so methods, and Rust's free functions, never get a symbol of their own,
//! and they carry most of the doc comments.
//!
//! Blanked comments become empty lines (a docstring that is a body's only
//! statement becomes `pass`), so every line number, and every target's line
//! range, stays valid in the copy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use tree_sitter::{Node, Parser};

use rr_indexer::entity_type_of;

/// Doc comments shorter than this many words make no query.
pub const MIN_WORDS: usize = 3;

/// A failure of `eval generate`, worded for the operator.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GenerateError(pub String);

fn err(message: impl Into<String>) -> GenerateError {
    GenerateError(message.into())
}

/// What `eval generate` found and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files copied into the corpus.
    pub files: usize,
    /// Function and class definitions in the files with a grammar.
    pub definitions: usize,
    /// Definitions skipped as tests.
    pub tests: usize,
    /// Definitions without a doc comment.
    pub undocumented: usize,
    /// Doc comments under [`MIN_WORDS`] words.
    pub short: usize,
    /// Comments that are licence or copyright headers.
    pub licence: usize,
    /// Definitions whose comment shares a line with code (left alone).
    pub inline: usize,
    /// Distinct queries (definitions with the same query text are one query).
    pub queries: usize,
    /// Queries written (at most `--max`).
    pub kept: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usable = self.definitions - self.tests - self.undocumented - self.short - self.licence - self.inline;
        writeln!(f, "files: {}", self.files)?;
        writeln!(
            f,
            "definitions: {} found, {usable} with a usable doc comment (skipped: {} tests, {} undocumented, {} under {MIN_WORDS} words, {} licence headers, {} inline)",
            self.definitions, self.tests, self.undocumented, self.short, self.licence, self.inline
        )?;
        write!(f, "queries: {} distinct, {} kept", self.queries, self.kept)
    }
}

/// One line of `queries.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GeneratedQuery {
    pub query: String,
    pub relevant: Vec<String>,
}

/// A doc comment found for a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Doc {
    /// 0-based rows of the comment, both included.
    rows: (usize, usize),
    /// The comment's lines without their markers.
    lines: Vec<String>,
    /// For a docstring that is its body's only statement: the indentation
    /// of the `pass` that replaces it.
    pass_indent: Option<String>,
}

/// A documented definition of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    target: String,
    query: String,
    doc: Doc,
}

/// Reads `repo`, writes `out/queries.jsonl` and the blanked copy `out/corpus/`.
pub fn generate(repo: &Path, out: &Path, max: Option<usize>) -> Result<Summary, GenerateError> {
    let corpus = out.join("corpus");
    if corpus.exists() {
        return Err(err(format!("{} already exists: choose a new --out folder", corpus.display())));
    }
    let scan = rr_indexer::scan(repo, &Default::default()).map_err(|e| err(e.to_string()))?;
    let mut summary = Summary::default();
    let mut texts: BTreeMap<String, (PathBuf, Option<String>)> = BTreeMap::new();
    let mut by_query: BTreeMap<String, Vec<(String, Doc)>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for file in &scan.files {
        let bytes = std::fs::read(&file.path).map_err(|e| err(format!("cannot read {}: {e}", file.path.display())))?;
        let text = String::from_utf8(bytes).ok();
        if let Some(text) = &text
            && let Some(language) = rr_indexer::language_for_extension(&file.extension)
        {
            for found in file_docs(&file.relative_path, text, language, &mut summary) {
                let entry = by_query.entry(found.query.clone()).or_default();
                if entry.is_empty() {
                    order.push(found.query.clone());
                }
                entry.push((found.target, found.doc));
            }
        }
        texts.insert(file.relative_path.clone(), (file.path.clone(), text));
    }
    summary.files = texts.len();
    summary.queries = order.len();
    let chosen = spread(order.len(), max);
    summary.kept = chosen.len();

    let mut blank: BTreeMap<String, Vec<Doc>> = BTreeMap::new();
    let mut lines = String::new();
    for &i in &chosen {
        let query = &order[i];
        let targets = by_query.remove(query).unwrap_or_default();
        let relevant = targets.iter().map(|(t, _)| t.clone()).collect();
        for (target, doc) in targets {
            let path = target.rsplit_once("#L").map_or(target.as_str(), |(p, _)| p).to_owned();
            blank.entry(path).or_default().push(doc);
        }
        let line = serde_json::to_string(&GeneratedQuery { query: query.clone(), relevant })
            .map_err(|e| err(e.to_string()))?;
        lines.push_str(&line);
        lines.push('\n');
    }

    for (relative, (source, text)) in &texts {
        let dest = corpus.join(relative);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(format!("cannot create {}: {e}", parent.display())))?;
        }
        let written = match (blank.get(relative), text) {
            (Some(docs), Some(text)) => std::fs::write(&dest, blank_docs(text, docs)),
            _ => std::fs::copy(source, &dest).map(|_| ()),
        };
        written.map_err(|e| err(format!("cannot write {}: {e}", dest.display())))?;
    }
    let queries = out.join("queries.jsonl");
    std::fs::write(&queries, lines).map_err(|e| err(format!("cannot write {}: {e}", queries.display())))?;
    Ok(summary)
}

/// `n` indexes out of `len`, evenly spread (all of them without a cap).
fn spread(len: usize, max: Option<usize>) -> Vec<usize> {
    match max {
        Some(max) if max < len => (0..max).map(|i| i * len / max).collect(),
        _ => (0..len).collect(),
    }
}

/// `text` with the rows of `docs` emptied (line ends kept).
fn blank_docs(text: &str, docs: &[Doc]) -> String {
    let mut out = String::with_capacity(text.len());
    for (row, line) in text.split_inclusive('\n').enumerate() {
        let Some(doc) = docs.iter().find(|d| d.rows.0 <= row && row <= d.rows.1) else {
            out.push_str(line);
            continue;
        };
        let body = line.trim_end_matches(['\n', '\r']);
        if row == doc.rows.0
            && let Some(indent) = &doc.pass_indent
        {
            out.push_str(indent);
            out.push_str("pass");
        }
        out.push_str(&line[body.len()..]);
    }
    out
}

/// The documented, non-test definitions of one file, counting the others
/// into `summary`.
fn file_docs(path: &str, text: &str, language: &str, summary: &mut Summary) -> Vec<Found> {
    let Some(grammar) = rr_indexer::grammar(language) else { return Vec::new() };
    let mut parser = Parser::new();
    if parser.set_language(&grammar).is_err() {
        return Vec::new();
    }
    let Some(tree) = parser.parse(text, None) else { return Vec::new() };
    let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let test_file = rr_core::PathClass::of(path) == rr_core::PathClass::Test;
    let mut out: Vec<Found> = Vec::new();
    let mut stack = vec![tree.root_node()];
    let mut definitions = Vec::new();
    while let Some(node) = stack.pop() {
        if is_definition(node) {
            definitions.push(node);
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    for node in definitions {
        summary.definitions += 1;
        let name = name_of(node, text);
        let (start, mut end) = (node.start_position().row, node.end_position().row);
        if end > start && node.end_position().column == 0 {
            end -= 1;
        }
        let attributes = attribute_rows(&lines, start, language);
        if test_file || is_test(node, &name, language, &lines, attributes, text) {
            summary.tests += 1;
            continue;
        }
        let doc = match docstring(node, text, language) {
            Some(Ok(doc)) => Some(doc),
            Some(Err(())) => {
                summary.inline += 1;
                continue;
            }
            None => comment_above(&lines, start - attributes, language),
        };
        let Some(doc) = doc else {
            summary.undocumented += 1;
            continue;
        };
        if out.iter().any(|f| f.doc.rows == doc.rows) {
            // Two nodes on one line (e.g. an exported declaration) share a comment.
            summary.definitions -= 1;
            continue;
        }
        let whole = doc.lines.join("\n").to_lowercase();
        if ["license", "licence", "copyright", "spdx-"].iter().any(|w| whole.contains(w)) {
            summary.licence += 1;
            continue;
        }
        let query = first_paragraph(&doc.lines);
        if query.split_whitespace().count() < MIN_WORDS {
            summary.short += 1;
            continue;
        }
        out.push(Found { target: format!("{path}#L{}-L{}", start + 1, end + 1), query, doc });
    }
    out
}

/// A function or class definition (not an import); an arrow function only
/// when it is bound to a name.
fn is_definition(node: Node<'_>) -> bool {
    match entity_type_of(node.kind()) {
        Some(("function" | "class", _)) => {
            node.kind() != "arrow_function" || node.parent().is_some_and(|p| p.kind() == "variable_declarator")
        }
        _ => false,
    }
}

fn name_of(node: Node<'_>, text: &str) -> String {
    node.child_by_field_name("name")
        .or_else(|| node.child_by_field_name("type"))
        .and_then(|n| text.get(n.byte_range()))
        .unwrap_or("")
        .to_owned()
}

/// How many lines directly above `row` are attributes or decorators.
fn attribute_rows(lines: &[&str], row: usize, language: &str) -> usize {
    let is_attribute = |l: &str| {
        let t = l.trim_start();
        match language {
            "rust" => t.starts_with("#[") && !t.starts_with("#!["),
            "python" | "typescript" | "tsx" | "javascript" => t.starts_with('@'),
            _ => false,
        }
    };
    (0..row).rev().take_while(|&r| is_attribute(lines[r])).count()
}

/// Tests by name (`test_…`, Go's `Test…`/`Benchmark…`), by attribute
/// (`#[test]`, `#[tokio::test]`) or by an enclosing `mod tests`/`#[cfg(test)]`.
fn is_test(node: Node<'_>, name: &str, language: &str, lines: &[&str], attributes: usize, text: &str) -> bool {
    let row = node.start_position().row;
    let attrs = || lines[row - attributes..row].iter().any(|l| l.contains("test"));
    let lower = name.to_lowercase();
    if lower.starts_with("test_") || lower == "test" || (language == "python" && name.starts_with("Test")) {
        return true;
    }
    if language == "go" && ["Test", "Benchmark", "Fuzz", "Example"].iter().any(|p| name.starts_with(p)) {
        return true;
    }
    if language == "rust" && attrs() {
        return true;
    }
    let mut parent = node.parent();
    while let Some(p) = parent {
        if p.kind() == "mod_item" {
            let module = name_of(p, text);
            let row = p.start_position().row;
            let above = attribute_rows(lines, row, language);
            if module == "tests" || lines[row - above..row].iter().any(|l| l.contains("cfg(test)")) {
                return true;
            }
        }
        parent = p.parent();
    }
    false
}

/// A Python definition's docstring: `None` when it has none, `Err` when it
/// shares a line with code (it cannot be blanked line by line).
fn docstring(node: Node<'_>, text: &str, language: &str) -> Option<Result<Doc, ()>> {
    if language != "python" {
        return None;
    }
    let body = node.child_by_field_name("body")?;
    let mut cursor = body.walk();
    let statements: Vec<Node<'_>> = body.named_children(&mut cursor).filter(|n| n.kind() != "comment").collect();
    let first = *statements.first()?;
    // The grammar marks `expression_statement` a supertype: a statement that is only a string is the
    // `string` node itself.
    let string = Some(first).filter(|s| s.kind() == "string")?;
    let (start, end) = (string.start_position(), string.end_position());
    let line_start = text[..string.start_byte()].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..string.start_byte()];
    let after = text[string.end_byte()..].split('\n').next().unwrap_or("");
    if start.row == node.start_position().row || !before.trim().is_empty() || !after.trim().is_empty() {
        return Some(Err(()));
    }
    let raw = text.get(string.byte_range())?;
    let raw = raw.trim_start_matches(|c: char| "rRuUbBfF".contains(c));
    let quote = ["\"\"\"", "'''", "\"", "'"].into_iter().find(|q| raw.starts_with(q) && raw.len() >= 2 * q.len())?;
    let inner = raw.strip_prefix(quote)?.strip_suffix(quote)?;
    let pass_indent = (statements.len() == 1).then(|| before.to_owned());
    Some(Ok(Doc {
        rows: (start.row, end.row),
        lines: inner.lines().map(|l| l.trim().to_owned()).collect(),
        pass_indent,
    }))
}

/// The run of comment lines that ends right above `row`: line comments
/// (`//`, `///`, `#`) or one block comment (`/* … */`, `/** … */`).
fn comment_above(lines: &[&str], row: usize, language: &str) -> Option<Doc> {
    let (line_marker, block) = match language {
        "rust" | "go" | "javascript" | "typescript" | "tsx" => ("//", true),
        "python" | "bash" => ("#", false),
        _ => return None,
    };
    let last = lines.get(row.checked_sub(1)?)?.trim();
    if block && last.ends_with("*/") {
        let first = (0..row).rev().find(|&r| lines[r].trim_start().starts_with("/*"))?;
        let mut body: Vec<String> = Vec::new();
        for (i, line) in lines[first..row].iter().enumerate() {
            let mut t = line.trim();
            if i == 0 {
                t = t.trim_start_matches('/').trim_start_matches('*');
            }
            if i == row - first - 1 {
                t = t.strip_suffix("*/").unwrap_or(t);
            }
            if i > 0 {
                t = t.trim_start().strip_prefix('*').unwrap_or(t);
            }
            body.push(t.trim().to_owned());
        }
        return Some(Doc { rows: (first, row - 1), lines: body, pass_indent: None });
    }
    let is_comment = |l: &str| {
        let t = l.trim_start();
        // Inner doc comments (`//!`) and shebangs belong to the file, not the definition.
        t.starts_with(line_marker) && !t.starts_with("//!") && !t.starts_with("#!")
    };
    let count = (0..row).rev().take_while(|&r| is_comment(lines[r])).count();
    if count == 0 {
        return None;
    }
    let first = row - count;
    let body = lines[first..row]
        .iter()
        .map(|l| l.trim_start().trim_start_matches(line_marker.chars().next().unwrap_or('/')).trim().to_owned())
        .collect();
    Some(Doc { rows: (first, row - 1), lines: body, pass_indent: None })
}

/// The first paragraph of a comment, on one line.
fn first_paragraph(lines: &[String]) -> String {
    let mut words: Vec<&str> = Vec::new();
    for line in lines {
        if line.trim().is_empty() {
            if words.is_empty() {
                continue;
            }
            break;
        }
        words.extend(line.split_whitespace());
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(path: &str, text: &str, language: &str) -> (Vec<(String, String)>, Summary) {
        let mut summary = Summary::default();
        let found = file_docs(path, text, language, &mut summary);
        (found.into_iter().map(|f| (f.query, f.target)).collect(), summary)
    }

    #[test]
    fn rust_doc_comments_above_attributes_and_methods_in_impls() {
        let text = "\
//! Crate docs are not a definition's.

/// A point on the plane,
/// in pixels.
///
/// More detail.
#[derive(Debug)]
pub struct Point {
    x: i32,
}

impl Point {
    // Moves the point right by `dx` pixels.
    pub fn shift(&mut self, dx: i32) {
        self.x += dx;
    }

    /// Too short.
    fn x(&self) -> i32 {
        self.x
    }
}

/* Block comments
 * work too, on several lines. */
fn block() {}

#[cfg(test)]
mod tests {
    /// Checks that shifting moves the point.
    #[test]
    fn shifts() {}
}
";
        let (found, summary) = docs("src/point.rs", text, "rust");
        assert_eq!(
            found,
            [
                ("A point on the plane, in pixels.".to_owned(), "src/point.rs#L8-L10".to_owned()),
                ("Moves the point right by `dx` pixels.".to_owned(), "src/point.rs#L14-L16".to_owned()),
                ("Block comments work too, on several lines.".to_owned(), "src/point.rs#L26-L26".to_owned()),
            ]
        );
        // struct, impl, shift, x, block, shifts: the impl is undocumented,
        // `x` is too short, `shifts` is a test.
        assert_eq!((summary.definitions, summary.undocumented, summary.short, summary.tests), (6, 1, 1, 1));
    }

    #[test]
    fn python_docstrings_comments_tests_and_licences() {
        let text = "\
# Copyright 2024 Example Corp. Licensed under the Apache License.
def licensed():
    return 1


@decorator
def documented(a):
    \"\"\"Add one to the
    argument.

    Details.
    \"\"\"
    return a + 1


def only_doc():
    '''Nothing but a docstring here.'''


def test_something():
    \"\"\"A test with a docstring.\"\"\"


def inline(): \"\"\"Same line as the def.\"\"\"
";
        let (found, summary) = docs("pkg/mod.py", text, "python");
        assert_eq!(
            found,
            [
                ("Add one to the argument.".to_owned(), "pkg/mod.py#L7-L13".to_owned()),
                ("Nothing but a docstring here.".to_owned(), "pkg/mod.py#L16-L17".to_owned()),
            ]
        );
        assert_eq!((summary.licence, summary.tests, summary.inline), (1, 1, 1));

        let mut s = Summary::default();
        let found = file_docs("pkg/mod.py", text, "python", &mut s);
        let blanked = blank_docs(text, &found.iter().map(|f| f.doc.clone()).collect::<Vec<_>>());
        assert_eq!(blanked.lines().count(), text.lines().count());
        assert!(blanked.contains("def documented(a):\n\n\n\n\n\n    return a + 1\n"), "{blanked}");
        assert!(blanked.contains("def only_doc():\n    pass\n"), "{blanked}");
        assert!(!blanked.contains("Nothing but") && !blanked.contains("Add one"));
    }

    #[test]
    fn go_and_typescript_line_and_block_comments() {
        let go = "package p\n\n// Open opens the database\n// in dir.\nfunc Open(dir string) {}\n\n// TestOpen checks it.\nfunc TestOpen(t *testing.T) {}\n";
        let (found, summary) = docs("p/p.go", go, "go");
        assert_eq!(found, [("Open opens the database in dir.".to_owned(), "p/p.go#L5-L5".to_owned())]);
        assert_eq!(summary.tests, 1);
        let ts = "/**\n * Fetches every widget from the server.\n */\nexport async function fetchAll() {}\n\n// Renders the list into the root.\nexport const render = () => {};\n";
        let (found, _) = docs("web/a.ts", ts, "typescript");
        assert_eq!(
            found,
            [
                ("Fetches every widget from the server.".to_owned(), "web/a.ts#L4-L4".to_owned()),
                ("Renders the list into the root.".to_owned(), "web/a.ts#L7-L7".to_owned()),
            ]
        );
    }

    #[test]
    fn blanking_keeps_line_ends_and_spreading_is_even() {
        let doc = Doc { rows: (1, 2), lines: Vec::new(), pass_indent: None };
        assert_eq!(blank_docs("a\r\n// b\r\n// c\nd", &[doc]), "a\r\n\r\n\nd");
        assert_eq!(spread(10, Some(4)), [0, 2, 5, 7]);
        assert_eq!(spread(3, Some(5)), [0, 1, 2]);
        assert_eq!(spread(3, None), [0, 1, 2]);
    }
}
