//! Arguments of the `search` tool and their validation.
//!
//! Checks run in a fixed order and the first failure wins; every message is
//! part of the client contract.

use serde::{Deserialize, Serialize};

use crate::filter::{PathGlob, SearchFilter};
use crate::paths::PathClass;

/// Results returned when `limit` is absent or 0.
pub const DEFAULT_LIMIT: i64 = 5;
/// The largest `limit` a client may ask for.
pub const MAX_LIMIT: i64 = 20;

/// The raw arguments as a client sends them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchArgs {
    #[serde(default)]
    pub query: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub limit: i64,
    /// Only chunks of this `language` (empty: any); offered by `serve` over
    /// the embedded store, never by the drop-in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub language: String,
    /// Only chunks whose path is of this [`PathClass`] name (empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl SearchArgs {
    /// The arguments trimmed and with the default limit applied: what a
    /// request log records, whether or not validation then passes.
    pub fn normalized(&self) -> SearchArgs {
        SearchArgs {
            query: self.query.trim().to_owned(),
            source: self.source.trim().to_owned(),
            path: self.path.trim().to_owned(),
            limit: if self.limit == 0 { DEFAULT_LIMIT } else { self.limit },
            language: self.language.trim().to_owned(),
            kind: self.kind.trim().to_owned(),
        }
    }

    /// Validates in the contract's order, with the default [`ArgLimits`].
    pub fn validate(&self) -> Result<SearchRequest, ValidationError> {
        self.validate_within(&ArgLimits::default())
    }

    /// Validates in the contract's order, then holds the arguments to
    /// `limits`. The reference's checks always come first, so a call it
    /// refuses gets its message; the caps only speak for calls it would
    /// have passed on.
    pub fn validate_within(&self, limits: &ArgLimits) -> Result<SearchRequest, ValidationError> {
        let n = self.normalized();
        if n.query.is_empty() {
            return Err(ValidationError::EmptyQuery);
        }
        if !(1..=MAX_LIMIT).contains(&n.limit) {
            return Err(ValidationError::LimitOutOfRange);
        }
        let (organization, repository, branch) = parse_source(&n.source)?;
        // `PathGlob::new` drops the one leading `/` the reference drops; the
        // check runs on what is left, as the reference's does.
        let path = PathGlob::new(&n.path);
        if path.as_ref().is_some_and(|glob| glob.pattern().contains(['\r', '\n'])) {
            return Err(ValidationError::PathLineBreak);
        }
        limits.check(&n.query, &n.source, path.as_ref().map_or("", |glob| glob.pattern()))?;
        let kinds = match n.kind.as_str() {
            "" => Vec::new(),
            kind => vec![kind.parse::<PathClass>().map_err(|_| ValidationError::UnknownKind)?],
        };
        let languages = if n.language.is_empty() { Vec::new() } else { vec![n.language] };
        Ok(SearchRequest {
            query: n.query,
            limit: n.limit as usize,
            filter: SearchFilter { organization, repository, branch, path, languages, kinds },
            source: n.source,
        })
    }
}

/// `owner/repo` or `owner/repo@branch`; everything after the first `@` is the branch.
fn parse_source(value: &str) -> Result<(String, String, String), ValidationError> {
    if value.is_empty() {
        return Ok(Default::default());
    }
    let (repo_part, branch) = match value.split_once('@') {
        Some((before, after)) => {
            let branch = after.trim();
            if branch.is_empty() {
                return Err(ValidationError::EmptyBranch);
            }
            (before, branch.to_owned())
        }
        None => (value, String::new()),
    };
    let parts: Vec<&str> = repo_part.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(ValidationError::BadSource);
    }
    Ok((parts[0].trim().to_owned(), parts[1].trim().to_owned(), branch))
}

/// A validated search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// The trimmed query, without any embedding prefix.
    pub query: String,
    /// 1..=20.
    pub limit: usize,
    pub filter: SearchFilter,
    /// The trimmed `source` argument as given (empty when absent); it changes
    /// the no-match text.
    pub source: String,
}

/// Caps on the `search` arguments, checked after the reference's own
/// checks. Each default is at or beyond what the reference server could
/// answer: the MCP HTTP transport refuses bodies over 4 MiB
/// ([`MAX_ARGUMENT_BYTES`]), so no call it accepts is refused by the query or
/// source cap, and a path is refused only when the regular expression it
/// becomes is certain to be over the compiled-size limit of the Rust `regex`
/// crate, which Chroma applies too (it answers HTTP 500 to such a query).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgLimits {
    /// Bytes of the trimmed `query`.
    pub max_query_bytes: usize,
    /// Bytes of the trimmed `source`.
    pub max_source_bytes: usize,
    /// The estimated compiled size of the path's regular expression, in
    /// units of one literal byte (see [`PathGlob::cost`]).
    pub max_path_cost: usize,
}

/// The largest string argument a default cap lets through.
pub const MAX_ARGUMENT_BYTES: usize = 4 << 20;

impl Default for ArgLimits {
    fn default() -> Self {
        ArgLimits {
            max_query_bytes: MAX_ARGUMENT_BYTES,
            max_source_bytes: MAX_ARGUMENT_BYTES,
            max_path_cost: crate::filter::MAX_PATH_COST,
        }
    }
}

impl ArgLimits {
    fn check(&self, query: &str, source: &str, path: &str) -> Result<(), ValidationError> {
        if query.len() > self.max_query_bytes {
            return Err(ValidationError::QueryTooLong { max: self.max_query_bytes });
        }
        if source.len() > self.max_source_bytes {
            return Err(ValidationError::SourceTooLong { max: self.max_source_bytes });
        }
        if PathGlob::cost(path) > self.max_path_cost {
            return Err(ValidationError::PathTooComplex { max: self.max_path_cost });
        }
        Ok(())
    }
}

/// Why a `search` call was refused before any backend was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("query must be non-empty")]
    EmptyQuery,
    #[error("limit must be between 1 and 20")]
    LimitOutOfRange,
    #[error("source branch must be non-empty after @")]
    EmptyBranch,
    #[error("source must use owner/repository or owner/repository@branch")]
    BadSource,
    #[error("path must not contain line breaks")]
    PathLineBreak,
    /// Not a reference check: see [`ArgLimits`].
    #[error("query is too long: at most {max} bytes")]
    QueryTooLong { max: usize },
    #[error("source is too long: at most {max} bytes")]
    SourceTooLong { max: usize },
    #[error(
        "path is too complex: its pattern would exceed {max} units (one per literal byte, {wild} per wildcard), past the regular-expression size limit of the store",
        wild = crate::filter::WILDCARD_COST
    )]
    PathTooComplex { max: usize },
    /// A `kind` that is no [`PathClass`] (`serve` checks it first against
    /// the kinds its index holds, with the value in the message).
    #[error("kind must be one of source, test, example, bench, docs, generated, vendored")]
    UnknownKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(query: &str, source: &str, path: &str, limit: i64) -> SearchArgs {
        SearchArgs { query: query.into(), source: source.into(), path: path.into(), limit, ..Default::default() }
    }

    fn err(a: SearchArgs) -> String {
        a.validate().unwrap_err().to_string()
    }

    #[test]
    fn language_and_kind_become_the_filter_and_an_unknown_kind_is_refused() {
        let a = SearchArgs { language: " rust ".into(), kind: "test".into(), ..args("q", "", "", 0) };
        let filter = a.validate().unwrap().filter;
        assert_eq!((filter.languages, filter.kinds), (vec!["rust".to_owned()], vec![PathClass::Test]));
        assert_eq!(
            err(SearchArgs { kind: "tests".into(), ..args("q", "", "", 0) }),
            "kind must be one of source, test, example, bench, docs, generated, vendored"
        );
        assert_eq!(args("q", "", "", 0).validate().unwrap().filter, SearchFilter::default());
    }

    #[test]
    fn messages_are_exact_and_ordered() {
        assert_eq!(err(args("  \t", "bad", "a\nb", 99)), "query must be non-empty");
        assert_eq!(err(args("q", "bad", "a\nb", 21)), "limit must be between 1 and 20");
        assert_eq!(err(args("q", "", "", -1)), "limit must be between 1 and 20");
        assert_eq!(err(args("q", "bad@", "a\nb", 0)), "source branch must be non-empty after @");
        assert_eq!(err(args("q", "a/b@  ", "", 0)), "source branch must be non-empty after @");
        assert_eq!(err(args("q", "bad", "a\nb", 0)), "source must use owner/repository or owner/repository@branch");
        for bad in ["a/b/c", "/b", "a/", " /b", "a/ @main", "@main", "ab@x"] {
            assert_eq!(
                err(args("q", bad, "", 0)),
                "source must use owner/repository or owner/repository@branch",
                "{bad}"
            );
        }
        assert_eq!(err(args("q", "a/b", "a\nb", 0)), "path must not contain line breaks");
        assert_eq!(err(args("q", "", "a\rb", 1)), "path must not contain line breaks");
    }

    #[test]
    fn trims_defaults_and_parses() {
        let r = args("  how  ", " acme / widgets @ feature/x@y ", " /docs/* \n", 0).validate().unwrap();
        assert_eq!(r.query, "how");
        assert_eq!(r.limit, 5);
        assert_eq!(r.filter.organization, "acme");
        assert_eq!(r.filter.repository, "widgets");
        assert_eq!(r.filter.branch, "feature/x@y");
        assert_eq!(r.filter.path.as_ref().unwrap().pattern(), "docs/*");
        assert_eq!(r.source, "acme / widgets @ feature/x@y");
        assert_eq!(args("q", "", "", 1).validate().unwrap().limit, 1);
        assert_eq!(args("q", "", "", 20).validate().unwrap().limit, 20);
        assert!(args("q", "", "/", 20).validate().unwrap().filter.path.is_none());
    }

    /// The reference removes exactly one leading `/` (Go's
    /// `strings.TrimPrefix`), so `//README.md` still starts with one.
    #[test]
    fn only_one_leading_slash_is_removed() {
        let pattern =
            |path: &str| args("q", "", path, 0).validate().unwrap().filter.path.map(|g| g.pattern().to_owned());
        assert_eq!(pattern("//README.md").as_deref(), Some("/README.md"));
        assert_eq!(pattern("/README.md").as_deref(), Some("README.md"));
        assert_eq!(pattern(" / README.md ").as_deref(), Some("README.md"));
        assert_eq!(pattern("//").as_deref(), Some("/"));
        assert_eq!(pattern("/\n"), None);
        assert_eq!(err(args("q", "", "//a\nb", 0)), "path must not contain line breaks");
    }

    /// Every argument has a cap, checked after the reference's
    /// checks, naming the argument and the cap, never quoting the input.
    #[test]
    fn caps_come_after_the_reference_checks() {
        let limits = ArgLimits { max_query_bytes: 8, max_source_bytes: 5, max_path_cost: 40 };
        let check = |a: SearchArgs| a.validate_within(&limits).map(|_| ()).map_err(|e| e.to_string());
        assert_eq!(check(args("123456789", "", "", 0)), Err("query is too long: at most 8 bytes".into()));
        assert_eq!(check(args(" 12345678 ", "", "", 0)), Ok(()), "the cap applies to the trimmed query");
        // The reference's own messages win.
        assert_eq!(check(args("123456789", "", "", 99)), Err("limit must be between 1 and 20".into()));
        assert_eq!(check(args("q", "abc/defg", "", 0)), Err("source is too long: at most 5 bytes".into()));
        assert_eq!(check(args("q", "abcdefg", "", 0)), Err(ValidationError::BadSource.to_string()));
        assert_eq!(check(args("q", "", "a?b?", 0)), Err("path is too complex: its pattern would exceed 40 units (one per literal byte, 30 per wildcard), past the regular-expression size limit of the store".into()));
        assert_eq!(check(args("q", "", "a?\nb?b?", 0)), Err("path must not contain line breaks".into()));
        assert_eq!(check(args("q", "", "a?", 0)), Ok(()));
        assert_eq!(check(args("q", "", &"*".repeat(10_000), 0)), Ok(()), "a run of stars is one wildcard");
        let huge = "x".repeat(MAX_ARGUMENT_BYTES + 1);
        let text = args(&huge, "", "", 0).validate().unwrap_err().to_string();
        assert_eq!(text, "query is too long: at most 4194304 bytes");
    }

    #[test]
    fn normalized_args_serialize_like_the_request_log() {
        let n = args(" q ", "", " p ", 0).normalized();
        assert_eq!(serde_json::to_string(&n).unwrap(), r#"{"query":"q","path":"p","limit":5}"#);
    }
}
