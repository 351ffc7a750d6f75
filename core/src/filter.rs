//! The backend-neutral search filter.
//!
//! Filters are applied by the store *before* vector ranking: a store that
//! ranked first and filtered afterwards would return too few results for
//! narrow filters. `source` becomes exact, case-sensitive equality on
//! `organization`, `repository` and `branch`; `path` is a wildcard pattern
//! matched against the `Source:` line that starts every indexed document,
//! which is how the reference server expresses it for Chroma.

use std::sync::OnceLock;

use regex::Regex;

use crate::paths::PathClass;

/// The language a chunk is filtered and listed by: its `language`, or, for
/// the records that carry none (the reference's records of Markdown and
/// plain text keep `language` empty), their `file_type`, `markdown` or
/// `text`; `""` for anything else.
pub fn filter_language<'a>(language: &'a str, file_type: &'a str) -> &'a str {
    match (language, file_type) {
        ("", "markdown" | "text") => file_type,
        _ => language,
    }
}

/// Exact-match metadata filters plus an optional path pattern. Empty strings
/// mean "no constraint".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchFilter {
    pub organization: String,
    pub repository: String,
    pub branch: String,
    pub path: Option<PathGlob>,
    /// The chunk's `language` metadata is one of these; empty: any. Only
    /// the embedded store tests it, and only `serve` over that store offers
    /// it to clients (the drop-in's schema is pinned).
    pub languages: Vec<String>,
    /// The [`PathClass`] of the chunk's path is one of these; empty: any.
    /// Like `languages`, tested by the embedded store.
    pub kinds: Vec<PathClass>,
}

impl SearchFilter {
    /// A filter by source (empty strings match anything) and path pattern
    /// (an empty or invalid one matches any path), no language or kind.
    pub fn scoped(organization: &str, repository: &str, branch: &str, path: &str) -> Self {
        SearchFilter {
            organization: organization.into(),
            repository: repository.into(),
            branch: branch.into(),
            path: PathGlob::new(path),
            ..Default::default()
        }
    }

    /// The non-empty metadata equalities, in the fixed order
    /// organization, repository, branch.
    pub fn metadata_equalities(&self) -> Vec<(&'static str, &str)> {
        [
            ("organization", self.organization.as_str()),
            ("repository", self.repository.as_str()),
            ("branch", self.branch.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect()
    }

    /// Whether a chunk passes this filter, for stores that filter locally.
    pub fn matches(&self, chunk: &crate::Chunk) -> bool {
        let m = &chunk.metadata;
        (self.organization.is_empty() || m.organization == self.organization)
            && (self.repository.is_empty() || m.repository == self.repository)
            && (self.branch.is_empty() || m.branch == self.branch)
            && self.path.as_ref().is_none_or(|p| p.matches_document(&chunk.document))
            && (self.languages.is_empty()
                || self.languages.iter().any(|l| l == filter_language(&m.language, &m.file_type)))
            && (self.kinds.is_empty() || self.kinds.contains(&PathClass::of(&m.path)))
    }
}

/// A repository-relative wildcard pattern: `*` matches any run of characters
/// including `/`, `**/` matches zero or more folders, `?` matches one
/// character, everything else is literal.
///
/// Translated by hand, not matched with `globset`: the regular expression
/// is what the reference sends Chroma (`where_document.$regex`), so it must
/// come out character for character, and stores that filter locally must
/// answer as Chroma answers that expression. globset answers differently
/// (`globset_differs_from_the_pinned_semantics` shows where): `**/`
/// inside a name, `[..]` and `{..}` (literal here), and a path that holds a
/// `:` (the expression may match from any `:` of the `Source:` line).
#[derive(Debug, Clone)]
pub struct PathGlob {
    pattern: String,
    regex_source: String,
    compiled: OnceLock<Option<Regex>>,
}

impl PartialEq for PathGlob {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}
impl Eq for PathGlob {}

/// Characters that Go's `regexp.QuoteMeta` escapes; the same set keeps the
/// pattern sent to a store identical to the reference server's.
const REGEX_META: &str = r"\.+*?()|[]{}^$";

impl PathGlob {
    /// Builds a glob from an already trimmed pattern; a leading `/` is dropped.
    /// Returns `None` when nothing is left (no path constraint).
    pub fn new(pattern: &str) -> Option<Self> {
        let pattern = pattern.strip_prefix('/').unwrap_or(pattern).trim();
        if pattern.is_empty() {
            return None;
        }
        let regex_source = format!("^Source: [^\\n]+:{}(?:\\n|$)", translate(pattern));
        Some(PathGlob { pattern: pattern.to_owned(), regex_source, compiled: OnceLock::new() })
    }

    /// The normalised pattern (leading `/` removed).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The regular expression over a document's text, as sent to Chroma in
    /// `where_document: {"$regex": ...}`.
    pub fn document_regex(&self) -> &str {
        &self.regex_source
    }

    /// The same regular expression, anchored on a bare path instead of the
    /// document's `Source:` line, for stores that keep the path as a field.
    pub fn path_regex(&self) -> String {
        format!("^{}$", translate(&self.pattern))
    }

    /// Whether a document (with its `Source:` prefix) matches, evaluated
    /// locally with the same expression a Chroma server would use.
    pub fn matches_document(&self, document: &str) -> bool {
        self.compiled
            .get_or_init(|| Regex::new(&self.regex_source).ok())
            .as_ref()
            .is_some_and(|re| re.is_match(document))
    }
}

/// What one wildcard (`?`, a run of `*`, `**/`) costs in [`PathGlob::cost`]:
/// a little less than its compiled size measured against a literal byte
/// (31 to 36 with `regex` 1.13), so the estimate never overstates.
pub const WILDCARD_COST: usize = 30;

/// The largest [`PathGlob::cost`] a default cap lets through. The compiled
/// size limit of the Rust `regex` crate (10 MiB, the default Chroma keeps) is
/// reached at 327,628 literal bytes after the `Source:` prefix; a pattern
/// over this cost is certain to be refused by Chroma (HTTP 500) and by the
/// embedded store's matcher alike.
pub const MAX_PATH_COST: usize = 340_000;

impl PathGlob {
    /// A lower bound of the compiled size of the pattern's regular
    /// expression, in literal bytes: one per literal byte and
    /// [`WILDCARD_COST`] per wildcard, scanned as [`translate`] scans, in
    /// linear time and without allocating (the pattern may be megabytes).
    pub fn cost(pattern: &str) -> usize {
        let bytes = pattern.as_bytes();
        let mut cost = 0usize;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'*' => {
                    if bytes[i..].starts_with(b"**/") {
                        i += 3;
                    } else {
                        while i < bytes.len() && bytes[i] == b'*' {
                            i += 1;
                        }
                    }
                    cost += WILDCARD_COST;
                }
                b'?' => {
                    // One character, however many bytes follow.
                    i += 1;
                    cost += WILDCARD_COST;
                }
                _ => {
                    i += 1;
                    cost += 1;
                }
            }
        }
        cost
    }
}

fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => {
                if i + 2 < chars.len() && chars[i + 1] == '*' && chars[i + 2] == '/' {
                    out.push_str("(?:.*/)?");
                    i += 3;
                    continue;
                }
                while i < chars.len() && chars[i] == '*' {
                    i += 1;
                }
                out.push_str(".*");
            }
            '?' => {
                out.push('.');
                i += 1;
            }
            c => {
                if REGEX_META.contains(c) {
                    out.push('\\');
                }
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(p: &str) -> String {
        PathGlob::new(p).map(|g| g.document_regex().to_owned()).unwrap_or_default()
    }

    #[test]
    fn translates_every_glob_form() {
        assert_eq!(re("docs/*"), r"^Source: [^\n]+:docs/.*(?:\n|$)");
        assert_eq!(re("**/*.go"), r"^Source: [^\n]+:(?:.*/)?.*\.go(?:\n|$)");
        assert_eq!(re("config?.yaml"), r"^Source: [^\n]+:config.\.yaml(?:\n|$)");
        assert_eq!(re("/README.md"), r"^Source: [^\n]+:README\.md(?:\n|$)");
        assert_eq!(re("//README.md"), r"^Source: [^\n]+:/README\.md(?:\n|$)");
        assert_eq!(re("a***b"), r"^Source: [^\n]+:a.*b(?:\n|$)");
        assert_eq!(re("docs/café.md"), r"^Source: [^\n]+:docs/café\.md(?:\n|$)");
        assert_eq!(re("x(1)[2]{3}|^$+\\"), r"^Source: [^\n]+:x\(1\)\[2\]\{3\}\|\^\$\+\\(?:\n|$)");
        assert_eq!(re("**"), r"^Source: [^\n]+:.*(?:\n|$)");
        assert_eq!(re("a/**/b"), r"^Source: [^\n]+:a/(?:.*/)?b(?:\n|$)");
        assert_eq!(re("-#&~ /"), r"^Source: [^\n]+:-#&~ /(?:\n|$)");
    }

    #[test]
    fn empty_and_slash_only_mean_no_constraint() {
        assert!(PathGlob::new("").is_none());
        assert!(PathGlob::new("/").is_none());
        assert!(PathGlob::new("/  ").is_none());
    }

    /// Why the pattern is translated by hand: each case is one where globset,
    /// with the options closest to the pinned semantics, gives another answer.
    #[test]
    fn globset_differs_from_the_pinned_semantics() {
        let globset = |pattern: &str, path: &str| {
            globset::GlobBuilder::new(pattern)
                .literal_separator(false)
                .build()
                .is_ok_and(|glob| glob.compile_matcher().is_match(path))
        };
        let ours = |pattern: &str, path: &str| {
            PathGlob::new(pattern)
                .unwrap()
                .matches_document(&format!("Source: acme/widgets@main:{path}\nType: text\n\nx"))
        };
        for (pattern, path) in
            [("docs**/a.md", "docsa.md"), ("[ab].md", "[ab].md"), ("{a,b}.md", "{a,b}.md"), ("x/*.go", "dir:x/y.go")]
        {
            assert!(ours(pattern, path), "{pattern} matches {path}");
            assert!(!globset(pattern, path), "globset now matches {pattern} on {path}: reconsider it");
        }
    }

    #[test]
    fn matches_documents_like_chroma() {
        let doc = "Source: acme/widgets@main:internal/config/config.go\nType: go\n\nbody";
        assert!(PathGlob::new("internal/*").unwrap().matches_document(doc));
        assert!(PathGlob::new("**/config.go").unwrap().matches_document(doc));
        assert!(PathGlob::new("*.go").unwrap().matches_document(doc));
        assert!(!PathGlob::new("config.go").unwrap().matches_document(doc));
        assert!(PathGlob::new("internal/config/config.g?").unwrap().matches_document(doc));
        assert!(!PathGlob::new("internal/config/config.?").unwrap().matches_document(doc));
        assert_eq!(PathGlob::new("**/*.go").unwrap().path_regex(), r"^(?:.*/)?.*\.go$");
    }

    #[test]
    fn markdown_and_text_records_are_filtered_by_their_file_type() {
        assert_eq!(filter_language("", "markdown"), "markdown");
        assert_eq!(filter_language("", "text"), "text");
        assert_eq!(filter_language("go", "go"), "go");
        assert_eq!(filter_language("", "go"), "");
        let mut chunk = crate::Chunk::default();
        chunk.metadata.file_type = "markdown".into();
        let markdown = SearchFilter { languages: vec!["markdown".into()], ..Default::default() };
        assert!(markdown.matches(&chunk));
        let text = SearchFilter { languages: vec!["text".into()], ..Default::default() };
        assert!(!text.matches(&chunk));
    }

    #[test]
    fn cost_counts_literal_bytes_and_wildcards() {
        assert_eq!(PathGlob::cost(""), 0);
        assert_eq!(PathGlob::cost("docs/café.md"), 13);
        assert_eq!(PathGlob::cost("**/*.go"), 2 * WILDCARD_COST + 3);
        assert_eq!(PathGlob::cost("a?b"), 2 + WILDCARD_COST);
        // A run of stars is one `.*`, whatever its length.
        assert_eq!(PathGlob::cost(&"*".repeat(4_000_000)), WILDCARD_COST);
    }

    /// The estimate never overstates: every pattern it refuses is one the
    /// regex crate (Chroma's) refuses to compile, and the widest literal the
    /// crate accepts is under the cap.
    #[test]
    fn patterns_over_the_cost_cap_do_not_compile() {
        let refused = [
            "a".repeat(MAX_PATH_COST + 1),
            "é".repeat(MAX_PATH_COST / 2 + 1),
            "**/".repeat(MAX_PATH_COST / WILDCARD_COST + 1),
            "a*".repeat(MAX_PATH_COST / (WILDCARD_COST + 1) + 1),
            "?".repeat(MAX_PATH_COST / WILDCARD_COST + 1),
        ];
        for p in refused {
            assert!(PathGlob::cost(&p) > MAX_PATH_COST);
            let glob = PathGlob::new(&p).unwrap();
            assert!(Regex::new(glob.document_regex()).is_err(), "{} bytes compiled", p.len());
        }
        let widest = "a".repeat(327_628);
        assert!(PathGlob::cost(&widest) <= MAX_PATH_COST);
        assert!(Regex::new(PathGlob::new(&widest).unwrap().document_regex()).is_ok());
    }
}
