//! Result selection: relevance order, no duplicate text, and evidence spread
//! over several files before any one file gets a third excerpt.

use std::collections::{HashMap, HashSet};

use crate::record::Candidate;

/// Most results one file gets before other files have had their turn in the
/// reference server's selection, which the drop-in keeps.
pub const PER_FILE_FIRST_PASS: usize = 2;

/// A document without the indexer's context prefix: trimmed, and when it
/// starts with `Source: ` and holds a blank line, what follows the first
/// blank line, trimmed.
pub fn clean_document(document: &str) -> &str {
    let document = document.trim();
    if document.starts_with("Source: ")
        && let Some((_, body)) = document.split_once("\n\n")
    {
        return body.trim();
    }
    document
}

/// Picks at most `limit` candidates from a relevance-ordered list: empty and
/// repeated bodies are dropped, a file gets at most two results at first, and
/// deferred same-file results fill what is left, in order.
pub fn select(candidates: Vec<Candidate>, limit: usize) -> Vec<Candidate> {
    select_spread(candidates, limit, PER_FILE_FIRST_PASS)
}

/// [`select`] with `per_file` results for a file before other files have
/// had their turn; 0 keeps the relevance order as it is (empty and repeated
/// bodies are still dropped).
pub fn select_spread(candidates: Vec<Candidate>, limit: usize, per_file: usize) -> Vec<Candidate> {
    let first_pass = if per_file == 0 { usize::MAX } else { per_file };
    let mut selected = Vec::with_capacity(limit.min(candidates.len()));
    let mut deferred = Vec::new();
    let mut per_file: HashMap<String, usize> = HashMap::new();
    let mut seen: HashSet<String> = HashSet::new();
    if limit == 0 {
        return selected;
    }
    for candidate in candidates {
        let body = clean_document(&candidate.chunk.document);
        if body.is_empty() || !seen.insert(body.to_owned()) {
            continue;
        }
        let count = per_file.entry(candidate.chunk.metadata.file_key()).or_default();
        if *count >= first_pass {
            deferred.push(candidate);
            continue;
        }
        *count += 1;
        selected.push(candidate);
        if selected.len() == limit {
            return selected;
        }
    }
    let room = limit - selected.len();
    selected.extend(deferred.into_iter().take(room));
    selected
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Chunk, Metadata};

    fn cand(path: &str, body: &str) -> Candidate {
        Candidate {
            chunk: Chunk {
                id: format!("{path}:{body}"),
                document: format!("Source: o/r@main:{path}\nType: text\n\n{body}"),
                metadata: Metadata {
                    organization: "o".into(),
                    repository: "r".into(),
                    branch: "main".into(),
                    path: path.into(),
                    ..Default::default()
                },
            },
            distance: None,
        }
    }

    fn ids(v: &[Candidate]) -> Vec<&str> {
        v.iter().map(|c| c.chunk.id.as_str()).collect()
    }

    #[test]
    fn cleans_the_prefix() {
        assert_eq!(clean_document("  Source: a/b@c:d\nType: x\n\n  body \n\nmore \n"), "body \n\nmore");
        assert_eq!(clean_document("Source: no blank line\nbody"), "Source: no blank line\nbody");
        assert_eq!(clean_document(" plain text "), "plain text");
        // Trimming first means a prefix with nothing after it stays whole.
        assert_eq!(clean_document("Source: a\n\n   \n"), "Source: a");
        assert_eq!(clean_document("Source: a\n\n   \n\n x"), "x");
        assert_eq!(clean_document(" \n "), "");
    }

    #[test]
    fn defers_third_result_of_a_file_and_fills_from_deferred() {
        let c = vec![cand("a", "1"), cand("a", "2"), cand("a", "3"), cand("b", "4"), cand("a", "5")];
        assert_eq!(ids(&select(c.clone(), 3)), ["a:1", "a:2", "b:4"]);
        assert_eq!(ids(&select(c.clone(), 5)), ["a:1", "a:2", "b:4", "a:3", "a:5"]);
        assert_eq!(ids(&select(c, 10)), ["a:1", "a:2", "b:4", "a:3", "a:5"]);
    }

    #[test]
    fn spread_is_per_file_and_zero_keeps_the_order() {
        let c = vec![cand("a", "1"), cand("a", "2"), cand("a", "3"), cand("b", "4"), cand("a", "5")];
        assert_eq!(ids(&select_spread(c.clone(), 3, 1)), ["a:1", "b:4", "a:2"]);
        assert_eq!(ids(&select_spread(c.clone(), 4, 3)), ["a:1", "a:2", "a:3", "b:4"]);
        assert_eq!(ids(&select_spread(c.clone(), 4, 0)), ["a:1", "a:2", "a:3", "b:4"]);
        assert_eq!(ids(&select_spread(c.clone(), 5, 0)), ids(&c));
        assert_eq!(ids(&select_spread(c.clone(), 5, PER_FILE_FIRST_PASS)), ids(&select(c, 5)));
        let mut dup = vec![cand("a", "same"), cand("a", "same"), cand("b", "x")];
        dup[1].chunk.id = "a:same again".into();
        assert_eq!(ids(&select_spread(dup, 5, 0)), ["a:same", "b:x"]);
    }

    #[test]
    fn drops_empty_and_duplicate_bodies() {
        let mut empty = cand("c", "");
        empty.chunk.document = "  \n".into();
        let c = vec![cand("a", "same"), cand("b", " same "), empty, cand("d", "other")];
        assert_eq!(ids(&select(c, 5)), ["a:same", "d:other"]);
    }

    #[test]
    fn same_path_on_other_branch_is_another_file() {
        let mut other = cand("a", "3");
        other.chunk.metadata.branch = "dev".into();
        let c = vec![cand("a", "1"), cand("a", "2"), other];
        assert_eq!(ids(&select(c, 3)), ["a:1", "a:2", "a:3"]);
    }
}
