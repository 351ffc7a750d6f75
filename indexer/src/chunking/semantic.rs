//! Chunking version 3, `semantic`: the reference's units, with the boundaries
//! moved to where a reader would put them.
//!
//! The reference (version 2) cuts code at top-level declarations and lets
//! everything after a declaration run with it, so the doc comment, attributes
//! and leading comments of the *next* declaration end up in the previous
//! chunk, and a file with no declaration of its split types (a Rust `lib.rs`
//! of `//!` lines, `mod` and `use` items) becomes one chunk per top-level node.
//! These rules keep the reference's split points, whatever the language (the
//! grammar lookup and the split types are the reference chunker's, so a
//! grammar added there is used here too), and change four things:
//!
//! 1. **Leading comments attach forward.** Comments, attributes (`#[...]`) and
//!    decorators that start their own line and run up to a declaration without
//!    a blank line belong to that declaration. Inner doc comments (`//!`,
//!    `/*!`), inner attributes (`#![...]`) and shebangs describe the file, not
//!    what follows: they never attach, and are never split points of their
//!    own. A Python `decorated_definition` is a split point as the definition
//!    it decorates is.
//! 2. **Small units merge.** Adjacent units of at most [`SMALL_LINES`]
//!    non-blank lines (imports, constants, one-line items, a short preamble)
//!    are packed together up to the token budget; the merged record's symbol
//!    lists theirs, `", "`-joined. A larger declaration keeps a chunk of its
//!    own.
//! 3. **Dense files are bounded.** A file whose lines longer than
//!    [`LONG_LINE_BYTES`] hold at least half its bytes (minified code, an SVG,
//!    a lockfile or data file on one line) is cut into budget-sized windows
//!    without overlap, at most [`MAX_DENSE_CHUNKS`] of them: such text is
//!    rarely what a question is about, and the reference's windows of it can
//!    number in the thousands. Its records say `chunking_strategy: dense`.
//! 4. **reST and AsciiDoc have sections.** `.rst`, `.adoc` and `.asciidoc`
//!    files are cut at their headings and packed per section like Markdown,
//!    with the heading path as `section` (`chunking_strategy: sections`).
//!
//! Markdown and other text are chunked as the reference does. Oversized units
//! are split by the reference's token splitter. Record ids of this version
//! carry it (see [`crate::chunking_record_id`]), so a store re-indexed with
//! the other chunking has every record rewritten, none silently kept.

use tree_sitter::Node;

use super::{
    ChunkError, ChunkingOptions, LineIndex, PrefixTokens, Span, TextChunk, budget_after_prefix, code, fits, markdown,
    pack_markdown_blocks, pieces_to_chunks, prose,
};
use crate::classify::Strategy;
use crate::pytext;
use crate::tokens::TokenCounter;

/// Units of at most this many non-blank lines merge with their small neighbours.
pub const SMALL_LINES: usize = 3;
/// Lines longer than this many bytes count towards a dense file.
pub const LONG_LINE_BYTES: usize = 2000;
/// The most records a dense file gets.
pub const MAX_DENSE_CHUNKS: usize = 16;
/// A window of a dense file is at most this many bytes per budget token, which
/// bounds the text each token count sees.
const MAX_BYTES_PER_TOKEN: usize = 8;

/// The `chunking_strategy` of a dense file's records.
pub(crate) const DENSE_STRATEGY: &str = "dense";
/// The `chunking_strategy` of reST and AsciiDoc records.
pub(crate) const SECTIONS_STRATEGY: &str = "sections";

/// The chunks of a document and the `chunking_strategy` that made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunked {
    pub chunks: Vec<TextChunk>,
    pub strategy: &'static str,
}

/// Chunks `text` with the semantic rules; see [`super::chunk_document`] for
/// the arguments. `extension` (lowercase, with the dot) selects reST and
/// AsciiDoc sections.
pub(crate) fn chunk_semantic(
    text: &str,
    strategy: Strategy,
    language: &str,
    extension: &str,
    options: ChunkingOptions,
    prefix: &dyn Fn(&str, &str) -> String,
) -> Result<Chunked, ChunkError> {
    if pytext::is_blank(text) {
        return Ok(Chunked { chunks: Vec::new(), strategy: strategy.as_str() });
    }
    let counter = TokenCounter::new();
    let prefix_tokens = PrefixTokens::new(prefix, counter);
    let whole = || vec![Span::new(0, text.len())];
    let (structural, label) = if is_dense(text) {
        let budget = budget_after_prefix(options, &prefix_tokens, &Span::new(0, 0))?;
        (dense_windows(text, budget, &counter)?, DENSE_STRATEGY)
    } else {
        match (strategy, prose::syntax_for(extension)) {
            (Strategy::Markdown, _) => (
                pack_markdown_blocks(
                    text,
                    markdown::markdown_spans(text),
                    options.chunk_size,
                    &counter,
                    &prefix_tokens,
                ),
                strategy.as_str(),
            ),
            (Strategy::Code, _) => match code_units(text, language) {
                Some(units) => (merge_small(text, units, options, &counter, &prefix_tokens), strategy.as_str()),
                None => (whole(), strategy.as_str()),
            },
            (Strategy::Generic, Some(syntax)) => (
                pack_markdown_blocks(
                    text,
                    prose::section_spans(text, syntax),
                    options.chunk_size,
                    &counter,
                    &prefix_tokens,
                ),
                SECTIONS_STRATEGY,
            ),
            (Strategy::Generic, None) => (whole(), strategy.as_str()),
        }
    };
    let chunks = pieces_to_chunks(text, structural, options, &counter, &prefix_tokens)?;
    Ok(Chunked { chunks, strategy: label })
}

/// What a top-level node is to the declaration after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Code: a declaration, a statement.
    Code,
    /// A comment, attribute or decorator on its own line: it belongs to what follows.
    Leading,
    /// About the file (`//!`, `#![...]`, a shebang) or the line it ends (a
    /// trailing comment): it stays where it is.
    Detached,
}

/// A top-level node of the parse.
struct Top {
    start: usize,
    end: usize,
    role: Role,
}

fn role(node: Node<'_>, text: &str) -> Role {
    let kind = node.kind();
    let value = &text[node.start_byte()..node.end_byte()];
    let comment = kind.contains("comment");
    if kind == "inner_attribute_item" || (comment && ["//!", "/*!", "#!"].iter().any(|m| value.starts_with(m))) {
        return Role::Detached;
    }
    if !(comment || kind == "attribute_item" || kind == "decorator") {
        return Role::Code;
    }
    let line_start = text[..node.start_byte()].rfind('\n').map_or(0, |i| i + 1);
    if pytext::is_blank(&text[line_start..node.start_byte()]) { Role::Leading } else { Role::Detached }
}

/// The units of a code file: the reference's split points, each moved back
/// over its leading comments and attributes, plus decorated definitions; the
/// text before the first is a unit without symbol. `None` when the file is
/// not split structurally (no grammar, or a parse error).
fn code_units(text: &str, language: &str) -> Option<Vec<Span>> {
    let reference = code::code_spans(text, language)?;
    let tree = code::with_parser(language, |parser| parser.parse(text, None))??;
    let root = tree.root_node();
    let mut cursor = root.walk();
    let nodes: Vec<Node<'_>> = root.named_children(&mut cursor).collect();
    let tops: Vec<Top> =
        nodes.iter().map(|&n| Top { start: n.start_byte(), end: n.end_byte(), role: role(n, text) }).collect();
    let top_at = |offset: usize| tops.binary_search_by_key(&offset, |t| t.start).ok().map(|i| &tops[i]);

    // Comments and attributes are split points only when the reference splits
    // at every top-level node; here they travel with a declaration instead.
    let mut splits: Vec<(usize, String)> = reference
        .into_iter()
        .filter(|span| !span.symbol.is_empty() && top_at(span.start).is_none_or(|t| t.role == Role::Code))
        .map(|span| (span.start, span.symbol))
        .collect();
    let structural = splits.len() < tops.iter().filter(|t| t.role == Role::Code).count();
    if structural {
        for node in nodes.iter().filter(|n| n.kind() == "decorated_definition") {
            if let Some(definition) = node.child_by_field_name("definition")
                && !splits.iter().any(|(start, _)| *start == node.start_byte())
            {
                splits.push((node.start_byte(), code::symbol(definition, text.as_bytes())));
            }
        }
        splits.sort_by_key(|(start, _)| *start);
    }
    if splits.is_empty() {
        return Some(vec![Span::new(0, text.len())]);
    }

    let lines = LineIndex::new(text);
    let mut starts: Vec<usize> = Vec::with_capacity(splits.len());
    for (offset, _) in &splits {
        let start = attach_start(text, &tops, &lines, *offset);
        // Attaching never crosses the previous split point's node; this keeps
        // the units in order should a split point not be a top-level node.
        let floor = starts.last().map_or(0, |&previous| previous + 1);
        starts.push(if start < floor { *offset } else { start });
    }
    let mut units = Vec::with_capacity(splits.len() + 1);
    if starts[0] > 0 {
        units.push(Span::new(0, starts[0]));
    }
    for (index, (_, symbol)) in splits.into_iter().enumerate() {
        let end = starts.get(index + 1).copied().unwrap_or(text.len());
        units.push(Span { start: starts[index], end, section: String::new(), symbol });
    }
    Some(units)
}

/// Where the unit of the split point at `offset` starts: before the leading
/// nodes that run up to it, each on its own line, with no blank line between.
fn attach_start(text: &str, tops: &[Top], lines: &LineIndex, offset: usize) -> usize {
    let mut start = offset;
    let mut index = tops.partition_point(|t| t.end <= offset);
    while let Some(top) = index.checked_sub(1).map(|i| &tops[i]) {
        let last_line = lines.line_of(top.end.saturating_sub(1).max(top.start));
        let adjacent = lines.line_of(start) <= last_line + 1 && pytext::is_blank(&text[top.end..start]);
        if top.role != Role::Leading || !adjacent {
            break;
        }
        start = top.start;
        index -= 1;
    }
    start
}

/// Whether a unit is small enough to share a chunk with its neighbours.
fn is_small(value: &str) -> bool {
    value.lines().filter(|line| !pytext::is_blank(line)).count() <= SMALL_LINES
}

/// Packs runs of adjacent small units greedily up to the budget; a merged
/// span's symbol lists the distinct symbols of its units.
fn merge_small(
    text: &str,
    units: Vec<Span>,
    options: ChunkingOptions,
    counter: &TokenCounter,
    prefix_tokens: &PrefixTokens<'_>,
) -> Vec<Span> {
    let mut merged: Vec<Span> = Vec::with_capacity(units.len());
    let mut last_small = false;
    for unit in units {
        let small = is_small(&text[unit.start..unit.end]);
        if small
            && last_small
            && let Some(current) = merged.last_mut()
        {
            let mut symbol = current.symbol.clone();
            if !unit.symbol.is_empty() && !symbol.split(", ").any(|s| s == unit.symbol) {
                if !symbol.is_empty() {
                    symbol.push_str(", ");
                }
                symbol.push_str(&unit.symbol);
            }
            let candidate = Span { start: current.start, end: unit.end, section: String::new(), symbol };
            let fits_budget = budget_after_prefix(options, prefix_tokens, &candidate)
                .is_ok_and(|budget| fits(&text[candidate.start..candidate.end], budget, counter));
            if fits_budget {
                *current = candidate;
                continue;
            }
        }
        last_small = small;
        merged.push(unit);
    }
    merged
}

/// Whether the long lines of `text` hold at least half of its bytes.
fn is_dense(text: &str) -> bool {
    let long: usize = text.split('\n').map(str::len).filter(|&len| len > LONG_LINE_BYTES).sum();
    long > 0 && long * 2 >= text.len()
}

/// The first [`MAX_DENSE_CHUNKS`] windows of at most `budget` tokens, each cut
/// after whitespace in its last quarter when there is some.
fn dense_windows(text: &str, budget: usize, counter: &TokenCounter) -> Result<Vec<Span>, ChunkError> {
    let mut windows = Vec::new();
    let mut start = 0;
    while start < text.len() && windows.len() < MAX_DENSE_CHUNKS {
        let limit = floor_boundary(text, (start + budget.saturating_mul(MAX_BYTES_PER_TOKEN)).min(text.len()));
        let mut end = if limit > start && fits(&text[start..limit], budget, counter) {
            limit
        } else {
            // The longest prefix that fits: text[start..lo] fits, text[start..hi] does not.
            let (mut lo, mut hi) = (start, limit.max(start + pytext::char_len_at(text, start)));
            while hi - lo > 1 {
                let mut mid = floor_boundary(text, lo + (hi - lo) / 2);
                if mid == lo {
                    mid = lo + pytext::char_len_at(text, lo);
                    if mid >= hi {
                        break;
                    }
                }
                if fits(&text[start..mid], budget, counter) { lo = mid } else { hi = mid }
            }
            lo
        };
        if end == start {
            return Err(ChunkError::CharacterTooLarge);
        }
        if end < text.len() {
            let from = floor_boundary(text, start + (end - start) * 3 / 4);
            if let Some(at) = text[from..end].rfind(pytext::is_space) {
                end = from + at + pytext::char_len_at(text, from + at);
            }
        }
        windows.push(Span::new(start, end));
        start = end;
    }
    Ok(windows)
}

/// The largest character boundary at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::super::ChunkingScheme;
    use super::super::reference::tests::prefix;
    use super::*;

    fn semantic() -> ChunkingOptions {
        ChunkingOptions { scheme: ChunkingScheme::Semantic, ..ChunkingOptions::default() }
    }

    /// (symbol, excerpt) of each chunk.
    fn code(text: &str, language: &str) -> Vec<(String, String)> {
        let chunked = chunk_semantic(text, Strategy::Code, language, "", semantic(), &prefix).unwrap();
        assert_eq!(chunked.strategy, "code");
        chunked.chunks.into_iter().map(|c| (c.symbol, c.excerpt)).collect()
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    }

    /// The same text with the reference's rules, for contrast.
    fn reference(text: &str, language: &str) -> Vec<(String, String)> {
        super::super::chunk_document(text, Strategy::Code, language, ChunkingOptions::default(), &prefix)
            .unwrap()
            .into_iter()
            .map(|c| (c.symbol, c.excerpt))
            .collect()
    }

    const RUST: &str = "use std::fmt;\n\n/// A point.\n#[derive(Debug)]\npub struct Point {\n    x: i32,\n    y: i32,\n}\n\n/// Formats a point.\nimpl fmt::Display for Point {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{}\", self.x)\n    }\n}\n";

    #[test]
    fn rust_doc_comments_and_attributes_attach_to_the_next_item() {
        assert_eq!(
            code(RUST, "rust"),
            owned(&[
                ("", "use std::fmt;\n\n"),
                (
                    "struct_item:Point",
                    "/// A point.\n#[derive(Debug)]\npub struct Point {\n    x: i32,\n    y: i32,\n}\n\n"
                ),
                (
                    "impl_item:Point",
                    "/// Formats a point.\nimpl fmt::Display for Point {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{}\", self.x)\n    }\n}\n"
                ),
            ])
        );
        // The reference gives the struct's doc comment to the `use` chunk.
        assert_eq!(reference(RUST, "rust")[0].1, "use std::fmt;\n\n/// A point.\n#[derive(Debug)]\n");
    }

    #[test]
    fn go_doc_comments_attach_but_a_separated_header_does_not() {
        let text = "// Copyright 2024 Acme.\n\npackage demo\n\n// Add returns the sum of a and b,\n// even when they are large.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\n// Sub returns a minus b.\nfunc Sub(a, b int) int {\n\tx := a - b\n\treturn x\n}\n";
        assert_eq!(
            code(text, "go"),
            owned(&[
                ("", "// Copyright 2024 Acme.\n\npackage demo\n\n"),
                (
                    "function_declaration:Add",
                    "// Add returns the sum of a and b,\n// even when they are large.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\n"
                ),
                (
                    "function_declaration:Sub",
                    "// Sub returns a minus b.\nfunc Sub(a, b int) int {\n\tx := a - b\n\treturn x\n}\n"
                ),
            ])
        );
    }

    #[test]
    fn python_comments_and_decorators_belong_to_the_definition() {
        let text = "import os\n\n\ndef first():\n    value = os.name\n    other = value\n    return other\n\n\n# The second one.\n@cache\ndef second():\n    value = 2\n    other = value\n    return other\n";
        assert_eq!(
            code(text, "python"),
            owned(&[
                ("", "import os\n\n\n"),
                (
                    "function_definition:first",
                    "def first():\n    value = os.name\n    other = value\n    return other\n\n\n"
                ),
                (
                    "function_definition:second",
                    "# The second one.\n@cache\ndef second():\n    value = 2\n    other = value\n    return other\n"
                ),
            ])
        );
        // The reference does not split at a decorated definition: it and its
        // comment run with `first`.
        assert_eq!(reference(text, "python").len(), 2);
    }

    #[test]
    fn block_doc_comments_attach_and_trailing_comments_stay() {
        let text = "const a = 1; // the first\n\n/**\n * Greets.\n */\nfunction greet(name) {\n  const text = 'hi ' + name;\n  console.log(text);\n  return text;\n}\n";
        assert_eq!(
            code(text, "javascript"),
            owned(&[
                ("lexical_declaration", "const a = 1; // the first\n\n"),
                (
                    "function_declaration:greet",
                    "/**\n * Greets.\n */\nfunction greet(name) {\n  const text = 'hi ' + name;\n  console.log(text);\n  return text;\n}\n"
                ),
            ])
        );
    }

    #[test]
    fn module_docs_stay_together_and_small_items_merge() {
        // No struct, enum or impl: the reference splits at every top-level
        // node, one chunk per `//!` line and per item.
        let text = "//! The crate.\n//! It does things.\n\n#![forbid(unsafe_code)]\n\n/// Parsing.\npub mod parse;\npub mod render;\n\n/// The answer.\npub const ANSWER: u32 = 42;\n";
        assert_eq!(reference(text, "rust").len(), 8);
        assert_eq!(
            code(text, "rust"),
            owned(&[(
                "mod_item:parse, mod_item:render, const_item:ANSWER",
                "//! The crate.\n//! It does things.\n\n#![forbid(unsafe_code)]\n\n/// Parsing.\npub mod parse;\npub mod render;\n\n/// The answer.\npub const ANSWER: u32 = 42;\n"
            )])
        );
    }

    #[test]
    fn merging_stops_at_the_budget_and_at_a_large_unit() {
        let consts: String = (0..40).map(|i| format!("const C{i}: u32 = {i};\n")).collect();
        let text = format!(
            "{consts}\nfn big() {{\n    let a = 1;\n    let b = 2;\n    let c = 3;\n}}\nconst LAST: u32 = 0;\n"
        );
        let options = ChunkingOptions { chunk_size: 120, ..semantic() };
        let chunks = chunk_semantic(&text, Strategy::Code, "rust", "", options, &prefix).unwrap().chunks;
        let counter = TokenCounter::new();
        for chunk in &chunks {
            assert!(counter.count(&(prefix(&chunk.section, &chunk.symbol) + &chunk.excerpt)) <= 120);
        }
        // 40 one-line constants need several chunks at this budget, but far
        // fewer than 40; the large function stays alone, the last constant after it.
        assert!((2..10).contains(&(chunks.len() - 2)), "{}", chunks.len());
        assert_eq!(chunks[chunks.len() - 1].excerpt, "const LAST: u32 = 0;\n");
        assert!(chunks[chunks.len() - 2].excerpt.starts_with("fn big()"));
        let rejoined: String = chunks.iter().map(|c| c.excerpt.as_str()).collect();
        assert_eq!(rejoined, text);
    }

    #[test]
    fn dense_files_get_a_bounded_number_of_budget_windows() {
        let minified = "function a(b){return b*2}var c=a(3);".repeat(4000);
        let chunked = chunk_semantic(&minified, Strategy::Code, "javascript", ".js", semantic(), &prefix).unwrap();
        assert_eq!(chunked.strategy, "dense");
        assert_eq!(chunked.chunks.len(), MAX_DENSE_CHUNKS);
        let counter = TokenCounter::new();
        let mut offset = 0;
        for chunk in &chunked.chunks {
            let tokens = counter.count(&(prefix("", "") + &chunk.excerpt));
            assert!((400..=512).contains(&tokens), "{tokens}");
            assert_eq!((chunk.start_line, chunk.end_line), (1, 1));
            // Consecutive windows, no overlap.
            assert_eq!(&minified[offset..offset + chunk.excerpt.len()], chunk.excerpt);
            offset += chunk.excerpt.len();
        }
        // The reference cuts the whole line into overlapping windows.
        let reference =
            super::super::chunk_document(&minified, Strategy::Code, "javascript", ChunkingOptions::default(), &prefix)
                .unwrap();
        assert!(reference.len() > 100, "{}", reference.len());
    }

    #[test]
    fn a_long_line_in_an_ordinary_file_is_not_dense() {
        let text = format!("{}\n{}", "x".repeat(LONG_LINE_BYTES + 1), "short line\n".repeat(300));
        assert!(!is_dense(&text));
        assert!(is_dense(&"y".repeat(LONG_LINE_BYTES + 1)));
    }

    #[test]
    fn rst_and_asciidoc_sections_have_section_metadata() {
        let rst = "Guide\n=====\n\nIntro.\n\nInstall\n-------\n\nRun pip.\n";
        let chunked = chunk_semantic(rst, Strategy::Generic, "", ".rst", semantic(), &prefix).unwrap();
        assert_eq!(chunked.strategy, "sections");
        let got: Vec<(&str, &str)> = chunked.chunks.iter().map(|c| (c.section.as_str(), c.excerpt.as_str())).collect();
        assert_eq!(
            got,
            [("Guide", "Guide\n=====\n\nIntro.\n\n"), ("Guide > Install", "Install\n-------\n\nRun pip.\n")]
        );
        assert_eq!((chunked.chunks[1].start_line, chunked.chunks[1].end_line), (6, 9));

        let adoc = "= Manual\n\n== Setup\n\nApt.\n";
        let chunked = chunk_semantic(adoc, Strategy::Generic, "", ".adoc", semantic(), &prefix).unwrap();
        let got: Vec<(&str, &str)> = chunked.chunks.iter().map(|c| (c.section.as_str(), c.excerpt.as_str())).collect();
        assert_eq!(got, [("Manual", "= Manual\n\n"), ("Manual > Setup", "== Setup\n\nApt.\n")]);

        // Other text is one unit, as in the reference.
        let chunked = chunk_semantic(rst, Strategy::Generic, "", ".txt", semantic(), &prefix).unwrap();
        assert_eq!((chunked.strategy, chunked.chunks.len()), ("generic", 1));
    }

    #[test]
    fn schemes_parse_by_name() {
        assert_eq!("semantic".parse::<ChunkingScheme>(), Ok(ChunkingScheme::Semantic));
        assert_eq!("reference".parse::<ChunkingScheme>(), Ok(ChunkingScheme::Reference));
        assert_eq!(
            "fancy".parse::<ChunkingScheme>(),
            Err("unknown chunking \"fancy\"; valid choices: reference, semantic".to_owned())
        );
        assert_eq!((ChunkingScheme::Reference.version(), ChunkingScheme::Semantic.version()), (2, 3));
    }
}
