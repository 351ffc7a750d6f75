//! The reference's chunking version 2: structural units packed and split
//! into token windows that fit the budget left after the context prefix.
//! The semantic rules reuse its packing, splitting and budgeting.

use super::options::ChunkingOptions;
use super::span::Span;
use super::types::{ChunkError, TextChunk};
use super::{code, markdown, splitter};
use crate::classify::Strategy;
use crate::pytext;
use crate::tokens::TokenCounter;

/// Chunks `text`. `prefix` builds the context prefix for a section and symbol;
/// its tokens count against `options.chunk_size`.
pub fn chunk_document(
    text: &str,
    strategy: Strategy,
    language: &str,
    options: ChunkingOptions,
    prefix: &dyn Fn(&str, &str) -> String,
) -> Result<Vec<TextChunk>, ChunkError> {
    if pytext::is_blank(text) {
        return Ok(Vec::new());
    }
    let counter = TokenCounter::new();
    let prefix_tokens = PrefixTokens::new(prefix, counter);
    let structural = match strategy {
        Strategy::Markdown => {
            pack_markdown_blocks(text, markdown::markdown_spans(text), options.chunk_size, &counter, &prefix_tokens)
        }
        Strategy::Code => code::code_spans(text, language).unwrap_or_else(|| vec![Span::new(0, text.len())]),
        Strategy::Generic => vec![Span::new(0, text.len())],
    };
    pieces_to_chunks(text, structural, options, &counter, &prefix_tokens)
}

/// Splits each structural unit that does not fit the budget left after its
/// prefix into token windows, and turns the non-blank pieces into chunks.
pub(crate) fn pieces_to_chunks(
    text: &str,
    structural: Vec<Span>,
    options: ChunkingOptions,
    counter: &TokenCounter,
    prefix_tokens: &PrefixTokens<'_>,
) -> Result<Vec<TextChunk>, ChunkError> {
    let lines = LineIndex::new(text);
    let mut chunks = Vec::new();
    for span in structural {
        let budget = budget_after_prefix(options, prefix_tokens, &span)?;
        for piece in split_oversized(text, span, budget, options.chunk_overlap, counter)? {
            let excerpt = &text[piece.start..piece.end];
            if pytext::is_blank(excerpt) {
                continue;
            }
            // The last character's line: a final newline does not start a new one.
            let last = excerpt.char_indices().next_back().map_or(0, |(i, _)| i);
            chunks.push(TextChunk {
                excerpt: excerpt.to_owned(),
                start_line: lines.line_of(piece.start),
                end_line: lines.line_of(piece.start + last),
                section: piece.section,
                symbol: piece.symbol,
            });
        }
    }
    Ok(chunks)
}

/// Tokens left for the excerpt of `span` once its context prefix is counted.
pub(crate) fn budget_after_prefix(
    options: ChunkingOptions,
    prefix_tokens: &PrefixTokens<'_>,
    span: &Span,
) -> Result<usize, ChunkError> {
    options.chunk_size.checked_sub(prefix_tokens.get(span)).filter(|&b| b > 0).ok_or(ChunkError::PrefixTooLong)
}

/// Token counts of context prefixes, computed once per section and symbol.
pub(crate) struct PrefixTokens<'a> {
    prefix: &'a dyn Fn(&str, &str) -> String,
    counter: TokenCounter,
    counts: std::cell::RefCell<std::collections::HashMap<(String, String), usize>>,
}

impl<'a> PrefixTokens<'a> {
    pub(crate) fn new(prefix: &'a dyn Fn(&str, &str) -> String, counter: TokenCounter) -> Self {
        PrefixTokens { prefix, counter, counts: Default::default() }
    }

    pub(crate) fn get(&self, span: &Span) -> usize {
        let key = (span.section.clone(), span.symbol.clone());
        *self
            .counts
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| self.counter.count(&(self.prefix)(&span.section, &span.symbol)))
    }
}

/// Whether `text` has at most `budget` tokens. A token covers at least one
/// byte, so short texts need no counting.
pub(crate) fn fits(text: &str, budget: usize, counter: &TokenCounter) -> bool {
    text.len() <= budget || counter.count(text) <= budget
}

/// 1-based line numbers of byte offsets, for offsets visited in any order.
pub(crate) struct LineIndex {
    newlines: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> Self {
        LineIndex { newlines: text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect() }
    }

    /// Newlines before `offset`, plus one.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&i| i < offset) + 1
    }
}

/// Greedily merges adjacent blocks of one heading section up to the budget;
/// a small leading heading may travel with an oversized first block.
pub(crate) fn pack_markdown_blocks(
    text: &str,
    spans: Vec<Span>,
    max_tokens: usize,
    counter: &TokenCounter,
    prefix_tokens: &PrefixTokens<'_>,
) -> Vec<Span> {
    let mut packed = Vec::new();
    let mut spans = spans.into_iter();
    let Some(mut current) = spans.next() else {
        return packed;
    };
    for span in spans {
        // Only blocks of the same context merge; the other tests are pure, so
        // they are evaluated lazily.
        let merge = current.same_context(&span) && {
            let budget = max_tokens.saturating_sub(prefix_tokens.get(&current));
            let value = &text[current.start..current.end];
            (budget > 0 && fits(&text[current.start..span.end], budget, counter))
                || (pytext::lstrip(value).starts_with('#') && fits(value, 20, counter))
        };
        if merge {
            current.end = span.end;
            continue;
        }
        packed.push(std::mem::replace(&mut current, span));
    }
    packed.push(current);
    packed
}

/// Splits a unit over `budget` tokens into overlapping windows, locating each
/// window in the text the way the reference does (longest suffix/prefix
/// overlap within the overlap budget, else the next occurrence).
fn split_oversized(
    text: &str,
    span: Span,
    budget: usize,
    overlap: usize,
    counter: &TokenCounter,
) -> Result<Vec<Span>, ChunkError> {
    let value = &text[span.start..span.end];
    if fits(value, budget, counter) {
        return Ok(vec![span]);
    }
    let pieces = splitter::split_text(value, budget, overlap.min(budget - 1), counter);
    if pieces.iter().any(|piece| counter.count(piece) > budget) {
        return Err(ChunkError::CharacterTooLarge);
    }
    let mut parts = Vec::with_capacity(pieces.len());
    let (mut previous_piece, mut previous_start, mut previous_end) = ("", 0usize, 0usize);
    for (index, piece) in pieces.iter().copied().enumerate() {
        let local_start = if index == 0 {
            value.find(piece)
        } else {
            let shared = shared_overlap(previous_piece, piece, overlap, counter);
            let guess = previous_end - shared;
            if value.get(guess..guess + piece.len()) == Some(piece) {
                Some(guess)
            } else {
                let from = previous_start + pytext::char_len_at(value, previous_start);
                value.get(from..).and_then(|rest| rest.find(piece)).map(|at| from + at)
            }
        };
        let local_start = local_start.ok_or(ChunkError::NotAnExcerpt)?;
        let local_end = local_start + piece.len();
        parts.push(span.sub(span.start + local_start, span.start + local_end));
        (previous_piece, previous_start, previous_end) = (piece, local_start, local_end);
    }
    Ok(parts)
}

/// Byte length of the longest suffix of `previous` that is a prefix of `piece`
/// and has at most `overlap` tokens (0 when none).
fn shared_overlap(previous: &str, piece: &str, overlap: usize, counter: &TokenCounter) -> usize {
    let maximum = previous.len().min(piece.len());
    piece
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|&length| length <= maximum)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find(|&length| previous.ends_with(&piece[..length]) && counter.count(&piece[..length]) <= overlap)
        .unwrap_or(0)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A context prefix as the records' (also used by the semantic rules' tests).
    pub(crate) fn prefix(section: &str, symbol: &str) -> String {
        let mut p = String::from("Source: o/r@main:f\nType: text\n");
        if !section.is_empty() {
            p.push_str(&format!("Section: {section}\n"));
        }
        if !symbol.is_empty() {
            p.push_str(&format!("Symbol: {symbol}\n"));
        }
        p.push('\n');
        p
    }

    #[test]
    fn blank_documents_have_no_chunks() {
        let chunks = chunk_document(" \n\u{0c}\n", Strategy::Generic, "", ChunkingOptions::default(), &prefix);
        assert_eq!(chunks.unwrap(), []);
    }

    #[test]
    fn end_line_counts_a_trailing_newline_as_its_own_line() {
        let chunks = chunk_document("a\nb\n", Strategy::Generic, "", ChunkingOptions::default(), &prefix).unwrap();
        assert_eq!((chunks[0].start_line, chunks[0].end_line), (1, 2));
    }

    #[test]
    fn prefix_must_fit() {
        let options = ChunkingOptions { chunk_size: 5, chunk_overlap: 0, ..ChunkingOptions::default() };
        let result = chunk_document("hello", Strategy::Generic, "", options, &prefix);
        assert_eq!(result, Err(ChunkError::PrefixTooLong));
    }

    #[test]
    fn python_structural_symbols() {
        let text = "def first():\n    return 1\n\nclass Second:\n    pass\n";
        let chunks = chunk_document(text, Strategy::Code, "python", ChunkingOptions::default(), &prefix).unwrap();
        let symbols: Vec<&str> = chunks.iter().map(|c| c.symbol.as_str()).collect();
        assert_eq!(symbols, ["function_definition:first", "class_definition:Second"]);
    }

    #[test]
    fn preamble_is_separate_from_the_first_symbol() {
        let text = "\"\"\"Module documentation.\"\"\"\n\nimport os\n\ndef first():\n    return os.name\n";
        let chunks = chunk_document(text, Strategy::Code, "python", ChunkingOptions::default(), &prefix).unwrap();
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].symbol, "");
        assert!(chunks[0].excerpt.contains("import os"));
        assert_eq!(chunks[1].symbol, "function_definition:first");
    }

    #[test]
    fn malformed_code_falls_back_to_one_chunk() {
        let text = "def broken(:\n  still text\n";
        let chunks = chunk_document(text, Strategy::Code, "python", ChunkingOptions::default(), &prefix).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].symbol, "");
        assert_eq!(chunks[0].excerpt, text);
    }

    #[test]
    fn markdown_sections_and_budget() {
        let text = format!("# Guide\nIntro.\n\n## Authentication\n{}", "token ".repeat(300));
        let options = ChunkingOptions { chunk_size: 80, chunk_overlap: 10, ..ChunkingOptions::default() };
        let chunks = chunk_document(&text, Strategy::Markdown, "", options, &prefix).unwrap();
        let counter = TokenCounter::new();
        assert!(chunks.len() > 2);
        for chunk in &chunks {
            let document = prefix(&chunk.section, &chunk.symbol) + &chunk.excerpt;
            assert!(counter.count(&document) <= 80);
        }
        assert!(chunks.iter().any(|c| c.section == "Guide > Authentication"));
    }

    #[test]
    fn markdown_keeps_fences_and_tables_intact() {
        let fence = "```python\ndef example():\n\n    return 1\n```";
        let table = "| Name | Value |\n| --- | --- |\n| one | two |";
        let text = format!("# Blocks\n\n{}\n\n{fence}\n\n{table}\n", "long introduction ".repeat(100));
        let options = ChunkingOptions { chunk_size: 80, chunk_overlap: 10, ..ChunkingOptions::default() };
        let chunks = chunk_document(&text, Strategy::Markdown, "", options, &prefix).unwrap();
        let with_fence: Vec<_> = chunks.iter().filter(|c| c.excerpt.contains("```python")).collect();
        assert_eq!(with_fence.len(), 1);
        assert!(with_fence[0].excerpt.contains(fence));
        let with_table: Vec<_> = chunks.iter().filter(|c| c.excerpt.contains("| Name | Value |")).collect();
        assert_eq!(with_table.len(), 1);
        assert!(with_table[0].excerpt.contains(table));
    }

    #[test]
    fn markdown_groups_small_blocks_of_one_section() {
        let text = "# Usage\n\n**Global Flags**\n\n| Flag | Description |\n| --- | --- |\n| `--version`, `-v` | Print the version |\n";
        let chunks = chunk_document(text, Strategy::Markdown, "", ChunkingOptions::default(), &prefix).unwrap();
        assert_eq!(chunks.len(), 1);
    }
}
