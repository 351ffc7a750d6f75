//! The `potion` embedder kind of the plugin registry. It takes no settings:
//! the model is compiled in.

use std::sync::Arc;

use rr_core::Embedder;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::PotionEmbedder;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {}

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError> {
    let _: Settings = FactoryError::parse(config)?;
    Ok(Arc::new(PotionEmbedder::new().map_err(|e| FactoryError::new(e.to_string()))?))
}

rr_core::register_plugin!(embedder "potion", create);
