//! The navigation tools over the embedded store: a [`NavSource`] reading
//! whole files from its `files` table, the [`RepositoryIndexer`] that
//! `add_repository` writes with, and the service opened over a store folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rr_core::Metadata;
use rr_embedded::EmbeddedStore;
use rr_nav::source::{NamespaceInfo, NavSource, RepositoryIndexer, languages};
use rr_nav::{FileText, NavConfig, NavError, NavService, entities, extension_language};

use crate::local::{ChromaTarget, IndexRequest};

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
        let namespaces = self.store.namespaces().map_err(NavError::from_source)?;
        Ok(namespaces
            .into_iter()
            .map(|n| NamespaceInfo {
                namespace_id: n.namespace_id,
                organization: n.organization,
                repository: n.repository,
                branch: n.branch,
            })
            .collect())
    }

    fn fingerprint(&self, namespace_id: &str) -> Result<String, NavError> {
        let entries = self.store.list_files(namespace_id).map_err(NavError::from_source)?;
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
        self.store.namespace_metadata(namespace_id).map_err(NavError::from_source)
    }

    fn files(&self, namespace_id: &str, metadata: &[Metadata]) -> Result<Vec<FileText>, NavError> {
        let language = languages(metadata);
        let mut out = Vec::new();
        for entry in self.store.list_files(namespace_id).map_err(NavError::from_source)? {
            let Some(file) = self.store.get_file(namespace_id, &entry.path).map_err(NavError::from_source)? else {
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
        Ok(self.store.list_files(namespace_id).map_err(NavError::from_source)?.len())
    }

    fn indexer(&self) -> Option<Arc<dyn RepositoryIndexer>> {
        Some(Arc::new(EmbeddedIndexer(self.dir.clone())))
    }

    fn changes_underneath(&self) -> bool {
        false
    }
}

impl EmbeddedSource {
    /// The store read, for a caller that checks what it shares.
    pub fn store(&self) -> &Arc<EmbeddedStore> {
        &self.store
    }
}

/// The navigation service over the embedded store already opened from
/// `dir` (the search engine's, when a server has both), with its catalogue
/// beside the store.
pub fn open(dir: &Path, store: Arc<EmbeddedStore>, config: NavConfig) -> Result<Arc<NavService>, NavError> {
    NavService::open(Arc::new(EmbeddedSource::new(dir, store)), dir, config)
}

/// Opens the embedded store in `dir` (the search engine's, when it serves
/// the same folder: see [`rr_embedded::registry::shared`]) and the
/// navigation service over it.
pub fn open_dir(dir: &Path, config: NavConfig) -> Result<Arc<NavService>, NavError> {
    let store = rr_embedded::registry::shared(dir)
        .map_err(|source| NavError::from_source(OpenStoreError { path: dir.to_owned(), source }))?;
    open(dir, store, config)
}

/// The store folder could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the store at {}: {source}", path.display())]
pub struct OpenStoreError {
    pub path: PathBuf,
    pub source: rr_embedded::EmbeddedError,
}

/// `add_repository` into the embedded store at this folder, with the
/// store's own embedder.
struct EmbeddedIndexer(PathBuf);

#[async_trait::async_trait]
impl RepositoryIndexer for EmbeddedIndexer {
    fn records_source_host(&self) -> bool {
        true
    }

    async fn index(
        &self,
        root: PathBuf,
        identity: rr_indexer::Identity,
        progress: rr_indexer::sync::ProgressFn,
    ) -> Result<String, String> {
        let request = repository_request(root, self.0.clone(), None, identity, progress);
        Ok(crate::local::index(request).await.map_err(|e| e.to_string())?.namespace_id)
    }
}

/// The index request of a repository `add_repository` cloned to `root`:
/// default options, batches of 100, into the store at `store` or, when set,
/// the Chroma collection `chroma`.
pub(crate) fn repository_request(
    root: PathBuf,
    store: PathBuf,
    chroma: Option<ChromaTarget>,
    identity: rr_indexer::Identity,
    progress: rr_indexer::sync::ProgressFn,
) -> IndexRequest {
    IndexRequest {
        root,
        store,
        identity,
        options: rr_indexer::IndexOptions::default(),
        batch_size: 100,
        dry_run: false,
        output_manifest: None,
        chroma,
        lexical_index: false,
        chunking: None,
        progress: Some(progress),
    }
}
