//! The token window splitter the reference uses for oversized units: LlamaIndex
//! 0.14 `TokenTextSplitter` with separator `"\n\n"`, backup separators `"\n"`
//! and `" "`, then single characters, whitespace kept.
//!
//! Splits are recursive: a piece over the budget is cut at the first separator
//! that yields more than one part (each part after the first starts with the
//! separator), and parts still over budget are cut again from the top of the
//! list. Consecutive splits are then merged greedily; when a chunk is closed,
//! splits are dropped from its front until the tokens carried over are at most
//! the overlap and the next split fits.
//!
//! Splits always tile the input, so every chunk is a contiguous slice of it.

use crate::tokens::TokenCounter;

const SEPARATORS: [&str; 3] = ["\n\n", "\n", " "];

/// Splits `text` into chunks of at most `chunk_size` tokens (a single
/// character can exceed it), overlapping by up to `overlap` tokens.
pub(crate) fn split_text<'a>(text: &'a str, chunk_size: usize, overlap: usize, counter: &TokenCounter) -> Vec<&'a str> {
    if text.is_empty() {
        return vec![text];
    }
    let mut splits = Vec::new();
    split(text, counter.count(text), chunk_size, counter, &mut splits);
    merge(text, &splits, chunk_size, overlap)
}

/// A split: a slice of the text and its token count.
struct Split<'a> {
    text: &'a str,
    tokens: usize,
}

/// `text` split on `sep`, each part after the first keeping the separator in
/// front; an empty first part is dropped.
fn split_keep_separator<'a>(text: &'a str, sep: &str) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find(sep) {
        let at = search + found;
        if at > start {
            parts.push(&text[start..at]);
        }
        start = at;
        search = at + sep.len();
    }
    if start < text.len() {
        parts.push(&text[start..]);
    }
    parts
}

/// Appends the splits of `text` (which has `tokens` tokens) to `out`.
fn split<'a>(text: &'a str, tokens: usize, chunk_size: usize, counter: &TokenCounter, out: &mut Vec<Split<'a>>) {
    if tokens <= chunk_size {
        out.push(Split { text, tokens });
        return;
    }
    let mut parts = Vec::new();
    for sep in SEPARATORS {
        parts = split_keep_separator(text, sep);
        if parts.len() > 1 {
            break;
        }
    }
    if parts.len() <= 1 {
        parts = text.char_indices().map(|(i, c)| &text[i..i + c.len_utf8()]).collect();
    }
    let single = parts.len() == 1;
    for part in parts {
        let tokens = counter.count(part);
        if tokens <= chunk_size || single {
            // A part that cannot be cut further stays, even over budget.
            out.push(Split { text: part, tokens });
        } else {
            split(part, tokens, chunk_size, counter, out);
        }
    }
}

/// The slice of `text` from the start of `first` to the end of `last`.
fn join<'a>(text: &'a str, first: &str, last: &str) -> &'a str {
    let base = text.as_ptr() as usize;
    let start = first.as_ptr() as usize - base;
    let end = last.as_ptr() as usize - base + last.len();
    &text[start..end]
}

fn merge<'a>(text: &'a str, splits: &[Split<'a>], chunk_size: usize, overlap: usize) -> Vec<&'a str> {
    let mut chunks = Vec::new();
    // The current chunk is `splits[first..next]`, `len` tokens by split counts.
    let mut first = 0;
    let mut len = 0;
    for (next, split) in splits.iter().enumerate() {
        if len + split.tokens > chunk_size {
            if first < next {
                chunks.push(join(text, splits[first].text, splits[next - 1].text));
            }
            while first < next && (len > overlap || len + split.tokens > chunk_size) {
                len -= splits[first].tokens;
                first += 1;
            }
        }
        len += split.tokens;
    }
    if first < splits.len() {
        chunks.push(join(text, splits[first].text, splits[splits.len() - 1].text));
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_stay_in_front() {
        assert_eq!(split_keep_separator("a\n\nb\n\n\n\nc", "\n\n"), ["a", "\n\nb", "\n\n", "\n\nc"]);
        assert_eq!(split_keep_separator("\n\nx", "\n\n"), ["\n\nx"]);
        assert_eq!(split_keep_separator("x", "\n\n"), ["x"]);
    }

    #[test]
    fn small_text_is_one_chunk() {
        let counter = TokenCounter::new();
        assert_eq!(split_text("hello world", 10, 2, &counter), ["hello world"]);
    }

    #[test]
    fn chunks_tile_with_overlap() {
        let counter = TokenCounter::new();
        let text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu";
        let chunks = split_text(text, 5, 2, &counter);
        assert!(chunks.len() > 2);
        for chunk in &chunks {
            assert!(counter.count(chunk) <= 5, "{chunk:?}");
            assert!(text.contains(chunk));
        }
        assert!(text.starts_with(chunks[0]));
        assert!(text.ends_with(chunks[chunks.len() - 1]));
    }
}
