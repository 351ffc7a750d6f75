//! A store that cannot rank words, and the lexical index kept beside it.
//!
//! A local Chroma has no sparse vectors, so by itself it answers nearest
//! neighbours only. The engine keeps an embedded store beside such a
//! collection — the same records under the same ids, the files' texts and the
//! settings the collection was written with — and reads from it what the
//! collection cannot say: the lexical ranking, the document frequencies the
//! head of a hybrid ranking is weighed with, and the files a query names.
//! The collection's nearest neighbours stay the collection's. `index
//! --chroma-url … --lexical-index DIR` writes both ([`Beside`]);
//! [`crate::local::engine_beside`] searches them as one.

use std::collections::HashSet;

use rr_core::{BackendError, EmbeddedChunk, IndexStore};

/// Writes to a remote store and to the lexical index beside it. A record
/// counts as stored only when both hold it, so a run that failed between
/// the two writes is made whole by the next one.
pub struct Beside<'a> {
    remote: &'a dyn IndexStore,
    index: &'a dyn IndexStore,
}

impl<'a> Beside<'a> {
    pub fn new(remote: &'a dyn IndexStore, index: &'a dyn IndexStore) -> Self {
        Beside { remote, index }
    }
}

#[async_trait::async_trait]
impl IndexStore for Beside<'_> {
    fn name(&self) -> &str {
        self.remote.name()
    }

    fn max_batch_size(&self) -> usize {
        self.remote.max_batch_size().min(self.index.max_batch_size())
    }

    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError> {
        let remote = self.remote.namespace_ids(namespace_id).await?;
        let index: HashSet<String> = self.index.namespace_ids(namespace_id).await?.into_iter().collect();
        Ok(remote.into_iter().filter(|id| index.contains(id)).collect())
    }

    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError> {
        self.remote.upsert(records).await?;
        self.index.upsert(records).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), BackendError> {
        self.remote.delete(ids).await?;
        self.index.delete(ids).await
    }
}
