//! The `minilm` embedder kind of the plugin registry. Settings: `dir`, the
//! model folder (default: `RR_MINILM_DIR`, else the installed PyPI package,
//! see [`locate`](crate::locate)). The model is loaded when the factory runs,
//! so a missing or broken folder fails at start-up, not on the first query.

use std::path::PathBuf;
use std::sync::Arc;

use rr_core::Embedder;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::MiniLmEmbedder;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    dir: Option<PathBuf>,
}

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    let failed = |e: crate::MiniLmError| FactoryError::new(e.to_string());
    let dir = match s.dir {
        Some(dir) => dir,
        None => crate::locate().map_err(failed)?,
    };
    Ok(Arc::new(MiniLmEmbedder::from_dir(dir).map_err(failed)?))
}

rr_core::register_plugin!(embedder "minilm", create);
