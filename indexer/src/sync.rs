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
//! **Streaming.** [`StreamSync`] is the same sync fed a file's records at a
//! time, from a [`crate::BuildStream`], for folders too large to build in
//! memory (`repo-retriever index`). It keeps a 16-byte digest of each id
//! instead of the records, and diffs and writes as records come: the upserts
//! are the same calls in the same order (the stream delivers files in id
//! order) and deletions still wait for every upsert, but step 1 no longer
//! holds: a bad record or an unreadable file stops the sync after the
//! batches before it were written. Those batches are complete records, so
//! the next run counts them as unchanged and converges, as after a failed
//! upsert.
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
use sha2::{Digest, Sha256};

use crate::{Build, BuildStats, Identity};

/// Records per upsert or delete when the caller does not say (the reference's default).
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// What is prepended to a document before it is embedded, by default.
pub const DEFAULT_DOCUMENT_PREFIX: &str = "passage: ";

/// Which write phase a [`SyncProgress`] report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPhase {
    /// Reading, chunking, embedding and upserting a streamed folder: `done`
    /// and `total` count files, not records.
    Index,
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
    /// Passes a progress report to [`SyncOptions::progress`], if set.
    pub fn report(&self, phase: SyncPhase, done: usize, total: usize) {
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
    /// Files the selection would index but that were left out (too large, a
    /// name that is not UTF-8), each with why; a key the reference's summary
    /// does not have, written only when there is one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files_skipped: Vec<crate::SkippedFile>,
    /// Eligible files not chunked again because the store holds their
    /// records for the same text and chunking; a key the reference's
    /// summary does not have.
    pub files_unchanged: usize,
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
        self.files_unchanged = stats.files_unchanged;
        self
    }

    /// Sets the files the scan left out.
    pub fn with_skipped(mut self, skipped: &[crate::SkippedFile]) -> Self {
        self.files_skipped = skipped.to_vec();
        self
    }

    /// The summary as one line of JSON, keys sorted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the summary holds only strings, integers, booleans and lists of them")
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
    check_options(namespace_id, opts)?;
    if let Some(foreign) = records.iter().find(|r| r.metadata.namespace_id != namespace_id) {
        return Err(foreign_record(foreign, namespace_id));
    }
    // Upserts go out in id order, as the reference sends them.
    records.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(pair) = records.windows(2).find(|pair| pair[0].id == pair[1].id) {
        return Err(SyncError::DuplicateId(pair[0].id.clone()));
    }
    let mut sync = StreamSync::start(store, embedder, namespace_id, opts).await?;
    let to_write = records.iter().filter(|r| !sync.is_stored(&r.id)).count();
    sync.upsert_total = Some(to_write);
    if !opts.dry_run {
        opts.report(SyncPhase::Upsert, 0, to_write);
    }
    sync.push(records).await?;
    sync.finish().await
}

fn check_options(namespace_id: &str, opts: &SyncOptions) -> Result<(), SyncError> {
    if opts.batch_size == 0 {
        return Err(SyncError::InvalidOptions("batch_size must be a positive integer".into()));
    }
    if namespace_id.is_empty() {
        return Err(SyncError::InvalidOptions("namespace_id must not be empty".into()));
    }
    Ok(())
}

fn foreign_record(record: &Chunk, namespace_id: &str) -> SyncError {
    SyncError::ForeignRecord {
        id: record.id.clone(),
        found: record.metadata.namespace_id.clone(),
        expected: namespace_id.to_owned(),
    }
}

/// A record id reduced to 16 bytes (the start of its SHA-256), which is all
/// a sync keeps of the ids it has seen: a million ids of ~216 bytes take
/// ~30 MB as digests instead of ~250 MB as strings. Two distinct ids share a
/// digest with a probability of about 2⁻¹²⁸ per pair.
type IdDigest = [u8; 16];

fn digest(id: &str) -> IdDigest {
    let full = Sha256::digest(id.as_bytes());
    let mut out = [0; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// A sync fed record by record, for a build that is streamed rather than
/// held ([`crate::BuildStream`]): the same guarantees and summary as
/// [`sync`], except that records are checked as they come, so a foreign or
/// duplicate record, or a failed embedding or upsert, stops the sync after
/// the batches before it were written (and still before any deletion).
///
/// [`StreamSync::start`] lists the namespace and keeps a digest of each id;
/// [`StreamSync::push`] diffs records against it, keeps the digests of the
/// ids it has seen, and embeds and upserts every full batch of new records;
/// [`StreamSync::finish`] writes the last batch, lists the namespace again
/// to find its stale ids (only when some exist), deletes them in batches
/// and verifies the count. Upserts go out in the order records are pushed.
pub struct StreamSync<'a> {
    store: &'a dyn IndexStore,
    embedder: &'a dyn Embedder,
    opts: &'a SyncOptions,
    namespace_id: String,
    started: Instant,
    batch_size: usize,
    existing: HashSet<IdDigest>,
    desired: HashSet<IdDigest>,
    unchanged: usize,
    pending: Vec<Chunk>,
    written: usize,
    /// Known in advance when the records are ([`sync`]): then upsert
    /// progress is reported against it.
    upsert_total: Option<usize>,
}

impl fmt::Debug for StreamSync<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamSync")
            .field("store", &self.store.name())
            .field("namespace_id", &self.namespace_id)
            .field("existing", &self.existing.len())
            .field("desired", &self.desired.len())
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<'a> StreamSync<'a> {
    /// Checks the options and lists the namespace.
    pub async fn start(
        store: &'a dyn IndexStore,
        embedder: &'a dyn Embedder,
        namespace_id: &str,
        opts: &'a SyncOptions,
    ) -> Result<Self, SyncError> {
        let started = opts.started.unwrap_or_else(Instant::now);
        check_options(namespace_id, opts)?;
        tracing::info!(namespace_id, store = store.name(), "sync: listing the namespace");
        let existing: HashSet<IdDigest> =
            store.namespace_ids(namespace_id).await.map_err(SyncError::List)?.iter().map(|id| digest(id)).collect();
        Ok(StreamSync {
            store,
            embedder,
            opts,
            namespace_id: namespace_id.to_owned(),
            started,
            batch_size: opts.batch_size.min(store.max_batch_size()).max(1),
            existing,
            desired: HashSet::new(),
            unchanged: 0,
            pending: Vec::new(),
            written: 0,
            upsert_total: None,
        })
    }

    /// Whether the namespace held `id` when the sync started.
    pub fn is_stored(&self, id: &str) -> bool {
        self.existing.contains(&digest(id))
    }

    /// Records pushed so far.
    pub fn desired(&self) -> usize {
        self.desired.len()
    }

    /// Takes the next records: each is checked (its namespace, an id not
    /// pushed before), then counted as unchanged or queued for writing, and
    /// every full batch is embedded and upserted (unless a dry run).
    pub async fn push(&mut self, records: Vec<Chunk>) -> Result<(), SyncError> {
        for record in records {
            if record.metadata.namespace_id != self.namespace_id {
                return Err(foreign_record(&record, &self.namespace_id));
            }
            let id = digest(&record.id);
            if !self.desired.insert(id) {
                return Err(SyncError::DuplicateId(record.id));
            }
            if self.existing.contains(&id) {
                self.unchanged += 1;
            } else if self.opts.dry_run {
                self.written += 1;
            } else {
                self.pending.push(record);
                if self.pending.len() >= self.batch_size {
                    self.flush().await?;
                }
            }
        }
        Ok(())
    }

    /// Takes records the namespace holds already by their ids (those of a
    /// file the build did not chunk again, see
    /// [`crate::build_stream_known`]): they count as unchanged, and as
    /// desired, so they are not deleted.
    pub fn keep(&mut self, ids: &[String]) -> Result<(), SyncError> {
        for id in ids {
            let digest = digest(id);
            if !self.desired.insert(digest) {
                return Err(SyncError::DuplicateId(id.clone()));
            }
            // Listed by the caller after the sync started: normally held
            // since, and counted as stored either way.
            self.existing.insert(digest);
            self.unchanged += 1;
        }
        Ok(())
    }

    /// Embeds and upserts the queued records as one batch.
    async fn flush(&mut self) -> Result<(), SyncError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        let ctx = CallContext::default();
        let inputs: Vec<String> =
            batch.iter().map(|r| format!("{}{}", self.opts.document_prefix, r.document)).collect();
        let embeddings = self.embedder.embed(&inputs, &ctx).await.map_err(SyncError::Embed)?;
        drop(inputs);
        let batch: Vec<EmbeddedChunk> =
            batch.into_iter().zip(embeddings).map(|(chunk, embedding)| EmbeddedChunk { chunk, embedding }).collect();
        self.store.upsert(&batch).await.map_err(SyncError::Upsert)?;
        self.written += batch.len();
        tracing::debug!(done = self.written, "sync: upserted a batch");
        if let Some(total) = self.upsert_total {
            self.opts.report(SyncPhase::Upsert, self.written, total);
        }
        Ok(())
    }

    /// Writes the last batch, then (only if every upsert succeeded) deletes
    /// the stale ids and verifies the namespace.
    pub async fn finish(mut self) -> Result<SyncSummary, SyncError> {
        let desired_count = self.desired.len();
        let mut summary = SyncSummary {
            namespace_id: self.namespace_id.clone(),
            chunks_desired: desired_count,
            chunks_unchanged: self.unchanged,
            dry_run: self.opts.dry_run,
            ..SyncSummary::default()
        };
        // Ids listed at the start that no record claimed.
        let stale_count = self.existing.len() - self.unchanged;
        if self.opts.dry_run {
            summary.chunks_added_or_updated = self.written;
            summary.chunks_deleted = stale_count;
        } else {
            self.flush().await?;
            summary.chunks_added_or_updated = self.written;
            self.existing = HashSet::new();
            let mut stale = Vec::new();
            if stale_count > 0 {
                let listed = self.store.namespace_ids(&self.namespace_id).await.map_err(SyncError::List)?;
                stale = listed.into_iter().filter(|id| !self.desired.contains(&digest(id))).collect();
                stale.sort_unstable();
                stale.dedup();
            }
            summary.chunks_deleted = stale.len();
            self.delete(&stale).await?;
            let mut found = self.store.namespace_ids(&self.namespace_id).await.map_err(SyncError::List)?;
            found.sort_unstable();
            found.dedup();
            let found = found.len();
            if found != desired_count {
                return Err(SyncError::Verification { expected: desired_count, found });
            }
        }
        tracing::info!(
            add_or_update = summary.chunks_added_or_updated,
            unchanged = summary.chunks_unchanged,
            delete = summary.chunks_deleted,
            dry_run = self.opts.dry_run,
            "sync: written"
        );
        summary.duration_ms = (self.started.elapsed().as_secs_f64() * 1000.0).round() as u64;
        tracing::info!(namespace_id = self.namespace_id, duration_ms = summary.duration_ms, "sync: complete");
        Ok(summary)
    }

    /// Deletes `stale` in batches; reachable only once every upsert batch
    /// has succeeded.
    async fn delete(&self, stale: &[String]) -> Result<(), SyncError> {
        self.opts.report(SyncPhase::Delete, 0, stale.len());
        let mut done = 0;
        for ids in stale.chunks(self.batch_size) {
            self.store.delete(ids).await.map_err(SyncError::Delete)?;
            done += ids.len();
            tracing::debug!(done, total = stale.len(), "sync: deleted a batch");
            self.opts.report(SyncPhase::Delete, done, stale.len());
        }
        Ok(())
    }
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
