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
//! The forward pass is CPU-bound, so [`Reranker::rerank`] runs it on tokio's
//! blocking pool. The weights are read into memory rather than memory-mapped:
//! mapping a file is `unsafe`, which this workspace forbids outside the plugin
//! loader.
//!
//! [`batch_size`]: CrossEncoderOptions::batch_size

mod registry;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{Device, Tensor};
use candle_nn::{Linear, Module, VarBuilder};
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use rr_core::{BackendError, CallContext, Reranker};
use serde::Deserialize;
use serde_json::Value;
use tokenizers::{EncodeInput, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The environment variable naming the model folder when the settings give
/// no `model_dir`.
pub const ENV_DIR: &str = "RR_CROSS_ENCODER_DIR";

/// The files a model folder must hold.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The one architecture (config.json `architectures`) that is run.
pub const ARCHITECTURE: &str = "BertForSequenceClassification";

/// Word pieces per pair unless configured (the ms-marco models' limit).
pub const DEFAULT_MAX_LENGTH: usize = 512;

/// Pairs per forward pass unless configured.
pub const DEFAULT_BATCH_SIZE: usize = 16;

/// `[CLS]`, two `[SEP]` and at least one word piece.
pub const MIN_MAX_LENGTH: usize = 4;

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
    #[error("cross-encoder model folder {} does not exist", .0.display())]
    NoFolder(PathBuf),
    #[error("{} is not a cross-encoder model folder: {file} is missing", dir.display())]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not usable: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("cannot load the weights in {}: {source}", path.display())]
    Weights { path: PathBuf, source: candle_core::Error },
    /// A setting out of range (named in the message).
    #[error("{0}")]
    Setting(String),
    #[error("tokenisation failed: {0}")]
    Tokenize(String),
    #[error("forward pass failed: {0}")]
    Forward(#[from] candle_core::Error),
}

/// The local cross-encoder reranker (see the crate docs). Cheap to clone: the
/// model is shared.
#[derive(Clone)]
pub struct CrossEncoder {
    model: Arc<Model>,
}

struct Model {
    dir: PathBuf,
    bert: BertModel,
    pooler: Linear,
    classifier: Linear,
    tokenizer: Tokenizer,
    pad_id: u32,
    max_length: usize,
    batch_size: usize,
    activation: Activation,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder")
            .field("dir", &self.model.dir)
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
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(CrossEncoderError::NoFolder(dir.to_owned()));
        }
        for file in REQUIRED_FILES {
            if !dir.join(file).is_file() {
                return Err(CrossEncoderError::MissingFile { dir: dir.to_owned(), file });
            }
        }

        let config_path = dir.join("config.json");
        let config = read_config(&config_path)?;
        let max_length = options.max_length.min(config.max_position_embeddings);

        let tokenizer_path = dir.join("tokenizer.json");
        let invalid_tokenizer =
            |e: tokenizers::Error| CrossEncoderError::Invalid { path: tokenizer_path.clone(), message: e.to_string() };
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(invalid_tokenizer)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(invalid_tokenizer)?;
        // Padding is done per batch in `forward`.
        tokenizer.with_padding(None);

        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path)
            .map_err(|source| CrossEncoderError::Io { path: weights_path.clone(), source })?;
        let weights = |source| CrossEncoderError::Weights { path: weights_path.clone(), source };
        let vb = VarBuilder::from_buffered_safetensors(bytes, DTYPE, &Device::Cpu).map_err(weights)?;
        // `BertForSequenceClassification` saves its encoder under `bert.`; a
        // bare export (the encoder at the top) is accepted too. The classifier
        // sits at the top in both.
        let encoder_vb =
            if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb.clone() };
        let hidden = config.hidden_size;
        let bert = BertModel::load(encoder_vb.clone(), &config).map_err(weights)?;
        let pooler = candle_nn::linear(hidden, hidden, encoder_vb.pp("pooler").pp("dense")).map_err(weights)?;
        let classifier = candle_nn::linear(hidden, 1, vb.pp("classifier")).map_err(weights)?;

        Ok(CrossEncoder {
            model: Arc::new(Model {
                dir: dir.to_owned(),
                bert,
                pooler,
                classifier,
                tokenizer,
                pad_id: u32::try_from(config.pad_token_id).unwrap_or(0),
                max_length,
                batch_size: options.batch_size,
                activation: options.activation,
            }),
        })
    }

    /// The model folder this reranker was loaded from.
    pub fn dir(&self) -> &Path {
        &self.model.dir
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
        let encoding = self
            .model
            .tokenizer
            .encode((query, document), true)
            .map_err(|e| CrossEncoderError::Tokenize(e.to_string()))?;
        Ok((encoding.get_ids().to_vec(), encoding.get_type_ids().to_vec()))
    }

    /// The raw logit of each `(query, document)` pair, in document order, on
    /// the calling thread.
    pub fn logits_blocking(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, CrossEncoderError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<EncodeInput> = documents.iter().map(|d| (query, d.as_str()).into()).collect();
        let encodings =
            self.model.tokenizer.encode_batch(inputs, true).map_err(|e| CrossEncoderError::Tokenize(e.to_string()))?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![0f32; documents.len()];
        for batch in order.chunks(self.model.batch_size) {
            let sequences: Vec<(&[u32], &[u32])> =
                batch.iter().map(|&i| (encodings[i].get_ids(), encodings[i].get_type_ids())).collect();
            let logits = self.forward(&sequences)?;
            for (&i, logit) in batch.iter().zip(logits) {
                out[i] = logit;
            }
        }
        Ok(out)
    }

    /// One score per document, in document order, on the calling thread:
    /// the logits with the configured [`Activation`]. CPU-bound;
    /// [`Reranker::rerank`] wraps it for async use.
    pub fn scores_blocking(&self, query: &str, documents: &[String]) -> Result<Vec<f64>, CrossEncoderError> {
        let activation = self.model.activation;
        Ok(self.logits_blocking(query, documents)?.into_iter().map(|l| activation.apply(l)).collect())
    }

    /// One forward pass over `(ids, type_ids)` sequences, right-padded to the
    /// longest: BERT, `[CLS]` → pooler (tanh) → classifier.
    fn forward(&self, sequences: &[(&[u32], &[u32])]) -> Result<Vec<f32>, CrossEncoderError> {
        let (batch, len) = (sequences.len(), sequences.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0));
        let mut ids = vec![self.model.pad_id; batch * len];
        let mut type_ids = vec![0u32; batch * len];
        let mut mask = vec![0u32; batch * len];
        for (row, (seq_ids, seq_types)) in sequences.iter().enumerate() {
            let at = row * len;
            ids[at..at + seq_ids.len()].copy_from_slice(seq_ids);
            type_ids[at..at + seq_types.len()].copy_from_slice(seq_types);
            mask[at..at + seq_ids.len()].fill(1);
        }
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (batch, len), &device)?;
        let type_ids = Tensor::from_vec(type_ids, (batch, len), &device)?;
        let mask = Tensor::from_vec(mask, (batch, len), &device)?;

        let hidden = self.model.bert.forward(&ids, &type_ids, Some(&mask))?; // (batch, len, dim)
        let cls = hidden.narrow(1, 0, 1)?.squeeze(1)?; // (batch, dim)
        let pooled = self.model.pooler.forward(&cls)?.tanh()?;
        let logits = self.model.classifier.forward(&pooled)?; // (batch, 1)
        Ok(logits.squeeze(1)?.to_vec1::<f32>()?)
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
fn read_config(path: &Path) -> Result<Config, CrossEncoderError> {
    let invalid = |message: String| CrossEncoderError::Invalid { path: path.to_owned(), message };
    let bytes = std::fs::read(path).map_err(|source| CrossEncoderError::Io { path: path.to_owned(), source })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;

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
