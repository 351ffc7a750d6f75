//! Arguments of the `search` tool and their validation.
//!
//! Checks run in a fixed order and the first failure wins; every message is
//! part of the client contract.

use serde::{Deserialize, Serialize};

use crate::filter::{PathGlob, SearchFilter};

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
        }
    }

    /// Validates in the contract's order.
    pub fn validate(&self) -> Result<SearchRequest, ValidationError> {
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
        Ok(SearchRequest {
            query: n.query,
            limit: n.limit as usize,
            filter: SearchFilter { organization, repository, branch, path },
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(query: &str, source: &str, path: &str, limit: i64) -> SearchArgs {
        SearchArgs { query: query.into(), source: source.into(), path: path.into(), limit }
    }

    fn err(a: SearchArgs) -> String {
        a.validate().unwrap_err().to_string()
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

    /// Issue 10: the reference removes exactly one leading `/` (Go's
    /// `strings.TrimPrefix`), so `//README.md` still starts with one.
    #[test]
    fn issue10_only_one_leading_slash_is_removed() {
        let pattern =
            |path: &str| args("q", "", path, 0).validate().unwrap().filter.path.map(|g| g.pattern().to_owned());
        assert_eq!(pattern("//README.md").as_deref(), Some("/README.md"));
        assert_eq!(pattern("/README.md").as_deref(), Some("README.md"));
        assert_eq!(pattern(" / README.md ").as_deref(), Some("README.md"));
        assert_eq!(pattern("//").as_deref(), Some("/"));
        assert_eq!(pattern("/\n"), None);
        assert_eq!(err(args("q", "", "//a\nb", 0)), "path must not contain line breaks");
    }

    #[test]
    fn normalized_args_serialize_like_the_request_log() {
        let n = args(" q ", "", " p ", 0).normalized();
        assert_eq!(serde_json::to_string(&n).unwrap(), r#"{"query":"q","path":"p","limit":5}"#);
    }
}
