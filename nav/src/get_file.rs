//! `get_file`: one stored file with line numbers, at most 400 lines and
//! 100,000 characters per call, with "close paths" when the path is wrong,
//! and the lines a file rebuilt from chunks lacks (`missing_lines`).

use serde::Serialize;

use super::entities::lines;
use super::schema::Args;
use super::{NavService, ToolResult, pretty, repos};

/// Most lines per call (`MAX_FILE_LINES`).
pub const MAX_FILE_LINES: i64 = 400;
/// Most characters of formatted content per call.
pub const MAX_CONTENT_CHARS: usize = 100_000;

#[derive(Serialize)]
struct Output {
    repository: String,
    path: String,
    language: String,
    total_lines: i64,
    start_line: i64,
    end_line: i64,
    truncated: bool,
    content: String,
    /// Over a Chroma collection: the file's line ranges no chunk covered
    /// (shown as empty lines in `content`), and a sentence saying so.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    missing_lines: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

pub fn call(nav: &NavService, args: &Args) -> ToolResult {
    let repo = repos::resolve_ready(nav, &args.str("repository").unwrap_or_default())?;
    let path = args.str("path").unwrap_or_default();
    let files = nav.files_of(&repo)?;
    let Ok(found) = files.binary_search_by(|f| f.path.as_str().cmp(path.as_str())) else {
        let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
        let close = close_matches(&path, &paths, 10, 0.4);
        let suffix = if close.is_empty() { String::new() } else { format!(" Close paths: {}", close.join(", ")) };
        return Err(format!("File '{}' not found in {}.{suffix}", crate::limits::shown(&path), repo.name));
    };
    let file = &files[found];
    let all = lines(&file.content);
    let total = all.len() as i64;
    let start = args.int("start_line").unwrap_or(1);
    if start > total.max(1) {
        return Err(format!("start_line {start} is past the end of the file ({total} lines)"));
    }
    let requested_end = args.int("end_line");
    if let Some(end) = requested_end
        && end < start
    {
        return Err("end_line must not be before start_line".into());
    }
    let wanted_end = requested_end.unwrap_or(total).min(total);
    let mut end = wanted_end.min(start + MAX_FILE_LINES - 1);
    let mut content = String::new();
    let mut chars = 0usize;
    let mut last = start - 1;
    for n in start..=end {
        let line = format!("{n:>4}| {}", all[(n - 1) as usize]);
        let add = line.chars().count() + usize::from(n > start);
        if chars + add > MAX_CONTENT_CHARS {
            break;
        }
        if n > start {
            content.push('\n');
        }
        content.push_str(&line);
        chars += add;
        last = n;
    }
    let char_cut = last < end;
    if char_cut {
        end = last;
    }
    let language = file.language.clone();
    Ok(pretty(&Output {
        repository: repo.name,
        path,
        language,
        total_lines: total,
        start_line: start,
        end_line: end.max(start.min(total)),
        truncated: end < wanted_end,
        content,
        missing_lines: file.missing_lines.iter().map(|&(a, b)| [a, b]).collect(),
        note: super::reassemble::missing_note(&file.path, &file.missing_lines),
    }))
}

/// Python's `difflib.get_close_matches`: the `n` best candidates whose
/// `SequenceMatcher.ratio()` is at least `cutoff`, best first.
pub fn close_matches(word: &str, candidates: &[String], n: usize, cutoff: f64) -> Vec<String> {
    let a: Vec<char> = word.chars().collect();
    let mut scored: Vec<(f64, &String)> = candidates
        .iter()
        .filter_map(|c| {
            let b: Vec<char> = c.chars().collect();
            let total = a.len() + b.len();
            if total == 0 {
                return None;
            }
            // difflib's real_quick_ratio: the ratio cannot pass the cut-off
            // when the lengths alone rule it out, and the quadratic match
            // below is then skipped (a long path costs no more than a short one).
            if 2.0 * a.len().min(b.len()) as f64 / (total as f64) < cutoff {
                return None;
            }
            let ratio = 2.0 * matching(&a, &b) as f64 / total as f64;
            (ratio >= cutoff).then_some((ratio, c))
        })
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0).then_with(|| y.1.cmp(x.1)));
    scored.into_iter().take(n).map(|(_, c)| c.clone()).collect()
}

/// Characters in matching blocks: the longest common substring, then the
/// same on each side of it, recursively (SequenceMatcher without junk).
fn matching(a: &[char], b: &[char]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let (mut best, mut ai, mut bj) = (0, 0, 0);
    let mut prev = vec![0usize; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            if ca == cb {
                cur[j + 1] = prev[j] + 1;
                if cur[j + 1] > best {
                    best = cur[j + 1];
                    ai = i + 1 - best;
                    bj = j + 1 - best;
                }
            }
        }
        prev = cur;
    }
    if best == 0 {
        return 0;
    }
    best + matching(&a[..ai], &b[..bj]) + matching(&a[ai + best..], &b[bj + best..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_paths_like_difflib() {
        let c: Vec<String> =
            ["src/main.py", "src/main_test.py", "docs/readme.md"].iter().map(|s| s.to_string()).collect();
        assert_eq!(close_matches("src/mian.py", &c, 10, 0.4), vec!["src/main.py", "src/main_test.py"]);
        assert!(close_matches("zzzzzz", &c, 10, 0.4).is_empty());
    }
}
