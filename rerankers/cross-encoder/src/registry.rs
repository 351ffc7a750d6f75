//! The `cross-encoder` reranker kind of the plugin registry.
//!
//! Settings (`deny_unknown_fields`): `model_dir` (else `$RR_CROSS_ENCODER_DIR`),
//! `max_length`, `batch_size`, `activation`. The model is loaded here, when
//! the server builds its engine, so a bad folder stops the start with an
//! error naming it rather than failing the first search.

use std::path::PathBuf;
use std::sync::Arc;

use rr_core::Reranker;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::{Activation, CrossEncoder, CrossEncoderOptions, ENV_DIR};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    model_dir: Option<PathBuf>,
    #[serde(default)]
    max_length: Option<usize>,
    #[serde(default)]
    batch_size: Option<usize>,
    #[serde(default)]
    activation: Option<Activation>,
}

fn create(config: &Value, ctx: &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    let dir = match s.model_dir {
        Some(dir) => dir,
        None => (ctx.env)(ENV_DIR).filter(|d| !d.is_empty()).map(PathBuf::from).ok_or_else(|| {
            FactoryError::new(format!("model_dir: not set, and environment variable {ENV_DIR} is not set or empty"))
        })?,
    };
    let defaults = CrossEncoderOptions::default();
    let options = CrossEncoderOptions {
        max_length: s.max_length.unwrap_or(defaults.max_length),
        batch_size: s.batch_size.unwrap_or(defaults.batch_size),
        activation: s.activation.unwrap_or(defaults.activation),
    };
    let model = CrossEncoder::from_dir(&dir, &options).map_err(|e| FactoryError::new(e.to_string()))?;
    Ok(Arc::new(model))
}

rr_core::register_plugin!(reranker "cross-encoder", create);

#[cfg(test)]
mod tests {
    use rr_core::{PluginKind, Registry};
    use serde_json::json;

    use super::*;

    fn ctx(env: Option<&'static str>) -> FactoryContext {
        let mut ctx = FactoryContext::new("t");
        ctx.env = Arc::new(move |name| (name == ENV_DIR).then(|| env.map(str::to_owned)).flatten());
        ctx
    }

    fn build_err(config: Value, env: Option<&'static str>) -> String {
        let registry = Registry::builtin().unwrap();
        registry.reranker("cross-encoder", &config, &ctx(env)).err().unwrap().to_string()
    }

    #[test]
    fn kind_is_registered_by_name() {
        let registry = Registry::builtin().unwrap();
        assert!(registry.names(PluginKind::Reranker).contains(&"cross-encoder"));
    }

    #[test]
    fn unknown_keys_and_values_are_refused() {
        assert_eq!(
            build_err(json!({"model_dir": "/m", "max_len": 128}), None),
            "reranker \"cross-encoder\": unknown field `max_len`, expected one of `model_dir`, `max_length`, \
             `batch_size`, `activation`"
        );
        assert_eq!(
            build_err(json!({"model_dir": "/m", "activation": "softmax"}), None),
            "reranker \"cross-encoder\": unknown variant `softmax`, expected `none` or `sigmoid`"
        );
    }

    #[test]
    fn model_dir_comes_from_the_environment_when_absent() {
        assert_eq!(
            build_err(json!({}), None),
            "reranker \"cross-encoder\": model_dir: not set, and environment variable RR_CROSS_ENCODER_DIR is \
             not set or empty"
        );
        assert_eq!(build_err(json!({}), Some("")), build_err(json!({}), None));
        assert_eq!(
            build_err(json!({}), Some("/surely/not/a/model")),
            "reranker \"cross-encoder\": cross-encoder model folder /surely/not/a/model does not exist"
        );
        // The file's setting wins over the environment.
        assert_eq!(
            build_err(json!({"model_dir": "/nor/this"}), Some("/surely/not/a/model")),
            "reranker \"cross-encoder\": cross-encoder model folder /nor/this does not exist"
        );
    }

    #[test]
    fn settings_out_of_range_are_refused_before_the_folder_is_read() {
        assert_eq!(
            build_err(json!({"model_dir": "/m", "batch_size": 0}), None),
            "reranker \"cross-encoder\": batch_size must be at least 1"
        );
        assert_eq!(
            build_err(json!({"model_dir": "/m", "max_length": 3}), None),
            "reranker \"cross-encoder\": max_length must be at least 4 ([CLS] query [SEP] document [SEP]), not 3"
        );
    }
}
