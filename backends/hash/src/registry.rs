//! The `hash` embedder kind of the plugin registry. Settings: `dimension`
//! (default 256, the reference server's).

use std::sync::Arc;

use rr_core::Embedder;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::{DEFAULT_DIMENSION, HashEmbedder};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default = "default_dimension")]
    dimension: usize,
}

fn default_dimension() -> usize {
    DEFAULT_DIMENSION
}

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    HashEmbedder::new(s.dimension)
        .map(|e| Arc::new(e) as Arc<dyn Embedder>)
        .ok_or_else(|| FactoryError::new("dimension must be at least 1"))
}

rr_core::register_plugin!(embedder "hash", create);
