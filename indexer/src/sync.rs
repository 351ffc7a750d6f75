//! Safe synchronisation of built records into an [`IndexStore`].
//!
//! [`sync`] makes one namespace of a store hold exactly the records of a
//! build, with the guarantees of the reference indexer (`chromadb-repo-indexer`
//! 1.2.0, `sync.py`):
//!
//! 1. **Local work first.** The records are already built when [`sync`] is
//!    called; it checks them (one namespace, no duplicate id) before it talks
//!    to the store at all.
//! 2. **Diff by id.** A record id embeds the namespace, the path, the SHA-256
//!    of the whole file and the chunk index, so a file whose text changed gets
//!    entirely new ids, and an id that is already stored names the very same
//!    chunk text. Records whose id the namespace lacks are embedded (document
//!    prefix `passage: ` by default) and upserted; ids the namespace holds
//!    that the build does not are stale. A second run over unchanged files
//!    therefore writes nothing and embeds nothing, and editing one file
//!    rewrites only that file's records.
//! 3. **Upserts, then deletions.** Upserts go out in id order, in batches of
//!    at most `min(batch_size, store.max_batch_size())`, each batch embedded
//!    just before it is written. Stale ids are deleted only once every upsert
//!    has succeeded: a failed embedding or upsert returns an error and
//!    deletes nothing, so the namespace never loses a record that the build
//!    still wants, and the next run converges (ids already written count as
//!    unchanged).
//! 4. **Verification.** After the writes the namespace's ids are listed again
//!    and their count must equal the number of records built.
//!
//! Only [`IndexStore::namespace_ids`] of the one namespace is read and only
//! ids of that namespace are deleted, so other namespaces sharing the store
//! are never touched. A dry run lists the namespace and computes the summary,
//! and neither embeds nor writes.
//!
//! One difference from the reference: it also rewrites a stored record whose
//! `schema_version` or `chunking_version` metadata differs from its own (a
//! record written by an older release under the same id). [`IndexStore`]
//! lists ids only, so such a record counts as unchanged here. Records written
//! by the reference 1.2.0 or by this crate carry the current versions, and
//! a file edit replaces its records either way.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use rr_core::{BackendError, CallContext, Chunk, EmbeddedChunk, Embedder, IndexStore};
use serde::Serialize;

use crate::{Build, BuildStats, Identity};

/// Records per upsert or delete when the caller does not say (the reference's default).
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// What is prepended to a document before it is embedded, by default.
pub const DEFAULT_DOCUMENT_PREFIX: &str = "passage: ";

/// Which write phase a [`SyncProgress`] report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPhase {
    /// Embedding and upserting records that are new or changed.
    Upsert,
    /// Deleting stale records.
    Delete,
}

/// Where a sync stands: `done` of `total` records of `phase` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncProgress {
    pub phase: SyncPhase,
    pub done: usize,
    pub total: usize,
}

/// Called once before the first batch of each phase and after every batch.
pub type ProgressFn = Arc<dyn Fn(SyncProgress) + Send + Sync>;

/// How to synchronise.
#[derive(Clone)]
pub struct SyncOptions {
    /// Records per upsert or delete request; the store's
    /// [`IndexStore::max_batch_size`] caps it. Must be at least 1.
    pub batch_size: usize,
    /// Prepended to every document before it is embedded (not stored).
    pub document_prefix: String,
    /// List the namespace and compute the summary; embed and write nothing.
    pub dry_run: bool,
    /// The instant `duration_ms` is measured from, e.g. before the build;
    /// `None` means when [`sync`] starts.
    pub started: Option<Instant>,
    /// Receives progress reports (for a progress bar), if set.
    pub progress: Option<ProgressFn>,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            batch_size: DEFAULT_BATCH_SIZE,
            document_prefix: DEFAULT_DOCUMENT_PREFIX.to_owned(),
            dry_run: false,
            started: None,
            progress: None,
        }
    }
}

impl fmt::Debug for SyncOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncOptions")
            .field("batch_size", &self.batch_size)
            .field("document_prefix", &self.document_prefix)
            .field("dry_run", &self.dry_run)
            .field("started", &self.started)
            .field("progress", &self.progress.as_ref().map(|_| "<callback>"))
            .finish()
    }
}

impl SyncOptions {
    fn report(&self, phase: SyncPhase, done: usize, total: usize) {
        if let Some(progress) = &self.progress {
            progress(SyncProgress { phase, done, total });
        }
    }
}

/// The run summary, with the reference's key names.
///
/// Serialises as one JSON object whose keys are in the reference's printed
/// order (it prints `json.dumps(summary, sort_keys=True)`), which is why the
/// fields are declared alphabetically. [`sync`] fills the namespace, the
/// chunk counts, `dry_run` and `duration_ms`; [`SyncSummary::with_identity`]
/// and [`SyncSummary::with_build_stats`] (or [`sync_build`]) fill the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncSummary {
    pub branch: String,
    /// Records embedded and upserted (new ids).
    pub chunks_added_or_updated: usize,
    /// Stale ids deleted (or that would be, in a dry run).
    pub chunks_deleted: usize,
    /// Records built.
    pub chunks_desired: usize,
    /// Records whose id was already stored.
    pub chunks_unchanged: usize,
    pub dry_run: bool,
    pub duration_ms: u64,
    pub files_binary_skipped: usize,
    pub files_eligible: usize,
    /// Files left out by ignore rules (0 with `--no-ignore`); a key the
    /// reference's summary does not have.
    pub files_ignored: usize,
    pub files_indexed: usize,
    pub files_other_skipped: usize,
    pub files_scanned: usize,
    pub namespace_id: String,
    pub organization: String,
    pub repository: String,
}

impl SyncSummary {
    /// Sets organization, repository and branch.
    pub fn with_identity(mut self, identity: &Identity) -> Self {
        self.organization = identity.organization.clone();
        self.repository = identity.repository.clone();
        self.branch = identity.branch.clone();
        self
    }

    /// Sets the file counts of the build.
    pub fn with_build_stats(mut self, stats: &BuildStats) -> Self {
        self.files_scanned = stats.files_scanned;
        self.files_eligible = stats.files_eligible;
        self.files_indexed = stats.files_indexed;
        self.files_binary_skipped = stats.files_binary_skipped;
        self.files_other_skipped = stats.files_other_skipped;
        self.files_ignored = stats.files_ignored;
        self
    }

    /// The summary as one line of JSON, keys sorted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the summary holds only strings, integers and booleans")
    }
}

/// Why a sync stopped. Whatever the variant, no stale record was deleted
/// unless every upsert had succeeded first.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{0}")]
    InvalidOptions(String),
    /// A record does not belong to the namespace being synchronised.
    #[error("record {id} belongs to namespace {found}, not {expected}")]
    ForeignRecord { id: String, found: String, expected: String },
    #[error("desired state contains duplicate deterministic record ID {0}")]
    DuplicateId(String),
    /// Listing the namespace's ids failed (nothing was written by this step).
    #[error("{0}")]
    List(#[source] BackendError),
    /// Embedding a batch failed; nothing was deleted.
    #[error("{0}")]
    Embed(#[source] BackendError),
    /// Upserting a batch failed; nothing was deleted.
    #[error("{0}")]
    Upsert(#[source] BackendError),
    /// Deleting a batch of stale ids failed; every upsert had succeeded.
    #[error("{0}")]
    Delete(#[source] BackendError),
    /// After the writes the namespace does not hold as many records as built.
    #[error("verification failed: expected {expected} namespace records, found {found}")]
    Verification { expected: usize, found: usize },
}

impl SyncError {
    /// The backend error behind a store or embedder failure.
    pub fn backend(&self) -> Option<&BackendError> {
        match self {
            SyncError::List(e) | SyncError::Embed(e) | SyncError::Upsert(e) | SyncError::Delete(e) => Some(e),
            _ => None,
        }
    }
}

/// Makes namespace `namespace_id` of `store` hold exactly `records` (see the
/// module docs for the order of operations and what a failure leaves).
pub async fn sync(
    store: &dyn IndexStore,
    embedder: &dyn Embedder,
    mut records: Vec<Chunk>,
    namespace_id: &str,
    opts: &SyncOptions,
) -> Result<SyncSummary, SyncError> {
    let started = opts.started.unwrap_or_else(Instant::now);
    if opts.batch_size == 0 {
        return Err(SyncError::InvalidOptions("batch_size must be a positive integer".into()));
    }
    if namespace_id.is_empty() {
        return Err(SyncError::InvalidOptions("namespace_id must not be empty".into()));
    }
    if let Some(foreign) = records.iter().find(|r| r.metadata.namespace_id != namespace_id) {
        return Err(SyncError::ForeignRecord {
            id: foreign.id.clone(),
            found: foreign.metadata.namespace_id.clone(),
            expected: namespace_id.to_owned(),
        });
    }
    // Upserts go out in id order, as the reference sends them.
    records.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(pair) = records.windows(2).find(|pair| pair[0].id == pair[1].id) {
        return Err(SyncError::DuplicateId(pair[0].id.clone()));
    }

    tracing::info!(namespace_id, desired = records.len(), store = store.name(), "sync: listing the namespace");
    let existing: HashSet<String> =
        store.namespace_ids(namespace_id).await.map_err(SyncError::List)?.into_iter().collect();
    let desired: HashSet<&str> = records.iter().map(|r| r.id.as_str()).collect();
    let mut stale: Vec<String> = existing.iter().filter(|id| !desired.contains(id.as_str())).cloned().collect();
    stale.sort();
    let desired_count = records.len();
    let to_write: Vec<Chunk> = records.into_iter().filter(|r| !existing.contains(&r.id)).collect();

    let mut summary = SyncSummary {
        namespace_id: namespace_id.to_owned(),
        chunks_desired: desired_count,
        chunks_added_or_updated: to_write.len(),
        chunks_unchanged: desired_count - to_write.len(),
        chunks_deleted: stale.len(),
        dry_run: opts.dry_run,
        ..SyncSummary::default()
    };
    tracing::info!(
        add_or_update = summary.chunks_added_or_updated,
        unchanged = summary.chunks_unchanged,
        delete = summary.chunks_deleted,
        dry_run = opts.dry_run,
        "sync: diff"
    );

    if !opts.dry_run {
        let batch_size = opts.batch_size.min(store.max_batch_size()).max(1);
        write(store, embedder, to_write, &stale, batch_size, opts).await?;
        let found = store.namespace_ids(namespace_id).await.map_err(SyncError::List)?;
        let found = found.into_iter().collect::<HashSet<_>>().len();
        if found != desired_count {
            return Err(SyncError::Verification { expected: desired_count, found });
        }
    }
    summary.duration_ms = (started.elapsed().as_secs_f64() * 1000.0).round() as u64;
    tracing::info!(namespace_id, duration_ms = summary.duration_ms, "sync: complete");
    Ok(summary)
}

/// Embeds and upserts `to_write`, then (only if all of that succeeded)
/// deletes `stale`, in batches of `batch_size`.
async fn write(
    store: &dyn IndexStore,
    embedder: &dyn Embedder,
    to_write: Vec<Chunk>,
    stale: &[String],
    batch_size: usize,
    opts: &SyncOptions,
) -> Result<(), SyncError> {
    let ctx = CallContext::default();
    let total = to_write.len();
    let mut done = 0;
    opts.report(SyncPhase::Upsert, done, total);
    let mut pending = to_write.into_iter();
    loop {
        let batch: Vec<Chunk> = pending.by_ref().take(batch_size).collect();
        if batch.is_empty() {
            break;
        }
        let inputs: Vec<String> = batch.iter().map(|r| format!("{}{}", opts.document_prefix, r.document)).collect();
        let embeddings = embedder.embed(&inputs, &ctx).await.map_err(SyncError::Embed)?;
        let batch: Vec<EmbeddedChunk> =
            batch.into_iter().zip(embeddings).map(|(chunk, embedding)| EmbeddedChunk { chunk, embedding }).collect();
        store.upsert(&batch).await.map_err(SyncError::Upsert)?;
        done += batch.len();
        tracing::debug!(done, total, "sync: upserted a batch");
        opts.report(SyncPhase::Upsert, done, total);
    }
    // Deletion is reachable only once every upsert batch has succeeded.
    opts.report(SyncPhase::Delete, 0, stale.len());
    for (i, ids) in stale.chunks(batch_size).enumerate() {
        store.delete(ids).await.map_err(SyncError::Delete)?;
        let done = (i * batch_size + ids.len()).min(stale.len());
        tracing::debug!(done, total = stale.len(), "sync: deleted a batch");
        opts.report(SyncPhase::Delete, done, stale.len());
    }
    Ok(())
}

/// [`sync`] for a whole [`Build`] of `identity`, with every summary field set.
pub async fn sync_build(
    store: &dyn IndexStore,
    embedder: &dyn Embedder,
    build: Build,
    identity: &Identity,
    opts: &SyncOptions,
) -> Result<SyncSummary, SyncError> {
    let stats = build.stats;
    let summary = sync(store, embedder, build.records, &identity.namespace_id(), opts).await?;
    Ok(summary.with_identity(identity).with_build_stats(&stats))
}
