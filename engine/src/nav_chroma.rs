//! The navigation tools over a Chroma collection filled by the reference
//! indexer (`repo-retriever serve --chroma-url … --tools all`): a
//! [`NavSource`] and, with an embedding endpoint, a [`RepositoryIndexer`].
//!
//! Such a collection holds chunks only, so every file is rebuilt from its
//! chunks ([`rr_nav::reassemble`]); lines no chunk covers are reported by
//! `get_file` rather than guessed. Repositories are the collection's
//! namespaces, definitions come from the chunk metadata exactly as over the
//! embedded store, and the catalogue lives in memory. `add_repository`
//! indexes into the same collection with our indexer (records identical to
//! the reference's), embedding through the configured endpoint.
//!
//! The whole collection is read with Chroma's paged `get`, and kept as a
//! snapshot keyed by a fingerprint of its record ids. A record id names the
//! namespace, the document, the file hash and the chunk index, so the ids
//! change whenever content does; every tool call lists the ids (cheap:
//! `include: []`) and reads the documents again only when they changed.
//!
//! The service's calls are blocking (they run on the blocking pool) while
//! the Chroma client is async, so the source drives its requests on a
//! one-thread runtime of its own and waits for them on a channel: that
//! works from any thread, including the blocking pool of a current-thread
//! runtime (tests), where `Handle::block_on` could not drive the I/O.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rr_chroma::ChromaStore;
use rr_core::{Chunk, Metadata};
use rr_nav::reassemble::reassemble;
use rr_nav::source::{NamespaceInfo, NavSource, RepositoryIndexer, languages};
use rr_nav::{FileText, NavError, entities, extension_language};

use crate::local::ChromaTarget;

/// The navigation service over `source`, with the catalogue in memory
/// (repository ids hold while the server runs).
pub async fn open(source: ChromaSource, config: rr_nav::NavConfig) -> Result<Arc<rr_nav::NavService>, NavError> {
    rr_nav::NavService::open_in_memory(Arc::new(source), config).await
}

/// Why the collection could not be read, as a navigation tool reports it.
#[derive(Debug, thiserror::Error)]
pub enum ChromaSourceError {
    /// A request failed (its client-safe summary: no URL, no body).
    #[error("cannot read the Chroma collection: {}", .0.summary())]
    Read(rr_chroma::ChromaError),
    /// The reader's runtime could not be started.
    #[error("cannot start the Chroma reader: {0}")]
    Start(#[source] std::io::Error),
    /// The reader's runtime is gone (the process is ending).
    #[error("the Chroma reader has stopped")]
    Stopped,
}

impl From<ChromaSourceError> for NavError {
    fn from(e: ChromaSourceError) -> Self {
        NavError::from_source(e)
    }
}

/// The chunks of one namespace and their fingerprint.
struct NamespaceChunks {
    info: NamespaceInfo,
    fingerprint: String,
    chunks: Vec<Chunk>,
}

/// The collection as last read.
#[derive(Default)]
struct Snapshot {
    /// Of every record id; `None` before the first read.
    fingerprint: Option<String>,
    namespaces: BTreeMap<String, NamespaceChunks>,
}

/// A Chroma collection as a [`NavSource`].
pub struct ChromaSource {
    store: Arc<ChromaStore>,
    /// Where `add_repository` writes: the same collection, embedded through
    /// the configured endpoint.
    target: Option<ChromaTarget>,
    runtime: Option<tokio::runtime::Runtime>,
    snapshot: Mutex<Arc<Snapshot>>,
}

impl std::fmt::Debug for ChromaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChromaSource").field("store", &self.store).finish_non_exhaustive()
    }
}

impl Drop for ChromaSource {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside async code
        // (where a service may well be dropped): let it wind down alone.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The fingerprint of a set of record ids (in any order).
fn fingerprint<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let mut ids: Vec<&str> = ids.collect();
    ids.sort_unstable();
    rr_indexer::sha256_hex(&ids.join("\n"))
}

impl ChromaSource {
    /// A source reading `store`; nothing is requested until the first call.
    /// `add_repository` indexes into `target` (the same collection), and is
    /// refused without one.
    pub fn new(store: ChromaStore, target: Option<ChromaTarget>) -> Result<Self, ChromaSourceError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rr-nav-chroma")
            .enable_all()
            .build()
            .map_err(ChromaSourceError::Start)?;
        Ok(ChromaSource {
            store: Arc::new(store),
            target,
            runtime: Some(runtime),
            snapshot: Mutex::new(Arc::new(Snapshot::default())),
        })
    }

    /// Runs `future` on the source's runtime and waits for it.
    fn run<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> Result<T, ChromaSourceError> {
        let runtime = self.runtime.as_ref().ok_or(ChromaSourceError::Stopped)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().map_err(|_| ChromaSourceError::Stopped)
    }

    fn current(&self) -> Arc<Snapshot> {
        self.snapshot.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Lists the ids and, when they changed, reads every record again.
    fn sync(&self) -> Result<Arc<Snapshot>, ChromaSourceError> {
        let failed = |e: rr_chroma::ChromaError| {
            tracing::debug!(error = %e, "reading the Chroma collection failed");
            ChromaSourceError::Read(e)
        };
        let store = self.store.clone();
        let ids = self.run(async move { store.all_ids().await })?.map_err(failed)?.unwrap_or_default();
        let wanted = fingerprint(ids.iter().map(String::as_str));
        let current = self.current();
        if current.fingerprint.as_deref() == Some(wanted.as_str()) {
            return Ok(current);
        }
        let store = self.store.clone();
        let records = self.run(async move { store.all_records().await })?.map_err(failed)?.unwrap_or_default();
        let snapshot = Arc::new(Self::group(records));
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = snapshot.clone();
        Ok(snapshot)
    }

    fn group(records: Vec<Chunk>) -> Snapshot {
        let fp = fingerprint(records.iter().map(|c| c.id.as_str()));
        let mut by_namespace: BTreeMap<String, Vec<Chunk>> = BTreeMap::new();
        for chunk in records {
            by_namespace.entry(chunk.metadata.namespace_id.clone()).or_default().push(chunk);
        }
        let namespaces = by_namespace
            .into_iter()
            .map(|(namespace_id, chunks)| {
                let m = &chunks[0].metadata;
                let info = NamespaceInfo {
                    namespace_id: namespace_id.clone(),
                    organization: m.organization.clone(),
                    repository: m.repository.clone(),
                    branch: m.branch.clone(),
                };
                let fingerprint = fingerprint(chunks.iter().map(|c| c.id.as_str()));
                (namespace_id, NamespaceChunks { info, fingerprint, chunks })
            })
            .collect();
        Snapshot { fingerprint: Some(fp), namespaces }
    }

    fn with_namespace<T>(&self, namespace_id: &str, f: impl FnOnce(Option<&NamespaceChunks>) -> T) -> T {
        let snapshot = self.current();
        f(snapshot.namespaces.get(namespace_id))
    }
}

impl NavSource for ChromaSource {
    fn name(&self) -> &str {
        rr_chroma::STORE_NAME
    }

    fn namespaces(&self) -> Result<Vec<NamespaceInfo>, NavError> {
        Ok(self.sync()?.namespaces.values().map(|n| n.info.clone()).collect())
    }

    fn fingerprint(&self, namespace_id: &str) -> Result<String, NavError> {
        Ok(self.with_namespace(namespace_id, |n| n.map(|n| n.fingerprint.clone()).unwrap_or_default()))
    }

    fn metadata(&self, namespace_id: &str) -> Result<Vec<Metadata>, NavError> {
        Ok(self.with_namespace(namespace_id, |n| {
            n.map(|n| n.chunks.iter().map(|c| c.metadata.clone()).collect()).unwrap_or_default()
        }))
    }

    fn files(&self, namespace_id: &str, metadata: &[Metadata]) -> Result<Vec<FileText>, NavError> {
        let language = languages(metadata);
        Ok(self.with_namespace(namespace_id, |n| {
            let mut by_path: BTreeMap<&str, Vec<Chunk>> = BTreeMap::new();
            for chunk in n.map(|n| n.chunks.as_slice()).unwrap_or_default() {
                by_path.entry(chunk.metadata.path.as_str()).or_default().push(chunk.clone());
            }
            by_path
                .into_iter()
                .map(|(path, chunks)| {
                    let file = reassemble(path, &chunks);
                    FileText {
                        line_count: entities::lines(&file.content).len(),
                        language: language.get(path).cloned().unwrap_or_else(|| extension_language(path)),
                        path: file.path,
                        content: file.content,
                        missing_lines: file.missing_lines,
                    }
                })
                .collect()
        }))
    }

    fn file_count(&self, namespace_id: &str) -> Result<usize, NavError> {
        Ok(self.with_namespace(namespace_id, |n| {
            n.map(|n| {
                n.chunks.iter().map(|c| c.metadata.path.as_str()).collect::<std::collections::BTreeSet<_>>().len()
            })
            .unwrap_or(0)
        }))
    }

    fn indexer(&self) -> Option<Arc<dyn RepositoryIndexer>> {
        self.target.clone().map(|target| Arc::new(ChromaIndexer(target)) as Arc<dyn RepositoryIndexer>)
    }

    fn changes_underneath(&self) -> bool {
        true
    }
}

/// `add_repository` into the collection: our indexer writes the reference's
/// records, embedded through the configured endpoint.
struct ChromaIndexer(ChromaTarget);

#[async_trait::async_trait]
impl RepositoryIndexer for ChromaIndexer {
    fn records_source_host(&self) -> bool {
        false
    }

    async fn index(
        &self,
        root: std::path::PathBuf,
        identity: rr_indexer::Identity,
        progress: rr_indexer::sync::ProgressFn,
    ) -> Result<String, String> {
        // The request's store folder is unused with a Chroma target.
        let store = std::path::PathBuf::new();
        let request = crate::nav_embedded::repository_request(root, store, Some(self.0.clone()), identity, progress);
        Ok(crate::local::index(request).await.map_err(|e| e.to_string())?.namespace_id)
    }
}
