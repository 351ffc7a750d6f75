//! Whole files from a collection that stores only chunks (a Chroma
//! collection filled by the reference indexer).
//!
//! Each record's document is the context prefix plus an exact excerpt of
//! the file, and its metadata gives the excerpt's line range. Excerpts of
//! one file are joined in chunk order: where consecutive excerpts overlap
//! (the token splitter repeats up to `chunk_overlap` tokens), the longest
//! suffix of the text so far that begins the next excerpt is not repeated;
//! where a line range is missing (a record deleted, or a gap between
//! chunks), the lines are reported as not recovered rather than guessed.

use rr_core::Chunk;

/// A file rebuilt from its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassembled {
    pub path: String,
    pub content: String,
    /// Inclusive 1-based line ranges that no chunk covered.
    pub missing_lines: Vec<(i64, i64)>,
}

/// The excerpt of a record: its document without the context prefix.
pub fn excerpt(chunk: &Chunk) -> &str {
    let m = &chunk.metadata;
    let identity = rr_indexer::Identity {
        organization: m.organization.clone(),
        repository: m.repository.clone(),
        branch: m.branch.clone(),
        commit_sha: m.indexed_commit_sha.clone(),
    };
    let prefix = rr_indexer::context_prefix(&identity, &m.path, &m.file_type, &m.section, &m.symbol);
    chunk
        .document
        .strip_prefix(&prefix)
        .unwrap_or_else(|| chunk.document.split_once("\n\n").map_or(chunk.document.as_str(), |(_, rest)| rest))
}

/// Rebuilds one file from its chunks (any order; other files' chunks are
/// ignored).
pub fn reassemble(path: &str, chunks: &[Chunk]) -> Reassembled {
    let mut mine: Vec<&Chunk> = chunks.iter().filter(|c| c.metadata.path == path).collect();
    mine.sort_by_key(|c| (c.metadata.chunk_index, c.metadata.start_line));
    let mut content = String::new();
    let mut covered_to = 0i64; // last line fully or partly present
    let mut missing = Vec::new();
    for chunk in mine {
        let text = excerpt(chunk);
        let (start, end) = (chunk.metadata.start_line, chunk.metadata.end_line);
        if start > covered_to + 1 {
            missing.push((covered_to + 1, start - 1));
            if !content.is_empty() && !content.ends_with('\n') {
                content.push('\n');
            }
            content.push_str(text);
        } else if content.is_empty() {
            content.push_str(text);
        } else {
            let overlap = longest_overlap(&content, text);
            content.push_str(&text[overlap..]);
        }
        covered_to = covered_to.max(end);
    }
    if let Some(count) = chunks.iter().find(|c| c.metadata.path == path).map(|c| c.metadata.chunk_count) {
        let present = chunks.iter().filter(|c| c.metadata.path == path).count() as i64;
        if present < count && missing.is_empty() {
            // A trailing chunk is gone: its lines are unknown.
            missing.push((covered_to + 1, covered_to + 1));
        }
    }
    Reassembled { path: path.to_owned(), content, missing_lines: missing }
}

/// Length of the longest suffix of `a` that is a prefix of `b`.
fn longest_overlap(a: &str, b: &str) -> usize {
    let max = a.len().min(b.len());
    (1..=max)
        .rev()
        .find(|&n| b.is_char_boundary(n) && a.is_char_boundary(a.len() - n) && a.ends_with(&b[..n]))
        .unwrap_or(0)
}

/// The sentence a tool result carries when lines were not recovered.
pub fn missing_note(r: &Reassembled) -> Option<String> {
    if r.missing_lines.is_empty() {
        return None;
    }
    let ranges: Vec<String> =
        r.missing_lines.iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    Some(format!("Lines {} of {} could not be recovered from the index.", ranges.join(", "), r.path))
}
