//! Whole files from a collection that stores only chunks (a Chroma
//! collection filled by the reference indexer).
//!
//! Each record's document is the context prefix plus an exact excerpt of
//! the file, and its metadata gives the excerpt's line range. Excerpts of
//! one file are joined in chunk order: where consecutive excerpts overlap
//! (the token splitter repeats up to `chunk_overlap` tokens), the longest
//! suffix of the text so far that begins the next excerpt is not repeated;
//! where a line range is missing (a record deleted, or a gap between
//! chunks), the lines are reported as not recovered rather than guessed,
//! and stand as empty lines in the text so that every later line keeps its
//! number. A missing last chunk leaves the file's end unknown: it is
//! reported as the one line after the last recovered line.

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
        source_host: None,
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
            // Empty lines stand in for the lost ones, so the lines after
            // the gap keep their numbers.
            for _ in covered_to + 1..start {
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
pub fn missing_note(path: &str, missing_lines: &[(i64, i64)]) -> Option<String> {
    if missing_lines.is_empty() {
        return None;
    }
    let ranges: Vec<String> =
        missing_lines.iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    let word = if ranges.len() == 1 && !ranges[0].contains('-') { "Line" } else { "Lines" };
    Some(format!("{word} {} of {} could not be recovered from the index.", ranges.join(", "), path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_core::Metadata;

    fn chunk(path: &str, index: i64, count: i64, lines: (i64, i64), text: &str) -> Chunk {
        let metadata = Metadata {
            organization: "acme".into(),
            repository: "widgets".into(),
            branch: "main".into(),
            path: path.into(),
            file_type: "text".into(),
            chunk_index: index,
            chunk_count: count,
            start_line: lines.0,
            end_line: lines.1,
            ..Metadata::default()
        };
        let document = format!("Source: acme/widgets@main:{path}\nType: text\n\n{text}");
        Chunk { id: format!("{path}#{index}"), document, metadata }
    }

    #[test]
    fn overlapping_pieces_join_and_gaps_keep_line_numbers() {
        let whole = [
            chunk("a.txt", 0, 3, (1, 2), "one\ntwo ha"),
            chunk("a.txt", 1, 3, (2, 3), "two half\nthree\n"),
            chunk("a.txt", 2, 3, (4, 4), "four\n"),
            chunk("b.txt", 0, 1, (1, 1), "other\n"),
        ];
        let r = reassemble("a.txt", &whole);
        assert_eq!(r.content, "one\ntwo half\nthree\nfour\n");
        assert!(r.missing_lines.is_empty());
        assert_eq!(missing_note(&r.path, &r.missing_lines), None);

        let gap = [whole[0].clone(), whole[2].clone()];
        let r = reassemble("a.txt", &gap);
        assert_eq!(r.content, "one\ntwo ha\n\nfour\n");
        assert_eq!(r.missing_lines, [(3, 3)]);
        assert_eq!(
            missing_note(&r.path, &r.missing_lines).unwrap(),
            "Line 3 of a.txt could not be recovered from the index."
        );

        let r = reassemble("a.txt", &whole[1..3]);
        assert_eq!(r.content, "\ntwo half\nthree\nfour\n");
        assert_eq!(r.missing_lines, [(1, 1)]);
        let r = reassemble("a.txt", &whole[..2]);
        assert_eq!(r.missing_lines, [(4, 4)], "a lost last chunk");
    }
}
