//! The `embedded` store kind of the plugin registry. Settings: `path`, the
//! store folder (it must already hold an index).
//!
//! The embedded default (`serve --store`, `search`, `eval`) builds its store
//! through this kind like every other backend, and reaches the concrete
//! [`EmbeddedStore`] behind it with [`embedded`] rather than opening the
//! database and its vector index a second time.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use rr_core::registry::{FactoryContext, FactoryError};
use rr_core::retrieval::LexicalStore;
use rr_core::{BackendError, CallContext, Candidate, VectorQuery, VectorStore};
use serde::Deserialize;
use serde_json::Value;

use crate::{EmbeddedStore, STORE_NAME};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    path: PathBuf,
}

/// The embedded store, reporting the dimension it holds.
struct Registered(Arc<EmbeddedStore>);

/// The [`EmbeddedStore`] behind a store the registry built with the
/// `embedded` kind; `None` for a store of any other kind.
pub fn embedded(store: &dyn VectorStore) -> Option<Arc<EmbeddedStore>> {
    store.as_any()?.downcast_ref::<Registered>().map(|r| r.0.clone())
}

#[async_trait]
impl VectorStore for Registered {
    fn name(&self) -> &str {
        STORE_NAME
    }
    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        VectorStore::query(self.0.as_ref(), query, ctx).await
    }
    async fn dimension(&self, _ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        Ok(self.0.dimension())
    }
    fn lexical(&self) -> Option<&dyn LexicalStore> {
        Some(self.0.as_ref())
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    if !s.path.is_dir() {
        return Err(FactoryError::new(format!("path: {} is not a store folder", s.path.display())));
    }
    EmbeddedStore::open(&s.path)
        .map(|store| Arc::new(Registered(Arc::new(store))) as Arc<dyn VectorStore>)
        .map_err(|e| FactoryError::new(format!("cannot open the store at {}: {e}", s.path.display())))
}

rr_core::register_plugin!(store "embedded", create);

#[cfg(test)]
mod tests {
    use super::*;

    struct Other;

    #[async_trait]
    impl VectorStore for Other {
        fn name(&self) -> &str {
            "other"
        }
        async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn the_embedded_kind_hands_back_the_store_it_opened() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = FactoryContext::new("test");
        let built = create(&serde_json::json!({ "path": dir.path() }), &ctx).unwrap();
        let first = embedded(built.as_ref()).expect("the embedded kind's store");
        let second = embedded(built.as_ref()).unwrap();
        // One open store behind the registry's handle and both callers.
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(Arc::strong_count(&first), 3);
        assert!(embedded(&Other).is_none());
    }
}
