//! The `cross-encoder` reranker: a Hugging Face `BertForSequenceClassification`
//! model folder (e.g. `cross-encoder/ms-marco-MiniLM-L-6-v2`) run locally on
//! the CPU with `candle`, no network, no Python at run time.
//!
//! A cross-encoder reads the query and one document *together* and outputs one
//! relevance logit, which is why it ranks better than comparing two separately
//! computed vectors, and why it costs one forward pass per document. The
//! pipeline mirrors what sentence-transformers' `CrossEncoder.predict` does:
//!
//! - **Pair encoding.** `[CLS] query [SEP] document [SEP]` with token type 0
//!   for the first part and 1 for the second, as the model's own
//!   `tokenizer.json` template says. The pair is cut to `max_length` word
//!   pieces (default 512, never more than the model's position table) by
//!   trimming the longer side first, so a long document cannot push the query
//!   out. The file's own truncation and padding settings are replaced.
//! - **Head.** BERT's `[CLS]` vector → `pooler.dense` + tanh → `classifier`
//!   (one label). Weights are found with or without the `bert.` prefix that
//!   `BertForSequenceClassification` checkpoints carry.
//! - **Score.** The logit, passed through a sigmoid by default (what
//!   sentence-transformers does for a one-label model whose config names no
//!   activation), or as is with [`Activation::None`]. Sigmoid is monotonic,
//!   so the order is the same either way; only the scale differs, which
//!   matters for score cut-offs.
//! - **Batches.** Pairs are sorted by length and run [`batch_size`] at a time,
//!   padded to the longest of their batch under an attention mask, so short
//!   pairs do not pay for long ones; scores come back in document order.
//!
//! Anything else (another architecture, two or more labels) is refused when
//! the model is loaded, with a message saying what is supported: a
//! multi-label classifier's logit 0 is not a relevance score, and silently
//! using it would produce a plausible but meaningless order.
//!
//! The folder checks, the tokenizer set-up and the batching are rr-bert's,
//! shared with the `minilm` embedder; this crate adds the checks of
//! `config.json` and the classification head. The forward pass is CPU-bound,
//! so [`Reranker::rerank`] runs it on tokio's blocking pool. The weights are
//! read into memory rather than memory-mapped.
//!
//! [`batch_size`]: CrossEncoderOptions::batch_size

mod registry;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::Tensor;
use candle_nn::{Linear, Module};
use candle_transformers::models::bert::{BertModel, Config};
use rr_bert::{Encoder, FolderKind, ModelFolder, read_json};
use rr_core::{BackendError, CallContext, Reranker};
use serde::Deserialize;
use serde_json::Value;

pub use rr_bert::{BertError, REQUIRED_FILES};

/// The environment variable naming the model folder when the settings give
/// no `model_dir`.
pub const ENV_DIR: &str = "RR_CROSS_ENCODER_DIR";

/// The one architecture (config.json `architectures`) that is run.
pub const ARCHITECTURE: &str = "BertForSequenceClassification";

/// Word pieces per pair unless configured (the ms-marco models' limit).
pub const DEFAULT_MAX_LENGTH: usize = 512;

/// Pairs per forward pass unless configured.
pub const DEFAULT_BATCH_SIZE: usize = 16;

/// `[CLS]`, two `[SEP]` and at least one word piece.
pub const MIN_MAX_LENGTH: usize = 4;

/// How the errors name the model folder.
const FOLDER: FolderKind = FolderKind { name: "cross-encoder model folder", what: "cross-encoder model folder" };

/// What is done to the logit before it is returned as the score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// The raw logit (unbounded).
    None,
    /// `1 / (1 + e^-logit)`, in (0, 1).
    #[default]
    Sigmoid,
}

impl Activation {
    /// The score of one logit.
    pub fn apply(self, logit: f32) -> f64 {
        let x = f64::from(logit);
        match self {
            Activation::None => x,
            Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        }
    }
}

/// How the model is run (the settings of the `cross-encoder` kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossEncoderOptions {
    /// Word pieces per pair, special tokens included; capped at the model's
    /// `max_position_embeddings`.
    pub max_length: usize,
    /// Pairs per forward pass.
    pub batch_size: usize,
    pub activation: Activation,
}

impl Default for CrossEncoderOptions {
    fn default() -> Self {
        CrossEncoderOptions {
            max_length: DEFAULT_MAX_LENGTH,
            batch_size: DEFAULT_BATCH_SIZE,
            activation: Activation::default(),
        }
    }
}

/// What can go wrong loading or running the model.
#[derive(Debug, thiserror::Error)]
pub enum CrossEncoderError {
    /// A setting out of range (named in the message).
    #[error("{0}")]
    Setting(String),
    /// The model folder, one of its files, or running it (see [`BertError`]).
    #[error(transparent)]
    Model(#[from] BertError),
}

/// The local cross-encoder reranker (see the crate docs). Cheap to clone: the
/// model is shared.
#[derive(Clone)]
pub struct CrossEncoder {
    model: Arc<Model>,
}

struct Model {
    folder: ModelFolder,
    encoder: Encoder,
    pooler: Linear,
    classifier: Linear,
    max_length: usize,
    batch_size: usize,
    activation: Activation,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder")
            .field("dir", &self.model.folder.dir())
            .field("max_length", &self.model.max_length)
            .field("batch_size", &self.model.batch_size)
            .field("activation", &self.model.activation)
            .finish()
    }
}

impl CrossEncoder {
    /// Loads the model folder `dir` (`config.json`, `tokenizer.json`,
    /// `model.safetensors`). Errors name the folder and the missing or
    /// broken file, or say which models are supported.
    pub fn from_dir(dir: impl AsRef<Path>, options: &CrossEncoderOptions) -> Result<Self, CrossEncoderError> {
        if options.max_length < MIN_MAX_LENGTH {
            return Err(CrossEncoderError::Setting(format!(
                "max_length must be at least {MIN_MAX_LENGTH} ([CLS] query [SEP] document [SEP]), not {}",
                options.max_length
            )));
        }
        if options.batch_size == 0 {
            return Err(CrossEncoderError::Setting("batch_size must be at least 1".into()));
        }
        let folder = ModelFolder::open(dir.as_ref(), FOLDER)?;
        let config = read_config(&folder.config_path())?;
        let max_length = options.max_length.min(config.max_position_embeddings);
        let tokenizer = folder.tokenizer(max_length)?;
        let (bert, pooler, classifier) = folder.weights(|vb| {
            // `BertForSequenceClassification` saves its encoder under `bert.`; a
            // bare export (the encoder at the top) is accepted too. The
            // classifier sits at the top in both.
            let encoder_vb =
                if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb.clone() };
            let hidden = config.hidden_size;
            let bert = BertModel::load(encoder_vb.clone(), &config)?;
            let pooler = candle_nn::linear(hidden, hidden, encoder_vb.pp("pooler").pp("dense"))?;
            let classifier = candle_nn::linear(hidden, 1, vb.pp("classifier"))?;
            Ok((bert, pooler, classifier))
        })?;

        Ok(CrossEncoder {
            model: Arc::new(Model {
                folder,
                encoder: Encoder::new(bert, tokenizer, &config),
                pooler,
                classifier,
                max_length,
                batch_size: options.batch_size,
                activation: options.activation,
            }),
        })
    }

    /// The model folder this reranker was loaded from.
    pub fn dir(&self) -> &Path {
        self.model.folder.dir()
    }

    /// The most word pieces one pair is cut to, special tokens included.
    pub fn max_length(&self) -> usize {
        self.model.max_length
    }

    /// Pairs per forward pass.
    pub fn batch_size(&self) -> usize {
        self.model.batch_size
    }

    /// What is applied to each logit.
    pub fn activation(&self) -> Activation {
        self.model.activation
    }

    /// The token ids and token type ids the model sees for one pair:
    /// special tokens added, truncated to [`CrossEncoder::max_length`],
    /// unpadded.
    pub fn encode_pair(&self, query: &str, document: &str) -> Result<(Vec<u32>, Vec<u32>), CrossEncoderError> {
        let encoding = self.model.encoder.encode((query, document))?;
        Ok((encoding.get_ids().to_vec(), encoding.get_type_ids().to_vec()))
    }

    /// The raw logit of each `(query, document)` pair, in document order, on
    /// the calling thread.
    pub fn logits_blocking(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, CrossEncoderError> {
        let inputs: Vec<(&str, &str)> = documents.iter().map(|d| (query, d.as_str())).collect();
        Ok(self.model.encoder.run(inputs, self.model.batch_size, |hidden, _mask| self.head(hidden))?)
    }

    /// One score per document, in document order, on the calling thread:
    /// the logits with the configured [`Activation`]. CPU-bound;
    /// [`Reranker::rerank`] wraps it for async use.
    pub fn scores_blocking(&self, query: &str, documents: &[String]) -> Result<Vec<f64>, CrossEncoderError> {
        let activation = self.model.activation;
        Ok(self.logits_blocking(query, documents)?.into_iter().map(|l| activation.apply(l)).collect())
    }

    /// The logit of each row of BERT's last hidden states `(batch, len, dim)`:
    /// `[CLS]` → pooler (tanh) → classifier.
    fn head(&self, hidden: &Tensor) -> candle_core::Result<Vec<f32>> {
        let cls = hidden.narrow(1, 0, 1)?.squeeze(1)?; // (batch, dim)
        let pooled = self.model.pooler.forward(&cls)?.tanh()?;
        let logits = self.model.classifier.forward(&pooled)?; // (batch, 1)
        logits.squeeze(1)?.to_vec1::<f32>()
    }
}

#[async_trait]
impl Reranker for CrossEncoder {
    fn name(&self) -> &str {
        "cross-encoder"
    }

    /// Runs [`CrossEncoder::scores_blocking`] on tokio's blocking pool: one
    /// pair costs a full BERT forward pass.
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let (model, query, documents) = (self.clone(), query.to_owned(), documents.to_vec());
        tokio::task::spawn_blocking(move || model.scores_blocking(&query, &documents))
            .await
            .map_err(|e| BackendError::new("cross-encoder", format!("cross-encoder reranking task failed: {e}")))?
            .map_err(|e| BackendError::new("cross-encoder", e))
    }
}

/// Reads `config.json`, refusing what this reranker cannot run before the
/// weights are touched.
fn read_config(path: &Path) -> Result<Config, BertError> {
    let invalid = |message: String| BertError::Invalid { path: path.to_owned(), message };
    let value: Value = read_json(path)?;

    let supported = format!(
        "the cross-encoder reranker runs {ARCHITECTURE} models with one label \
         (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2)"
    );
    // sentence-transformers accepts a config without `architectures`; so does
    // this, as long as the model type (when given) is BERT.
    match value.get("architectures") {
        Some(Value::Array(names)) if names.iter().any(|n| n == ARCHITECTURE) => {}
        None | Some(Value::Null) => {
            if let Some(kind) = value.get("model_type").and_then(Value::as_str).filter(|&t| t != "bert") {
                return Err(invalid(format!("model type {kind} is not supported; {supported}")));
            }
        }
        Some(other) => {
            let names = match other {
                Value::Array(names) => names
                    .iter()
                    .map(|n| n.as_str().map_or_else(|| n.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(", "),
                v => v.to_string(),
            };
            return Err(invalid(format!("architecture {names} is not supported; {supported}")));
        }
    }
    let labels = num_labels(&value);
    if labels != 1 {
        return Err(invalid(format!(
            "the classifier has {labels} labels, but a reranker needs exactly 1 (one relevance logit per pair); \
             {supported}"
        )));
    }
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

/// The label count as transformers derives it: `num_labels` when present,
/// else the size of `id2label`, else its default of 2.
fn num_labels(config: &Value) -> usize {
    if let Some(n) = config.get("num_labels").and_then(Value::as_u64) {
        return usize::try_from(n).unwrap_or(usize::MAX);
    }
    match config.get("id2label") {
        Some(Value::Object(labels)) => labels.len(),
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_count_follows_transformers() {
        assert_eq!(num_labels(&json!({"num_labels": 1, "id2label": {"0": "A", "1": "B"}})), 1);
        assert_eq!(num_labels(&json!({"id2label": {"0": "LABEL_0"}})), 1);
        assert_eq!(num_labels(&json!({"id2label": {"0": "neg", "1": "pos"}})), 2);
        assert_eq!(num_labels(&json!({})), 2);
    }

    #[test]
    fn activation_maps_the_logit() {
        assert_eq!(Activation::None.apply(-2.5), -2.5);
        assert_eq!(Activation::Sigmoid.apply(0.0), 0.5);
        assert!((Activation::Sigmoid.apply(2.0) - 0.880_797_077_977_882_3).abs() < 1e-12);
        assert!(Activation::Sigmoid.apply(-200.0) >= 0.0 && Activation::Sigmoid.apply(200.0) <= 1.0);
        assert_eq!(Activation::default(), Activation::Sigmoid);
    }
}
