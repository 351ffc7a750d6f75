//! Errors of the search pipeline.
//!
//! Every message here reaches a client verbatim (after the fixed
//! `repository content search failed: ` prefix), so each one is pinned by a test.

use std::error::Error as StdError;
use std::fmt;

/// What a backend (store, embedder, reranker) reports. The message is already
/// in its final, client-facing form: the backend is responsible for naming the
/// operation and for keeping secrets out of it.
#[derive(Debug)]
pub struct BackendError {
    backend: String,
    source: Box<dyn StdError + Send + Sync>,
}

impl BackendError {
    /// Wraps any error of the backend called `backend`.
    pub fn new(backend: impl Into<String>, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self { backend: backend.into(), source: source.into() }
    }

    /// The `name()` of the backend that failed, for logs.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// The underlying error, for callers that inspect its type.
    pub fn inner(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self.source.as_ref()
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl StdError for BackendError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.source.as_ref())
    }
}

/// A search that was valid but could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A store, embedder or reranker failed.
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// One reranking document is larger than the configured cap; reranking a
    /// truncated chunk would silently change its score, so the search fails.
    #[error("reranking document {index} is {size} bytes, exceeding rerank-max-document-bytes of {max}")]
    RerankDocumentTooLarge { index: usize, size: usize, max: usize },
    /// The running total of reranking documents passed the request cap.
    #[error("reranking request is {size} bytes, exceeding rerank-max-request-bytes of {max}")]
    RerankRequestTooLarge { size: usize, max: usize },
    /// Federated search: every store asked failed; `(store, reason)` each.
    #[error("every store failed: {}", .0.iter().map(|(s, r)| format!("`{s}`: {r}")).collect::<Vec<_>>().join("; "))]
    AllStoresFailed(Vec<(String, String)>),
    /// A store's vectors and its embedder's do not have the same length.
    #[error(
        "store \"{store}\" holds {store_dimension}-dimensional vectors but its embedder \"{model}\" makes {embedder_dimension}-dimensional ones"
    )]
    DimensionMismatch { store: String, model: String, store_dimension: usize, embedder_dimension: usize },
}

impl SearchError {
    /// The text of the tool error a client sees.
    pub fn client_message(&self) -> String {
        format!("repository content search failed: {self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rerank_limit_messages_are_exact() {
        let doc = SearchError::RerankDocumentTooLarge { index: 3, size: 900, max: 512 };
        assert_eq!(
            doc.client_message(),
            "repository content search failed: reranking document 3 is 900 bytes, exceeding rerank-max-document-bytes of 512"
        );
        let req = SearchError::RerankRequestTooLarge { size: 2048, max: 2000 };
        assert_eq!(req.to_string(), "reranking request is 2048 bytes, exceeding rerank-max-request-bytes of 2000");
    }

    #[test]
    fn backend_error_displays_its_source_only() {
        let err = SearchError::from(BackendError::new("chroma", "Chroma query failed with HTTP 500: boom"));
        assert_eq!(err.to_string(), "Chroma query failed with HTTP 500: boom");
        if let SearchError::Backend(b) = &err {
            assert_eq!(b.backend(), "chroma");
        } else {
            panic!("expected a backend error");
        }
    }
}
