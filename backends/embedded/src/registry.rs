//! The `embedded` store kind of the plugin registry. Settings: `path`, the
//! store folder (it must already hold an index).

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
struct Registered(EmbeddedStore);

#[async_trait]
impl VectorStore for Registered {
    fn name(&self) -> &str {
        STORE_NAME
    }
    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        VectorStore::query(&self.0, query, ctx).await
    }
    async fn dimension(&self, _ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        Ok(self.0.dimension())
    }
    fn lexical(&self) -> Option<&dyn LexicalStore> {
        Some(&self.0)
    }
}

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    if !s.path.is_dir() {
        return Err(FactoryError::new(format!("path: {} is not a store folder", s.path.display())));
    }
    EmbeddedStore::open(&s.path)
        .map(|store| Arc::new(Registered(store)) as Arc<dyn VectorStore>)
        .map_err(|e| FactoryError::new(format!("cannot open the store at {}: {e}", s.path.display())))
}

rr_core::register_plugin!(store "embedded", create);
