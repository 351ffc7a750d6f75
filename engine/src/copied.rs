//! The lexical index of a collection another indexer filled.
//!
//! `chromadb-repo-indexer` (or any indexer writing the same records) fills a
//! Chroma collection without the lexical index `index --chroma-url …
//! --lexical-index` writes beside it ([`crate::beside`]). Such an index is
//! copied from the collection itself — its records with their documents,
//! metadata and vectors, read page by page — and kept level with it
//! ([`refresh`]), so the collection is searched with the engine's whole
//! chain as one our indexer wrote.

use std::collections::HashSet;

use crate::local::{EmbeddingEndpoint, LocalError, StoreSettings};

/// What one [`refresh`] of a lexical index from its collection changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Records copied from the collection.
    pub added: usize,
    /// Records the collection no longer holds, removed from the index.
    pub removed: usize,
    /// Records the index holds now.
    pub held: usize,
}

/// Records copied per transaction: one read of the collection (its page
/// size bounds each request), then one write, so memory stays bounded on
/// a collection of any size.
const COPY_BATCH: usize = 2000;

/// Brings the lexical index at `dir` level with the collection `remote`
/// reads, for a collection another indexer filled: every record the
/// collection holds and the index does not is copied with its document,
/// metadata and vector, and every record the index holds and the collection
/// does not is removed. A record's id names its file's hash, so a changed
/// file arrives as new ids and its old ids leave; comparing the two id sets
/// (one paged read of ids) finds everything that changed, and nothing else
/// is read when they agree.
///
/// Each batch is written in one transaction, so a refresh that fails
/// part-way leaves whole records only, and the next one copies the rest.
/// `dir` must hold settings ([`create_for_collection`] or `index
/// --lexical-index`).
pub async fn refresh(remote: &rr_chroma::ChromaStore, dir: &std::path::Path) -> Result<Refreshed, LocalError> {
    let index = crate::local::open(dir)?.store;
    let held: HashSet<String> = {
        let index = index.clone();
        tokio::task::spawn_blocking(move || index.ids()).await?.map_err(LocalError::StoreFiles)?.into_iter().collect()
    };
    let name = remote.collection_name().to_owned();
    let ids = remote.all_ids().await?.ok_or_else(|| LocalError::NoCollection(name.clone()))?;
    let wanted: HashSet<&String> = ids.iter().collect();
    let removed: Vec<String> = held.iter().filter(|id| !wanted.contains(id)).cloned().collect();
    // In id order, as `index` writes them (a file's chunks together, in
    // order), so rows that tie are ordered as in a store `index` wrote.
    let mut added: Vec<String> = ids.iter().filter(|id| !held.contains(*id)).cloned().collect();
    added.sort_unstable();
    let mut done = Refreshed { added: 0, removed: removed.len(), held: held.len() - removed.len() };
    if !removed.is_empty() {
        let index = index.clone();
        tokio::task::spawn_blocking(move || index.delete_chunks(&removed)).await?.map_err(LocalError::StoreFiles)?;
    }
    for batch in added.chunks(COPY_BATCH) {
        let mut records =
            remote.records_with_vectors(batch).await?.ok_or_else(|| LocalError::NoCollection(name.clone()))?;
        records.sort_unstable_by(|a, b| a.chunk.id.cmp(&b.chunk.id));
        let index = index.clone();
        let copied = records.len();
        tokio::task::spawn_blocking(move || index.upsert_chunks(&records)).await?.map_err(LocalError::StoreFiles)?;
        done.added += copied;
        done.held += copied;
    }
    Ok(done)
}

/// Creates the lexical index of a collection another indexer filled at
/// `dir`, unless `dir` already holds one (which keeps its own settings):
/// settings only, no records yet, naming `endpoint` as the embedder of the
/// collection's vectors and of the queries, with the reference
/// deployment's prefixes and chunking (so a later `index --chroma-url …
/// --lexical-index` writes the records that indexer writes). Returns
/// whether it created one.
pub fn create_for_collection(dir: &std::path::Path, endpoint: EmbeddingEndpoint) -> Result<bool, LocalError> {
    if crate::local::read_settings(dir)?.is_some() {
        return Ok(false);
    }
    let settings = StoreSettings {
        chunking: rr_indexer::ChunkingScheme::Reference,
        ..crate::local::new_store_settings("openai", Some(endpoint))?
    };
    crate::local::embedder_for(&settings)?;
    std::fs::create_dir_all(dir).map_err(LocalError::io("create the lexical index folder", dir))?;
    crate::local::write_settings(dir, &settings)?;
    Ok(true)
}

/// Refuses a lexical index whose embedder makes vectors of another length
/// than those the collection holds: its queries' vectors could not be
/// compared with the collection's (the index was written for another
/// collection, or with another embedder). `held` is the collection's length;
/// an index that does not know its own yet (a new one) passes.
pub fn check_dimension(dir: &std::path::Path, collection: &str, held: usize) -> Result<(), LocalError> {
    let Some(settings) = crate::local::read_settings(dir)? else { return Ok(()) };
    let made = match settings.dimension {
        0 => crate::local::open(dir)?.store.dimension(),
        d => Some(d),
    };
    match made {
        Some(made) if made != held => Err(LocalError::CollectionDimension {
            collection: collection.to_owned(),
            held,
            index: dir.to_owned(),
            embedder: settings.embedder,
            made,
        }),
        _ => Ok(()),
    }
}
