//! Where the navigation tools read repositories from.
//!
//! Two sources: the embedded store, which keeps every indexed file whole in
//! its `files` table, and a Chroma collection filled by the reference
//! indexer (`chroma.rs`), which keeps only chunks, so files are rebuilt
//! from them (`reassemble.rs`). Both give the same namespaces, chunk
//! metadata and file texts; everything above this trait (the catalogue,
//! definitions, the tools) is shared.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rr_core::Metadata;
use rr_embedded::{EmbeddedStore, NamespaceInfo};

use super::{FileText, entities, extension_language};
use crate::error::NavError;
use rr_engine::local::ChromaTarget;

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

    /// The embedded store's folder; `None` for a Chroma collection.
    fn store_dir(&self) -> Option<&Path>;

    /// Where `add_repository` indexes a repository.
    fn index_target(&self) -> IndexTarget;

    /// Whether other programs write the source while the service runs, so
    /// every tool call checks the fingerprint first (the embedded store is
    /// refreshed by `list_repositories` and by `add_repository` instead).
    fn changes_underneath(&self) -> bool;

    /// The embedded store read, when the source is one; `None` for a Chroma
    /// collection.
    fn embedded(&self) -> Option<&Arc<EmbeddedStore>> {
        None
    }
}

/// Where `add_repository` writes the records of a new repository.
#[derive(Clone)]
pub enum IndexTarget {
    /// The embedded store in this folder, with its own embedder.
    Embedded(PathBuf),
    /// A Chroma collection, embedded through an OpenAI-compatible endpoint.
    Chroma(ChromaTarget),
    /// Nowhere: `add_repository` is refused.
    Unavailable,
}

/// Language labels by path, from the chunks (the first chunk of a file).
pub(crate) fn languages(metadata: &[Metadata]) -> std::collections::HashMap<&str, String> {
    let mut language = std::collections::HashMap::new();
    for m in metadata {
        language.entry(m.path.as_str()).or_insert_with(|| entities::label(m));
    }
    language
}

/// The embedded store: whole files from its `files` table.
///
/// It takes the store already opened, so that a server that also searches
/// the store shares one handle: each open builds its own in-memory vector
/// index and lexical cache, and two opens would hold them twice.
pub struct EmbeddedSource {
    dir: PathBuf,
    store: Arc<EmbeddedStore>,
}

impl EmbeddedSource {
    pub fn new(dir: &Path, store: Arc<EmbeddedStore>) -> Self {
        EmbeddedSource { dir: dir.to_path_buf(), store }
    }
}

impl NavSource for EmbeddedSource {
    fn name(&self) -> &str {
        "embedded"
    }

    fn namespaces(&self) -> Result<Vec<NamespaceInfo>, NavError> {
        Ok(self.store.namespaces()?)
    }

    fn fingerprint(&self, namespace_id: &str) -> Result<String, NavError> {
        let entries = self.store.list_files(namespace_id)?;
        let mut fp = String::new();
        for e in &entries {
            fp.push_str(&e.path);
            fp.push('\0');
            fp.push_str(&e.file_hash);
            fp.push('\n');
        }
        Ok(rr_indexer::sha256_hex(&fp))
    }

    fn metadata(&self, namespace_id: &str) -> Result<Vec<Metadata>, NavError> {
        Ok(self.store.namespace_metadata(namespace_id)?)
    }

    fn files(&self, namespace_id: &str, metadata: &[Metadata]) -> Result<Vec<FileText>, NavError> {
        let language = languages(metadata);
        let mut out = Vec::new();
        for entry in self.store.list_files(namespace_id)? {
            let Some(file) = self.store.get_file(namespace_id, &entry.path)? else {
                continue;
            };
            let lang = language.get(entry.path.as_str()).cloned().unwrap_or_else(|| extension_language(&entry.path));
            out.push(FileText {
                line_count: entities::lines(&file.content).len(),
                path: entry.path,
                language: lang,
                content: file.content,
                missing_lines: Vec::new(),
            });
        }
        Ok(out)
    }

    fn file_count(&self, namespace_id: &str) -> Result<usize, NavError> {
        Ok(self.store.list_files(namespace_id)?.len())
    }

    fn store_dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    fn index_target(&self) -> IndexTarget {
        IndexTarget::Embedded(self.dir.clone())
    }

    fn changes_underneath(&self) -> bool {
        false
    }

    fn embedded(&self) -> Option<&Arc<EmbeddedStore>> {
        Some(&self.store)
    }
}
