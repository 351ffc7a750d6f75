//! Git wildmatch path patterns, with the semantics of Python `pathspec`'s
//! `gitwildmatch` patterns (version 0.12), which the reference indexer uses for
//! its include and exclude paths.
//!
//! Matching is `globset`'s, with `*` and `?` kept inside one path segment and an
//! unclosed `[` read as a literal, as pathspec reads them: `*`, `?`, `[a-c]`,
//! `[!a-c]`, `\x` and `**` between slashes mean the same in both. The Git rules
//! around a glob are pathspec's and live here: a pattern without a slash matches
//! at any depth (`*.py` matches `a/b.py`), a pattern also matches everything
//! below a matching directory (`docs` matches `docs/a.md`), a trailing `/`
//! matches only below a directory, a leading `/` anchors at the root, and `**/`
//! alone matches everything but files in the root.
//!
//! Where the two differ, Git's reading wins: braces are literal in Git but an
//! alternation in globset, so they are escaped. Left as globset reads them, in
//! patterns no repository configuration is known to use: POSIX classes
//! (`[[:alpha:]]`) and a backslash inside a bracket expression.
//!
//! A list of patterns is evaluated like `PathSpec.match_file`: every pattern
//! that matches sets the result to its polarity (`!pattern` excludes), the last
//! match wins, and no match means "not matched".

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::IndexError;

/// An ordered list of Git wildmatch patterns.
#[derive(Debug, Clone)]
pub struct PathSpec {
    /// Each pattern's globs, in pattern order.
    set: GlobSet,
    /// The polarity of the pattern each glob of `set` comes from.
    include: Vec<bool>,
}

impl Default for PathSpec {
    fn default() -> Self {
        PathSpec { set: GlobSet::empty(), include: Vec::new() }
    }
}

impl PathSpec {
    /// Compiles the patterns; comments (`#...`) and blank lines are no-ops.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, IndexError> {
        let mut builder = GlobSetBuilder::new();
        let mut include = Vec::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let invalid = |reason: String| IndexError::InvalidPattern { pattern: pattern.to_owned(), reason };
            let Some((globs, polarity)) = translate(pattern).map_err(invalid)? else {
                continue;
            };
            for glob in globs {
                let glob = GlobBuilder::new(&glob)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .allow_unclosed_class(true)
                    .build()
                    .map_err(|e| invalid(e.kind().to_string()))?;
                builder.add(glob);
                include.push(polarity);
            }
        }
        let set = builder.build().map_err(|e| IndexError::InvalidPattern {
            pattern: patterns.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", "),
            reason: e.to_string(),
        })?;
        Ok(PathSpec { set, include })
    }

    /// Whether the POSIX relative `path` is selected by the patterns.
    pub fn matches(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').or_else(|| path.strip_prefix("./")).unwrap_or(path);
        // Indexes come back in ascending order: the last one is the last pattern that matched.
        self.set.matches(path).last().is_some_and(|&glob| self.include[glob])
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

/// A pattern's globs (it matches when one of them does) and polarity, or
/// `None` for a no-op line.
fn translate(pattern: &str) -> Result<Option<(Vec<String>, bool)>, String> {
    let pattern = trim(pattern);
    if pattern.is_empty() || pattern.starts_with('#') || pattern == "/" {
        return Ok(None);
    }
    let (pattern, include) = match pattern.strip_prefix('!') {
        Some(rest) => (rest, false),
        None => (pattern, true),
    };
    let mut segs: Vec<&str> = pattern.split('/').collect();
    segs.dedup_by(|next, previous| *next == "**" && *previous == "**");

    // `**/` matches everything except files directly in the root.
    if segs == ["**", ""] {
        return Ok(Some((vec!["*/**".to_owned()], include)));
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
    let glob = segs.join("/").replace('{', "\\{").replace('}', "\\}");
    if segs.last() == Some(&"**") {
        return Ok(Some((vec![glob], include)));
    }
    // A name matches a file, or a directory and everything below it.
    let below = format!("{glob}/**");
    Ok(Some((vec![glob, below], include)))
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

    /// The answers of pathspec 0.12.1's `gitwildmatch` for each form of pattern.
    #[test]
    fn matches_like_pathspec() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("*.py", &["a.py", "src/a.py", "a.py/x", "x/.py"], &["a.pyc", "apy", "py/a"]),
            ("/src", &["src", "src/a.rs", "src/a/b"], &["lib/src", "srcs"]),
            ("docs/", &["docs/a.md", "x/docs/a.md"], &["docs", "docsx/a"]),
            ("a/**/b", &["a/b", "a/x/b", "a/x/y/b", "a/b/c"], &["b", "x/a/b", "a/xb"]),
            ("a/**", &["a/x", "a/x/y"], &["a", "b/a/x"]),
            ("**/", &["a/b", "a/b/c"], &["a"]),
            ("a/*", &["a/x", "a/x/y"], &["a", "b/a/x"]),
            ("[!a-c]?", &["dx", "x/dx", "dx/y"], &["ax", "d", "dxy"]),
            ("**/*.go", &["main.go", "cmd/main.go"], &["main.gox"]),
            ("src/*.rs", &["src/a.rs"], &["src/a/b.rs", "x/src/a.rs"]),
            ("a?c", &["abc", "x/abc"], &["a/c", "ac"]),
            ("\\*.md", &["*.md"], &["a.md"]),
            ("[ab", &["[ab", "x/[ab"], &["a"]),
            ("{a,b}.md", &["{a,b}.md"], &["a.md", "b.md"]),
            ("a**b", &["ab", "axxb"], &["a/b"]),
        ];
        for (pattern, hits, misses) in cases {
            let one = spec(&[pattern]);
            for path in *hits {
                assert!(one.matches(path), "{pattern} should match {path}");
            }
            for path in *misses {
                assert!(!one.matches(path), "{pattern} should not match {path}");
            }
        }
    }

    #[test]
    fn the_last_matching_pattern_wins() {
        let s = spec(&["**", "!docs/", "docs/keep.md", "!*.lock"]);
        assert!(s.matches("src/a.rs"));
        assert!(!s.matches("docs/a.md"));
        assert!(s.matches("docs/keep.md"));
        assert!(!s.matches("Cargo.lock"));
        assert!(!spec(&[]).matches("a"));
        assert!(!PathSpec::default().matches("a"));
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
