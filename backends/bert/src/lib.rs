//! The BERT plumbing of the local candle models: the `minilm` embedder
//! (rr-minilm) and the `cross-encoder` reranker (rr-cross-encoder).
//!
//! Both run a BERT encoder from a Hugging Face model folder on the CPU; they
//! differ in the files they read around it and in the head on top of it (mean
//! pooling, or `[CLS]` → pooler → classifier). What they share lives here, so
//! that a fix to the folder checks, the tokenizer limits or the batching
//! reaches both:
//!
//! - [`ModelFolder`] checks the folder and its [`REQUIRED_FILES`] before
//!   anything is parsed, and reads its JSON files, tokenizer and weights with
//!   errors that name the broken file. Each model names its folder its own
//!   way in those errors ([`FolderKind`]): the messages are part of each
//!   crate's contract.
//! - **The model's limits, not the file's.** A `tokenizer.json` often fixes
//!   truncation *and padding* (all-MiniLM-L6-v2's at 128 tokens).
//!   [`ModelFolder::tokenizer`] replaces both: truncation at the caller's
//!   limit, longest side first for a pair so a long document cannot push the
//!   query out, and no padding.
//! - **Length-sorted batches.** [`Encoder::run`] tokenises its inputs
//!   together, sorts them by length and runs them in batches padded to the
//!   longest of each batch under an attention mask, so short inputs never pay
//!   for a long one (attention costs `len²`); the head's outputs come back in
//!   input order.
//!
//! The weights are read into memory rather than memory-mapped: mapping a file
//! is `unsafe`, which this workspace forbids outside the plugin loader.

#[cfg(feature = "test-util")]
pub mod test_util;

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use serde::de::DeserializeOwned;
use tokenizers::{EncodeInput, Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The files a model folder must hold.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// How the errors of one model name its folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderKind {
    /// Names a folder that does not exist: `"{name} {dir} does not exist"`.
    pub name: &'static str,
    /// What a folder without a required file is not:
    /// `"{dir} is not a {what}: {file} is missing"`.
    pub what: &'static str,
}

/// What can go wrong loading or running a BERT model.
#[derive(Debug, thiserror::Error)]
pub enum BertError {
    #[error("{} {} does not exist", .kind.name, .dir.display())]
    NoFolder { kind: FolderKind, dir: PathBuf },
    #[error("{} is not a {}: {file} is missing", .dir.display(), .kind.what)]
    MissingFile { kind: FolderKind, dir: PathBuf, file: &'static str },
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
}

/// A model folder that holds the [`REQUIRED_FILES`].
#[derive(Debug, Clone)]
pub struct ModelFolder {
    dir: PathBuf,
}

impl ModelFolder {
    /// Checks that `dir` is a folder holding the [`REQUIRED_FILES`]; the
    /// error names the folder as `kind` says, and the first missing file.
    pub fn open(dir: &Path, kind: FolderKind) -> Result<Self, BertError> {
        if !dir.is_dir() {
            return Err(BertError::NoFolder { kind, dir: dir.to_owned() });
        }
        if let Some(file) = REQUIRED_FILES.into_iter().find(|file| !dir.join(file).is_file()) {
            return Err(BertError::MissingFile { kind, dir: dir.to_owned(), file });
        }
        Ok(ModelFolder { dir: dir.to_owned() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `config.json`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.json")
    }

    /// The `tokenizer.json` of the folder, truncating at `max_length` word
    /// pieces (special tokens included, the longer side of a pair first) and
    /// not padding: [`Encoder::run`] pads per batch.
    pub fn tokenizer(&self, max_length: usize) -> Result<Tokenizer, BertError> {
        let path = self.dir.join("tokenizer.json");
        let invalid = |e: tokenizers::Error| BertError::Invalid { path: path.clone(), message: e.to_string() };
        let mut tokenizer = Tokenizer::from_file(&path).map_err(invalid)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(invalid)?;
        tokenizer.with_padding(None);
        Ok(tokenizer)
    }

    /// Reads `model.safetensors` and hands its tensors to `build`; what
    /// `build` fails on (a missing tensor, a wrong shape) is reported as an
    /// error of that file.
    pub fn weights<T>(
        &self,
        build: impl FnOnce(VarBuilder<'static>) -> candle_core::Result<T>,
    ) -> Result<T, BertError> {
        let path = self.dir.join("model.safetensors");
        let bytes = std::fs::read(&path).map_err(|source| BertError::Io { path: path.clone(), source })?;
        let weights = |source| BertError::Weights { path: path.clone(), source };
        let vb = VarBuilder::from_buffered_safetensors(bytes, DTYPE, &Device::Cpu).map_err(weights)?;
        build(vb).map_err(weights)
    }
}

/// Reads and parses a JSON file; the error names the file.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, BertError> {
    let bytes = std::fs::read(path).map_err(|source| BertError::Io { path: path.to_owned(), source })?;
    serde_json::from_slice(&bytes).map_err(|e| BertError::Invalid { path: path.to_owned(), message: e.to_string() })
}

/// A loaded BERT encoder and its tokenizer, run in length-sorted batches.
pub struct Encoder {
    bert: BertModel,
    tokenizer: Tokenizer,
    pad_id: u32,
}

impl Encoder {
    /// `tokenizer` as [`ModelFolder::tokenizer`] sets it up; padding uses
    /// the `pad_token_id` of `config`.
    pub fn new(bert: BertModel, tokenizer: Tokenizer, config: &Config) -> Self {
        Encoder { bert, tokenizer, pad_id: u32::try_from(config.pad_token_id).unwrap_or(0) }
    }

    /// What the model sees for one input (a text, or a pair): special tokens
    /// added, truncated, unpadded.
    pub fn encode<'s>(&self, input: impl Into<EncodeInput<'s>>) -> Result<Encoding, BertError> {
        self.tokenizer.encode(input, true).map_err(|e| BertError::Tokenize(e.to_string()))
    }

    /// Encodes `inputs`, runs them through BERT in length-sorted batches of
    /// at most `batch_size`, and each batch's last hidden states
    /// `(batch, len, dim)` and attention mask `(batch, len)` (`u32`, 1 for a
    /// real token) through `head`, which returns one output per row. The
    /// outputs come back in input order.
    pub fn run<'s, I, T>(
        &self,
        inputs: Vec<I>,
        batch_size: usize,
        head: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Vec<T>>,
    ) -> Result<Vec<T>, BertError>
    where
        I: Into<EncodeInput<'s>> + Send,
        T: Default,
    {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.tokenizer.encode_batch(inputs, true).map_err(|e| BertError::Tokenize(e.to_string()))?;
        let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        in_length_order(&lengths, batch_size, |batch| {
            let sequences: Vec<(&[u32], &[u32])> =
                batch.iter().map(|&i| (encodings[i].get_ids(), encodings[i].get_type_ids())).collect();
            let padded = Padded::new(&sequences, self.pad_id);
            let (device, shape) = (Device::Cpu, (sequences.len(), padded.len));
            let ids = Tensor::from_vec(padded.ids, shape, &device)?;
            let type_ids = Tensor::from_vec(padded.type_ids, shape, &device)?;
            let mask = Tensor::from_vec(padded.mask, shape, &device)?;
            let hidden = self.bert.forward(&ids, &type_ids, Some(&mask))?;
            Ok(head(&hidden, &mask)?)
        })
    }
}

/// Calls `run` on the indices of `lengths` in batches of at most
/// `batch_size`, shortest first (ties in input order), and puts each output
/// back at its index.
fn in_length_order<T: Default, E>(
    lengths: &[usize],
    batch_size: usize,
    mut run: impl FnMut(&[usize]) -> Result<Vec<T>, E>,
) -> Result<Vec<T>, E> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut out: Vec<T> = std::iter::repeat_with(T::default).take(lengths.len()).collect();
    // `chunks(0)` would panic; the callers validate their batch size, this
    // keeps a zero from reaching it anyway.
    for batch in order.chunks(batch_size.max(1)) {
        for (&i, value) in batch.iter().zip(run(batch)?) {
            out[i] = value;
        }
    }
    Ok(out)
}

/// `(ids, type_ids)` sequences right-padded to the longest, row-major.
#[derive(Debug, PartialEq)]
struct Padded {
    len: usize,
    ids: Vec<u32>,
    type_ids: Vec<u32>,
    mask: Vec<u32>,
}

impl Padded {
    fn new(sequences: &[(&[u32], &[u32])], pad_id: u32) -> Self {
        let len = sequences.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
        let cells = sequences.len() * len;
        let mut padded = Padded { len, ids: vec![pad_id; cells], type_ids: vec![0; cells], mask: vec![0; cells] };
        for (row, (ids, type_ids)) in sequences.iter().enumerate() {
            let at = row * len;
            padded.ids[at..at + ids.len()].copy_from_slice(ids);
            padded.type_ids[at..at + type_ids.len()].copy_from_slice(type_ids);
            padded.mask[at..at + ids.len()].fill(1);
        }
        padded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: FolderKind = FolderKind { name: "test model folder", what: "test model folder" };

    #[test]
    fn the_folder_and_its_files_are_named_as_the_kind_says() {
        let tmp = tempfile::tempdir().unwrap();
        let nope = tmp.path().join("nope");
        let kind = FolderKind { name: "model folder", what: "sentence-transformers model folder" };
        let err = ModelFolder::open(&nope, kind).unwrap_err();
        assert_eq!(err.to_string(), format!("model folder {} does not exist", nope.display()));

        let dir = tmp.path();
        for file in REQUIRED_FILES {
            let err = ModelFolder::open(dir, kind).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("{} is not a sentence-transformers model folder: {file} is missing", dir.display())
            );
            std::fs::write(dir.join(file), "{}").unwrap();
        }
        let folder = ModelFolder::open(dir, KIND).unwrap();
        assert_eq!((folder.dir(), folder.config_path()), (dir, dir.join("config.json")));
    }

    #[test]
    fn broken_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        for file in REQUIRED_FILES {
            std::fs::write(tmp.path().join(file), "{not json").unwrap();
        }
        let folder = ModelFolder::open(tmp.path(), KIND).unwrap();
        let path = folder.config_path();
        let err = read_json::<serde_json::Value>(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{} is not usable: ", path.display())), "{err}");
        let missing = tmp.path().join("absent.json");
        let err = read_json::<serde_json::Value>(&missing).unwrap_err().to_string();
        assert!(err.starts_with(&format!("cannot read {}: ", missing.display())), "{err}");

        let err = folder.tokenizer(8).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{} is not usable: ", tmp.path().join("tokenizer.json").display())), "{err}");
        let err = folder.weights(|_| Ok(())).unwrap_err().to_string();
        let weights = tmp.path().join("model.safetensors");
        assert!(err.starts_with(&format!("cannot load the weights in {}: ", weights.display())), "{err}");
    }

    #[test]
    fn batches_run_shortest_first_and_outputs_come_back_in_input_order() {
        let lengths = [5, 2, 9, 2, 7];
        let mut batches = Vec::new();
        let out = in_length_order(&lengths, 2, |batch| {
            batches.push(batch.to_vec());
            Ok::<_, ()>(batch.iter().map(|&i| lengths[i] * 10).collect())
        })
        .unwrap();
        assert_eq!(batches, [vec![1, 3], vec![0, 4], vec![2]]);
        assert_eq!(out, [50, 20, 90, 20, 70]);

        let out = in_length_order(&lengths, 0, |batch| Ok::<_, ()>(vec![batch[0]])).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4], "a zero batch size runs one at a time");
        assert_eq!(in_length_order(&lengths, 2, |_| Err::<Vec<u8>, _>("boom")), Err("boom"));
    }

    #[test]
    fn sequences_are_right_padded_under_the_mask() {
        let padded = Padded::new(&[(&[101, 7, 102], &[0, 0, 0]), (&[101, 102], &[0, 1])], 9);
        assert_eq!(
            padded,
            Padded {
                len: 3,
                ids: vec![101, 7, 102, 101, 102, 9],
                type_ids: vec![0, 0, 0, 0, 1, 0],
                mask: vec![1, 1, 1, 1, 1, 0]
            }
        );
    }
}
