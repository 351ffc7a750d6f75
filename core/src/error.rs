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
    summary: Option<String>,
}

impl BackendError {
    /// Wraps any error of the backend called `backend`.
    pub fn new(backend: impl Into<String>, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self { backend: backend.into(), source: source.into(), summary: None }
    }

    /// Sets what a client outside the drop-in is shown instead of the full
    /// text: the operation and what failed, without URLs or the backend's
    /// reply (which a backend's full text may quote).
    pub fn with_summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    /// The client-safe text: the summary when the backend gave one, else
    /// the full text.
    pub fn summary(&self) -> String {
        self.summary.clone().unwrap_or_else(|| self.source.to_string())
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
    /// The text of the tool error a client of the drop-in sees: the
    /// reference's wording, which quotes a failed request's URL and the
    /// backend's reply (redacted and cut).
    pub fn client_message(&self) -> String {
        format!("repository content search failed: {self}")
    }

    /// The error's text without URLs or backend replies: a backend failure
    /// reads as its summary and names the backend.
    pub fn summary(&self) -> String {
        match self {
            SearchError::Backend(b) => format!("{} (backend `{}`)", b.summary(), b.backend()),
            other => other.to_string(),
        }
    }

    /// The tool error outside the drop-in: [`SearchError::summary`] after
    /// the fixed prefix; the full text goes to the debug log only.
    pub fn summary_message(&self) -> String {
        format!("repository content search failed: {}", self.summary())
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
    fn summaries_name_the_backend_and_leave_the_detail_out() {
        let err = SearchError::from(
            BackendError::new("chroma", "Chroma query failed with HTTP 500: body")
                .with_summary("Chroma query failed with HTTP 500"),
        );
        assert_eq!(err.client_message(), "repository content search failed: Chroma query failed with HTTP 500: body");
        assert_eq!(
            err.summary_message(),
            "repository content search failed: Chroma query failed with HTTP 500 (backend `chroma`)"
        );
        let plain = SearchError::from(BackendError::new("hash", "hash embedding failed: x"));
        assert_eq!(plain.summary(), "hash embedding failed: x (backend `hash`)");
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
