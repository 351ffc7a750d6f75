//! The `bm25-fusion` and `mmr` reranker kinds of the plugin registry.
//!
//! Settings (`deny_unknown_fields`, all optional): `k`, `k1`, `b`,
//! `weight_vector`, `weight_lexical` for `bm25-fusion`; `lambda` for `mmr`.

use std::sync::Arc;

use rr_core::Reranker;
use rr_core::registry::{FactoryContext, FactoryError};
use serde_json::Value;

use crate::{Bm25Fusion, Bm25FusionSettings, Mmr, MmrSettings};

fn create_bm25_fusion(config: &Value, _: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let settings: Bm25FusionSettings = FactoryError::parse(config)?;
    Ok(Arc::new(Bm25Fusion::new(settings).map_err(|e| FactoryError::new(e.0))?))
}

fn create_mmr(config: &Value, _: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let settings: MmrSettings = FactoryError::parse(config)?;
    Ok(Arc::new(Mmr::new(settings).map_err(|e| FactoryError::new(e.0))?))
}

rr_core::register_plugin!(reranker "bm25-fusion", create_bm25_fusion);
rr_core::register_plugin!(reranker "mmr", create_mmr);

#[cfg(test)]
mod tests {
    use rr_core::Registry;
    use rr_core::registry::FactoryContext;
    use serde_json::json;

    fn build(kind: &str, config: serde_json::Value) -> Result<String, String> {
        let registry = Registry::builtin().map_err(|e| e.to_string())?;
        registry
            .reranker(kind, &config, &FactoryContext::new("test"))
            .map(|r| r.name().to_owned())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn both_kinds_are_registered_with_defaults() {
        assert_eq!(build("bm25-fusion", json!({})).unwrap(), "bm25-fusion");
        assert_eq!(build("mmr", json!({})).unwrap(), "mmr");
        assert_eq!(
            build("bm25-fusion", json!({"k": 10, "k1": 0.9, "b": 0.4, "weight_lexical": 2})).unwrap(),
            "bm25-fusion"
        );
    }

    #[test]
    fn bad_settings_name_the_key() {
        assert_eq!(
            build("mmr", json!({"lambda": 2})).unwrap_err(),
            "reranker \"mmr\": lambda must be between 0 and 1, not 2"
        );
        assert_eq!(
            build("bm25-fusion", json!({"k": 0})).unwrap_err(),
            "reranker \"bm25-fusion\": k must be a positive number, not 0"
        );
        assert_eq!(
            build("mmr", json!({"lamda": 0.5})).unwrap_err(),
            "reranker \"mmr\": unknown field `lamda`, expected `lambda`"
        );
        assert_eq!(
            build("bm25-fusion", json!({"weight": 1})).unwrap_err(),
            "reranker \"bm25-fusion\": unknown field `weight`, expected one of `k`, `k1`, `b`, `weight_vector`, `weight_lexical`"
        );
    }
}
