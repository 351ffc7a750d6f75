//! Git wildmatch path patterns, with the semantics of Python `pathspec`'s
//! `gitwildmatch` patterns (version 0.12), which the reference indexer uses for
//! its include and exclude paths.
//!
//! `globset` was considered and rejected here: a Git pattern without a slash
//! matches at any depth (`*.py` matches `a/b.py`), a pattern also matches
//! everything below a matching directory (`docs` matches `docs/a.md`), `[^..]`
//! negates, a trailing `/` only matches directories and `**/` has its own edge
//! case. globset implements none of these, so each pattern is translated to a
//! regular expression following the same rules as `pathspec`.
//!
//! A list of patterns is evaluated like `PathSpec.match_file`: every pattern
//! that matches sets the result to its polarity (`!pattern` excludes), the last
//! match wins, and no match means "not matched".

use regex::Regex;

use crate::IndexError;

/// One compiled pattern.
#[derive(Debug, Clone)]
struct Pattern {
    regex: Regex,
    include: bool,
}

/// An ordered list of Git wildmatch patterns.
#[derive(Debug, Clone, Default)]
pub struct PathSpec {
    patterns: Vec<Pattern>,
}

impl PathSpec {
    /// Compiles the patterns; comments (`#...`) and blank lines are no-ops.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, IndexError> {
        let mut compiled = Vec::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let invalid = |reason: String| IndexError::InvalidPattern { pattern: pattern.to_owned(), reason };
            if let Some((source, include)) = translate(pattern).map_err(invalid)? {
                let regex = Regex::new(&source).map_err(|e| invalid(e.to_string()))?;
                compiled.push(Pattern { regex, include });
            }
        }
        Ok(PathSpec { patterns: compiled })
    }

    /// Whether the POSIX relative `path` is selected by the patterns.
    pub fn matches(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').or_else(|| path.strip_prefix("./")).unwrap_or(path);
        let mut matched = false;
        for pattern in &self.patterns {
            if pattern.regex.is_match(path) {
                matched = pattern.include;
            }
        }
        matched
    }
}

/// Python's `str.strip()` whitespace, which pathspec applies to each pattern.
fn trim(pattern: &str) -> &str {
    if pattern.ends_with("\\ ") {
        // An escaped trailing space is kept: strip from the left only.
        pattern.trim_start_matches(crate::pytext::is_space)
    } else {
        crate::pytext::strip(pattern)
    }
}

/// A pattern's regular expression and polarity, or `None` for a no-op line.
fn translate(pattern: &str) -> Result<Option<(String, bool)>, String> {
    let pattern = trim(pattern);
    if pattern.is_empty() || pattern.starts_with('#') || pattern == "/" {
        return Ok(None);
    }
    let (pattern, include) = match pattern.strip_prefix('!') {
        Some(rest) => (rest, false),
        None => (pattern, true),
    };
    let mut segs: Vec<&str> = pattern.split('/').collect();

    // Collapse runs of `**` segments into one.
    let mut i = segs.len().saturating_sub(1);
    while i > 0 {
        if segs[i - 1] == "**" && segs[i] == "**" {
            segs.remove(i);
        }
        i -= 1;
    }

    // `**/` matches everything except files directly in the root.
    if segs.len() == 2 && segs[0] == "**" && segs[1].is_empty() {
        return Ok(Some(("^.+/.*\n?\\z".to_owned(), include)));
    }

    if segs[0].is_empty() {
        // A leading slash anchors the pattern at the root.
        segs.remove(0);
    } else if (segs.len() == 1 || (segs.len() == 2 && segs[1].is_empty())) && segs[0] != "**" {
        // A single name (optionally with a trailing slash) matches at any depth.
        segs.insert(0, "**");
    }
    if segs.is_empty() {
        return Err("invalid git pattern".to_owned());
    }
    if segs.len() > 1 && segs.last().is_some_and(|s| s.is_empty()) {
        // A trailing slash matches everything below the directory.
        let last = segs.len() - 1;
        segs[last] = "**";
    }

    let mut out = String::from("^");
    let mut need_slash = false;
    let end = segs.len() - 1;
    for (i, seg) in segs.iter().enumerate() {
        if *seg == "**" {
            if i == 0 && i == end {
                out.push_str("[^/]+(?:/.*)?");
            } else if i == 0 {
                out.push_str("(?:.+/)?");
                need_slash = false;
            } else if i == end {
                out.push_str("/.*");
            } else {
                out.push_str("(?:/.+)?");
                need_slash = true;
            }
            continue;
        }
        if need_slash {
            out.push('/');
        }
        if *seg == "*" {
            out.push_str("[^/]+");
        } else {
            segment_glob(seg, &mut out)?;
        }
        if i == end {
            // A name matches a file, or a directory and everything below it.
            out.push_str("(?:/.*)?");
        }
        need_slash = true;
    }
    // Python's `$` also matches before one final newline.
    out.push_str("\n?\\z");
    Ok(Some((out, include)))
}

/// Translates one path segment (`*`, `?`, `[...]`, `\x`, literals).
fn segment_glob(seg: &str, out: &mut String) -> Result<(), String> {
    let chars: Vec<char> = seg.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let Some(&next) = chars.get(i) else {
                    return Err("escape character found with no next character".to_owned());
                };
                push_literal(next, out);
                i += 1;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => {
                let mut j = i;
                if j < chars.len() && (chars[j] == '!' || chars[j] == '^') {
                    j += 1;
                }
                if j < chars.len() && chars[j] == ']' {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j < chars.len() {
                    let negate = chars[i] == '!' || chars[i] == '^';
                    let body_start = if negate { i + 1 } else { i };
                    bracket(&chars[body_start..j], negate, out)?;
                    i = j + 1;
                } else {
                    out.push_str("\\[");
                }
            }
            c => push_literal(c, out),
        }
    }
    Ok(())
}

fn push_literal(c: char, out: &mut String) {
    let mut buf = [0u8; 4];
    out.push_str(&regex::escape(c.encode_utf8(&mut buf)));
}

/// A bracket expression as Python's `re` reads pathspec's output: every
/// character is literal (backslashes included), `a-b` is a range, a `]` first
/// or a `-` last is literal. Emitted with each member escaped, so that Rust's
/// class syntax (nested classes, `&&`, `[:alpha:]`) never applies.
fn bracket(body: &[char], negate: bool, out: &mut String) -> Result<(), String> {
    let escape = |c: char| {
        let mut buf = [0u8; 4];
        regex::escape(c.encode_utf8(&mut buf))
    };
    let mut class = String::from(if negate { "[^" } else { "[" });
    let mut k = 0;
    while k < body.len() {
        let lo = body[k];
        if k + 2 < body.len() && body[k + 1] == '-' {
            let hi = body[k + 2];
            if hi < lo {
                return Err(format!("bad character range {lo}-{hi}"));
            }
            class.push_str(&escape(lo));
            class.push('-');
            class.push_str(&escape(hi));
            k += 3;
        } else {
            class.push_str(&escape(lo));
            k += 1;
        }
    }
    class.push(']');
    out.push_str(&class);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(patterns: &[&str]) -> PathSpec {
        PathSpec::new(patterns).unwrap()
    }

    #[test]
    fn double_star_matches_everything() {
        let all = spec(&["**"]);
        for path in ["a", "a/b", ".github/workflow.yml", "docs/café.md"] {
            assert!(all.matches(path), "{path}");
        }
    }

    #[test]
    fn regexes_match_pathspec_translation() {
        // Expected strings are pathspec 0.12.1's regexes with the group name
        // removed and `$` written as `\n?\z`.
        let cases = [
            ("*.py", "^(?:.+/)?[^/]*\\.py(?:/.*)?\n?\\z"),
            ("/src", "^src(?:/.*)?\n?\\z"),
            ("docs/", "^(?:.+/)?docs/.*\n?\\z"),
            ("a/**/b", "^a(?:/.+)?/b(?:/.*)?\n?\\z"),
            ("a/**", "^a/.*\n?\\z"),
            ("**", "^[^/]+(?:/.*)?\n?\\z"),
            ("**/", "^.+/.*\n?\\z"),
            ("a/*", "^a/[^/]+(?:/.*)?\n?\\z"),
            ("[!a-c]?", "^(?:.+/)?[^a-c][^/](?:/.*)?\n?\\z"),
        ];
        for (pattern, expected) in cases {
            assert_eq!(translate(pattern).unwrap().unwrap().0, expected, "{pattern}");
        }
    }

    #[test]
    fn no_op_lines() {
        for pattern in ["", "   ", "# comment", "/"] {
            assert!(translate(pattern).unwrap().is_none(), "{pattern:?}");
        }
    }

    #[test]
    fn invalid_patterns_are_errors() {
        assert!(PathSpec::new(&["foo\\"]).is_err());
        assert!(PathSpec::new(&["[z-a]"]).is_err());
    }
}
