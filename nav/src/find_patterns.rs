//! `find_patterns`: lines matching a literal string or a regular expression,
//! files in path order.
//!
//! Regular expressions use the `regex` crate, whose matching is linear in
//! the input, so no pattern can backtrack exponentially. The seed's budgets
//! still apply — a large file times a heavy automaton is slow even in linear
//! time — and are checked between lines: a file that runs past the per-file
//! budget is abandoned and listed in `skipped_files`, and once the per-call
//! budget is spent the remaining files are listed too and `truncated` is
//! set. Compiled programs are capped (`size_limit`), so a pattern whose
//! automaton would be huge is refused as invalid.

use std::time::Instant;

use regex::{Regex, RegexBuilder};
use serde::Serialize;

use super::entities::{cut, lines};
use super::schema::Args;
use super::{NavService, ToolResult, pretty, repos};

/// Files over this many characters are not searched with a regex.
pub const REGEX_MAX_FILE_CHARS: usize = 1_000_000;
/// Compiled regex size limit.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Skipped paths listed.
pub const SKIPPED_LISTED: usize = 50;

#[derive(Serialize)]
struct Match {
    file_path: String,
    line: usize,
    text: String,
}

#[derive(Serialize)]
struct Output {
    repository: String,
    pattern: String,
    regex: bool,
    total_matches: usize,
    truncated: bool,
    matches: Vec<Match>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped_files: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped_count: Option<usize>,
}

/// A `path_glob` as one compiled expression: fnmatch on the whole path,
/// `*` matching `/` too; `[...]` sets and `?`. Compiled once per call under
/// the same size limit as a regex pattern, so matching every path is linear.
pub fn compile_glob(glob: &str) -> Result<Regex, String> {
    let mut re = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                // A run of stars is one `.*`: fnmatch gives it the same meaning.
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
                re.push_str(".*");
            }
            '?' => re.push('.'),
            '[' => {
                let mut class = String::new();
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == ']' && !class.is_empty() {
                        closed = true;
                        break;
                    }
                    class.push(d);
                }
                if closed {
                    let negated = class.strip_prefix('!').map(|c| format!("^{}", regex::escape(c)));
                    re.push('[');
                    re.push_str(&negated.unwrap_or_else(|| regex::escape(&class).replace("\\-", "-")));
                    re.push(']');
                } else {
                    re.push_str(&regex::escape(&format!("[{class}")));
                }
            }
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push('$');
    RegexBuilder::new(&re).size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(REGEX_SIZE_LIMIT).build().map_err(|_| {
        format!("Invalid path_glob: it does not form a valid pattern within the {REGEX_SIZE_LIMIT}-byte size limit")
    })
}

/// Whether `path` matches `glob` (see [`compile_glob`]); an invalid glob matches nothing.
pub fn glob_match(glob: &str, path: &str) -> bool {
    compile_glob(glob).is_ok_and(|r| r.is_match(path))
}

enum Matcher {
    Literal(String),
    Regex(Regex),
}

pub fn call(nav: &NavService, args: &Args) -> ToolResult {
    let repo = repos::resolve_ready(nav, &args.str("repository").unwrap_or_default())?;
    let pattern = args.str("pattern").unwrap_or_default();
    let is_regex = args.bool("regex");
    let max_results = args.int("max_results").unwrap_or(100).max(1) as usize;
    let glob = args.str("path_glob").map(|g| compile_glob(&g)).transpose()?;
    let matcher = if is_regex {
        let re = RegexBuilder::new(&pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("Invalid regular expression: {}", one_line(&e.to_string())))?;
        Matcher::Regex(re)
    } else {
        Matcher::Literal(pattern.clone())
    };
    let files = nav.files_of(&repo)?;
    let config = nav.config();
    let started = Instant::now();
    let mut matches = Vec::new();
    let mut truncated = false;
    let mut skipped: Vec<String> = Vec::new();
    let in_glob = |path: &str| glob.as_ref().is_none_or(|g| g.is_match(path));
    'files: for (index, file) in files.iter().enumerate() {
        // One budget for the whole call, literal or regex: the files not
        // reached are listed rather than searched.
        if started.elapsed() >= config.regex_call_budget {
            truncated = true;
            skipped.extend(files[index..].iter().filter(|f| in_glob(&f.path)).map(|f| f.path.clone()));
            break;
        }
        if !in_glob(&file.path) {
            continue;
        }
        match &matcher {
            Matcher::Literal(needle) => {
                if !file.content.contains(needle.as_str()) {
                    continue;
                }
                for (n, line) in lines(&file.content).into_iter().enumerate() {
                    if line.contains(needle.as_str()) {
                        if matches.len() == max_results {
                            truncated = true;
                            break 'files;
                        }
                        matches.push(Match { file_path: file.path.clone(), line: n + 1, text: cut(line.trim(), 300) });
                    }
                }
            }
            Matcher::Regex(re) => {
                if file.content.chars().count() > REGEX_MAX_FILE_CHARS {
                    skipped.push(file.path.clone());
                    continue;
                }
                let file_started = Instant::now();
                let mut found = Vec::new();
                let mut over = false;
                for (n, line) in lines(&file.content).into_iter().enumerate() {
                    if file_started.elapsed() >= config.regex_file_budget
                        || started.elapsed() >= config.regex_call_budget
                    {
                        over = true;
                        break;
                    }
                    if re.is_match(line) {
                        found.push(Match { file_path: file.path.clone(), line: n + 1, text: cut(line.trim(), 300) });
                        if matches.len() + found.len() > max_results {
                            break;
                        }
                    }
                }
                if over {
                    // The file's matches are dropped with it: it was not fully searched.
                    skipped.push(file.path.clone());
                    continue;
                }
                for m in found {
                    if matches.len() == max_results {
                        truncated = true;
                        break 'files;
                    }
                    matches.push(m);
                }
            }
        }
    }
    let skipped_count = skipped.len();
    let (skipped_files, skipped_count) = if skipped_count == 0 {
        (None, None)
    } else {
        skipped.truncate(SKIPPED_LISTED);
        (Some(skipped), Some(skipped_count))
    };
    Ok(pretty(&Output {
        repository: repo.name,
        pattern,
        regex: is_regex,
        total_matches: matches.len(),
        truncated,
        matches,
        skipped_files,
        skipped_count,
    }))
}

fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_globs() {
        assert!(glob_match("src/*.py", "src/a/b.py"));
        assert!(glob_match("*.go", "internal/store/store.go"));
        assert!(!glob_match("src/*.py", "lib/a.py"));
        assert!(glob_match("docs/?afé.md", "docs/café.md"));
        assert!(glob_match("[ab]*", "a/x"));
        assert!(!glob_match("[!ab]*", "a/x"));
        assert!(glob_match("a***b", "a/x/b"));
    }

    /// A glob of millions of stars compiled once to `^.*$`
    /// (the schema caps the length first; this is the matcher's own bound).
    #[test]
    fn a_long_run_of_stars_is_one_wildcard() {
        let glob = compile_glob(&"*".repeat(100_000)).unwrap();
        assert_eq!(glob.as_str(), "^.*$");
        let heavy = "[ab]?".repeat(100_000);
        assert!(compile_glob(&heavy).unwrap_err().starts_with("Invalid path_glob: "));
    }
}
