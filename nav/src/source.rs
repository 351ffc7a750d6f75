//! Where the navigation tools read repositories from, and where
//! `add_repository` writes them: two traits this crate defines and the
//! engine implements over its stores.
//!
//! The engine has two sources: the embedded store, which keeps every
//! indexed file whole, and a Chroma collection filled by the reference
//! indexer, which keeps only chunks, so files are rebuilt from them
//! ([`reassemble`](crate::reassemble)). Both give the same namespaces, chunk
//! metadata and file texts; everything above these traits (the catalogue,
//! definitions, the tools) is shared.

use std::path::PathBuf;
use std::sync::Arc;

use rr_core::Metadata;

use super::{FileText, entities};
use crate::error::NavError;

/// One namespace of a source: a repository at a branch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceInfo {
    pub namespace_id: String,
    pub organization: String,
    pub repository: String,
    pub branch: String,
}

/// What the navigation service reads. Calls block (SQLite, or HTTP driven
/// on a runtime of the source's own), so the service makes them on the
/// blocking pool.
///
/// Implementations honour: `namespaces` lists every namespace with at
/// least one chunk; `fingerprint` changes whenever a namespace's files or
/// chunks change; `files` returns the namespace's files sorted by path
/// (byte order), with their language labels taken from `metadata`.
pub trait NavSource: Send + Sync {
    /// Named in logs and errors.
    fn name(&self) -> &str;

    /// Every namespace of the source. A source that can change under the
    /// service (see [`NavSource::changes_underneath`]) takes its snapshot here.
    fn namespaces(&self) -> Result<Vec<NamespaceInfo>, NavError>;

    /// A text that differs whenever the namespace's files differ.
    fn fingerprint(&self, namespace_id: &str) -> Result<String, NavError>;

    /// The metadata of every chunk of the namespace.
    fn metadata(&self, namespace_id: &str) -> Result<Vec<Metadata>, NavError>;

    /// The namespace's files, sorted by path.
    fn files(&self, namespace_id: &str, metadata: &[Metadata]) -> Result<Vec<FileText>, NavError>;

    /// How many files the namespace has (for a repository still indexing).
    fn file_count(&self, namespace_id: &str) -> Result<usize, NavError>;

    /// What `add_repository` indexes a repository with; `None` refuses it.
    fn indexer(&self) -> Option<Arc<dyn RepositoryIndexer>>;

    /// Whether other programs write the source while the service runs, so
    /// every tool call checks the fingerprint first (the embedded store is
    /// refreshed by `list_repositories` and by `add_repository` instead).
    fn changes_underneath(&self) -> bool;
}

/// Indexes a repository `add_repository` has cloned into the source.
#[async_trait::async_trait]
pub trait RepositoryIndexer: Send + Sync {
    /// Whether the records name a host other than GitHub as `source_host`
    /// beside the owner path, as `index` of a checkout writes them (the
    /// embedded store); `false` keeps the host in the organization, for
    /// stores whose records hold the reference's fields only (Chroma).
    fn records_source_host(&self) -> bool;

    /// Indexes the checkout at `root` as `identity`, reporting progress;
    /// returns the namespace id written.
    async fn index(
        &self,
        root: PathBuf,
        identity: rr_indexer::Identity,
        progress: rr_indexer::sync::ProgressFn,
    ) -> Result<String, String>;
}

/// Language labels by path, from the chunks (the first chunk of a file).
pub fn languages(metadata: &[Metadata]) -> std::collections::HashMap<&str, String> {
    let mut language = std::collections::HashMap::new();
    for m in metadata {
        language.entry(m.path.as_str()).or_insert_with(|| entities::label(m));
    }
    language
}
