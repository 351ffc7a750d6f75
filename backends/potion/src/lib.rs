//! The built-in `potion` embedder: a static embedding model compiled into
//! the binary, so that a new store gets vectors that carry meaning with
//! nothing to install and nothing to download.
//!
//! A static model has no transformer to run: it holds one vector per
//! vocabulary token, distilled from a sentence transformer, and a text's
//! vector is the mean of its tokens' vectors, normalised. The model here is
//! potion-base-8M (model2vec, MIT), 29,528 WordPiece tokens of 256 dimensions,
//! stored as int8 with a scale per token (`model/`, written by
//! `scripts/make-potion`). Embedding costs a tokenisation and a sum; a chunk
//! takes microseconds, so indexing a repository stays as fast as with the
//! lexical `hash` embedder.
//!
//! Texts are embedded the way model2vec does it: the tokenizer's normaliser
//! and word splitting, no special tokens, unknown tokens dropped, the first
//! [`MAX_TOKENS`] tokens kept. A text with no known token gets the zero
//! vector (it is close to nothing).
//!
//! [`MODEL_FOLDER_VAR`] names a folder holding another model of the same
//! layout (`model.safetensors` with int8 `embeddings` and float32 `scales`,
//! `tokenizer.json`), used in place of the compiled-in one: this is how a
//! model written by `scripts/train-code-model` is scored before it is
//! compiled in. A store records only the embedder's name, so a store built
//! this way must be searched with the same folder set.

mod registry;
mod wordpiece;

use std::borrow::Cow;
use std::sync::OnceLock;

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Embedder};
use safetensors::{Dtype, SafeTensors};
use tokenizers::Tokenizer;

/// The vectors' dimension.
pub const DIMENSION: usize = 256;
/// Tokens of a text that count, as model2vec's `encode` keeps by default.
pub const MAX_TOKENS: usize = 512;
/// Text read per token kept: the tokenizer never sees more than
/// `MAX_TOKENS * CHARS_PER_TOKEN` characters of a text, since it would drop
/// the tokens past [`MAX_TOKENS`] anyway.
const CHARS_PER_TOKEN: usize = 12;
/// Batches up to this size are embedded without leaving the async task.
const INLINE_BATCH: usize = 16;

static WEIGHTS: &[u8] = include_bytes!("../model/model.safetensors");
static TOKENIZER: &[u8] = include_bytes!("../model/tokenizer.json");

/// The environment variable naming a model folder to use in place of the
/// compiled-in model.
pub const MODEL_FOLDER_VAR: &str = "REPO_RETRIEVER_POTION_MODEL";
/// The largest model file read from a folder: a static model of this
/// layout is tens of megabytes.
const MAX_MODEL_FILE_BYTES: u64 = 256 << 20;

/// Why the model could not be read: a folder named by [`MODEL_FOLDER_VAR`]
/// that does not hold a model of this layout, or a build from a damaged
/// checkout.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the potion model is unusable: {0}")]
pub struct PotionError(String);

/// The model, parsed once per process.
struct Model {
    /// The full tokenizer, for texts [`Model::ascii`] does not take (not
    /// ASCII, or holding an added token): parsed from its JSON on the first
    /// such text, so a process embedding ASCII queries never pays for it.
    tokenizer: OnceLock<Result<Tokenizer, PotionError>>,
    /// The tokenizer's JSON, which [`Model::tokenizer`] parses.
    tokenizer_json: &'static [u8],
    ascii: wordpiece::AsciiWordPiece,
    /// The contents of the tokenizer's added tokens (`[CLS]`, …), which it
    /// matches before normalising: a text holding one is not for `ascii`.
    added: Vec<String>,
    /// Row-major `vocabulary x DIMENSION` int8 vectors, as bytes of the
    /// weights (compiled in, or read from a model folder).
    vectors: &'static [u8],
    scales: Vec<f32>,
    unknown: Option<u32>,
}

/// What the ASCII path reads of `tokenizer.json`; serde skips the rest.
#[derive(serde::Deserialize)]
struct TokenizerFile<'a> {
    #[serde(borrow)]
    added_tokens: Vec<AddedToken<'a>>,
    #[serde(borrow)]
    model: WordPieceFile<'a>,
}

#[derive(serde::Deserialize)]
struct AddedToken<'a> {
    #[serde(borrow)]
    content: Cow<'a, str>,
}

#[derive(serde::Deserialize)]
struct WordPieceFile<'a> {
    #[serde(borrow)]
    vocab: Vocab<'a>,
}

/// The vocabulary's (token, id) pairs in the file's order, each token
/// borrowed from the file unless it holds an escape.
struct Vocab<'a>(Vec<(Cow<'a, str>, u32)>);

/// A string borrowed from the input where it can be.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Vocab<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Vocab<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of tokens to ids")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Vocab<'a>, M::Error> {
                let mut tokens = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((Text(token), id)) = map.next_entry::<Text<'de>, u32>()? {
                    tokens.push((token, id));
                }
                Ok(Vocab(tokens))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

fn model() -> Result<&'static Model, PotionError> {
    static MODEL: OnceLock<Result<Model, PotionError>> = OnceLock::new();
    MODEL
        .get_or_init(|| match std::env::var_os(MODEL_FOLDER_VAR) {
            Some(folder) if !folder.is_empty() => load_folder(std::path::Path::new(&folder)),
            _ => load(WEIGHTS, TOKENIZER),
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The model in `folder`: its `model.safetensors` and `tokenizer.json`,
/// kept for the life of the process as the compiled-in model is.
fn load_folder(folder: &std::path::Path) -> Result<Model, PotionError> {
    let read = |name: &str| {
        let path = folder.join(name);
        let size = std::fs::metadata(&path).map_err(|e| PotionError(format!("{}: {e}", path.display())))?.len();
        if size > MAX_MODEL_FILE_BYTES {
            return Err(PotionError(format!("{}: {size} bytes, more than {MAX_MODEL_FILE_BYTES}", path.display())));
        }
        let bytes = std::fs::read(&path).map_err(|e| PotionError(format!("{}: {e}", path.display())))?;
        // Read once per process (the model is a process-wide static).
        Ok::<&'static [u8], PotionError>(Box::leak(bytes.into_boxed_slice()))
    };
    load(read("model.safetensors")?, read("tokenizer.json")?)
        .map_err(|e| PotionError(format!("{} ({MODEL_FOLDER_VAR}): {}", folder.display(), e.0)))
}

fn bad(what: &str, e: &dyn std::fmt::Display) -> PotionError {
    PotionError(format!("{what}: {e}"))
}

fn load(weights: &'static [u8], tokenizer_json: &'static [u8]) -> Result<Model, PotionError> {
    let tensors = SafeTensors::deserialize(weights).map_err(|e| bad("weights", &e))?;
    let embeddings = tensors.tensor("embeddings").map_err(|e| bad("embeddings", &e))?;
    let scales = tensors.tensor("scales").map_err(|e| bad("scales", &e))?;
    let rows = match (embeddings.dtype(), embeddings.shape(), scales.dtype(), scales.shape()) {
        (Dtype::I8, &[rows, DIMENSION], Dtype::F32, &[n]) if n == rows => rows,
        other => return Err(PotionError(format!("unexpected tensors {other:?}"))),
    };
    let vectors = embeddings.data();
    let scales = scales.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let file: TokenizerFile<'_> = serde_json::from_slice(tokenizer_json).map_err(|e| bad("tokenizer", &e))?;
    let vocab = file.model.vocab.0;
    if let Some((_, id)) = vocab.iter().find(|&&(_, id)| id as usize >= rows) {
        return Err(PotionError(format!("token {id} for {rows} vectors")));
    }
    let unknown = vocab.iter().find(|(token, _)| token == "[UNK]").map(|&(_, id)| id);
    let added = file.added_tokens.into_iter().map(|t| t.content.into_owned()).collect();
    let ascii = wordpiece::AsciiWordPiece::new(vocab);
    Ok(Model { tokenizer: OnceLock::new(), tokenizer_json, ascii, added, vectors, scales, unknown })
}

impl Model {
    fn tokenizer(&self) -> Result<&Tokenizer, PotionError> {
        self.tokenizer
            .get_or_init(|| Tokenizer::from_bytes(self.tokenizer_json).map_err(|e| bad("tokenizer", &e)))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The token ids of `text` as the model's tokenizer gives them, with
    /// no special tokens.
    fn token_ids(&self, text: &str) -> Result<Vec<u32>, PotionError> {
        let mut ids = Vec::new();
        if let Some(unknown) = self.unknown
            && !self.added.iter().any(|token| text.contains(token.as_str()))
            && self.ascii.ids(text, unknown, &mut ids).is_some()
        {
            return Ok(ids);
        }
        let encoding =
            self.tokenizer()?.encode_fast(text, false).map_err(|e| PotionError(format!("tokenisation: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    fn embed(&self, text: &str) -> Result<Vec<f32>, PotionError> {
        let text = match text.char_indices().nth(MAX_TOKENS * CHARS_PER_TOKEN) {
            Some((end, _)) => &text[..end],
            None => text,
        };
        let mut sum = [0f32; DIMENSION];
        let mut count = 0usize;
        for id in self.token_ids(text)?.into_iter().filter(|&id| Some(id) != self.unknown).take(MAX_TOKENS) {
            let row = id as usize;
            let scale = self.scales[row];
            let vector = &self.vectors[row * DIMENSION..(row + 1) * DIMENSION];
            for (s, &q) in sum.iter_mut().zip(vector) {
                *s += scale * f32::from(q as i8);
            }
            count += 1;
        }
        // The mean's length is irrelevant once normalised: divide once.
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if count == 0 || norm == 0.0 {
            return Ok(vec![0.0; DIMENSION]);
        }
        Ok(sum.iter().map(|x| x / norm).collect())
    }
}

/// The static embedder over the compiled-in potion-base-8M.
#[derive(Clone, Copy)]
pub struct PotionEmbedder {
    model: &'static Model,
}

impl std::fmt::Debug for PotionEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PotionEmbedder").field("dimension", &DIMENSION).finish()
    }
}

impl PotionEmbedder {
    /// The embedder; the model is parsed on the first call of the process.
    pub fn new() -> Result<Self, PotionError> {
        Ok(PotionEmbedder { model: model()? })
    }

    /// The unit vector of `text` (the zero vector when no token is known).
    pub fn embed_text(&self, text: &str) -> Result<Vec<f32>, PotionError> {
        self.model.embed(text)
    }

    fn embed_all(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, BackendError> {
        inputs
            .iter()
            .map(|text| self.embed_text(text))
            .collect::<Result<_, _>>()
            .map_err(|e| BackendError::new("potion", e.to_string()))
    }
}

#[async_trait]
impl Embedder for PotionEmbedder {
    fn name(&self) -> &str {
        "potion"
    }

    fn dimension(&self) -> Option<usize> {
        Some(DIMENSION)
    }

    /// Its neighbours find the file that does what a question asks when
    /// the words differ, which the lexical ranking (weight 4) cannot. On
    /// the dev half of semble's suite, weight 2 scores 0.841 against 0.836
    /// at 1 (0.844 at 3, which costs the chunk-level sets of testdata/eval
    /// 0.015 MRR@10 more): docs/evaluation.md, "The embedder".
    fn hybrid_weight_dense(&self) -> f64 {
        2.0
    }

    /// Small batches (queries) are embedded inline; larger ones on tokio's
    /// blocking pool, so indexing does not stall the runtime.
    async fn embed(&self, inputs: &[String], _ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        if inputs.len() <= INLINE_BATCH {
            return self.embed_all(inputs);
        }
        let (embedder, inputs) = (*self, inputs.to_vec());
        tokio::task::spawn_blocking(move || embedder.embed_all(&inputs))
            .await
            .map_err(|e| BackendError::new("potion", format!("potion embedding failed: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under the workspace's `testdata/` and source folders, cut
    /// into 2 KB windows: real code and prose in many languages.
    fn texts() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut texts = Vec::new();
        let mut folders: Vec<_> =
            ["testdata", "core/src", "indexer/src", "scripts"].iter().map(|f| root.join(f)).collect();
        while let Some(dir) = folders.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    let chars: Vec<char> = text.chars().collect();
                    texts.extend(chars.chunks(2048).map(|c| c.iter().collect::<String>()));
                }
            }
        }
        texts
    }

    #[test]
    fn the_ascii_path_gives_the_tokenizers_ids() {
        let model = model().unwrap();
        let unknown = model.unknown.unwrap();
        let mut compared = 0;
        let mut samples = texts();
        samples.extend(
            ["a\x01b\x0bc\x7fd", "snake_case camelCaseWord HTTPServer", "x".repeat(101).as_str(), "[CLS] a [MASK]", ""]
                .map(String::from),
        );
        for text in &samples {
            let mut fast = Vec::new();
            if model.added.iter().any(|t| text.contains(t.as_str()))
                || model.ascii.ids(text, unknown, &mut fast).is_none()
            {
                continue;
            }
            let reference = model.tokenizer().unwrap().encode_fast(text.as_str(), false).unwrap();
            assert_eq!(fast, reference.get_ids(), "{text:?}");
            compared += 1;
        }
        assert!(compared > 500, "only {compared} ASCII texts compared");
    }

    #[test]
    fn a_model_folder_loads_as_the_compiled_in_model_does() {
        let folder = std::env::temp_dir().join(format!("rr-potion-folder-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("model.safetensors"), WEIGHTS).unwrap();
        std::fs::write(folder.join("tokenizer.json"), TOKENIZER).unwrap();
        let loaded = load_folder(&folder).unwrap();
        let text = "read and validate the configuration file";
        assert_eq!(loaded.embed(text).unwrap(), model().unwrap().embed(text).unwrap());
        std::fs::remove_file(folder.join("tokenizer.json")).unwrap();
        let error = load_folder(&folder).err().unwrap().to_string();
        assert!(error.contains("tokenizer.json"), "{error}");
        std::fs::write(folder.join("tokenizer.json"), TOKENIZER).unwrap();
        std::fs::write(folder.join("model.safetensors"), b"not a model").unwrap();
        let error = load_folder(&folder).err().unwrap().to_string();
        assert!(error.contains(MODEL_FOLDER_VAR) && error.contains("weights"), "{error}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_text_is_a_unit_vector_and_an_unknown_one_is_zero() {
        let embedder = PotionEmbedder::new().unwrap();
        let v = embedder.embed_text("parse the configuration file").unwrap();
        assert_eq!(v.len(), DIMENSION);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert_eq!(embedder.embed_text("").unwrap(), vec![0.0; DIMENSION]);
        assert_eq!(embedder.embed_text("\u{1F600}").unwrap(), vec![0.0; DIMENSION]);
        // Non-ASCII text goes through the tokenizer: accents are stripped.
        assert_eq!(embedder.embed_text("café").unwrap(), embedder.embed_text("cafe").unwrap());
    }

    /// Cosines of the float32 model as model2vec computes them (its
    /// tokenizer with no special tokens, unknown tokens dropped, mean of the
    /// rows, normalised), from potion-base-8M's own `model.safetensors`.
    #[test]
    fn cosines_match_the_float_model() {
        let embedder = PotionEmbedder::new().unwrap();
        for (a, b, expected) in [
            ("fn parse_config(path: &Path) -> Result<Config>", "read and validate the configuration file", 0.4277),
            ("class HttpClient: def get(self, url): ...", "send an HTTP GET request", 0.4229),
            ("delete a user account", "render a chart of monthly sales", 0.1352),
        ] {
            let (a, b) = (embedder.embed_text(a).unwrap(), embedder.embed_text(b).unwrap());
            let cosine = a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>();
            assert!((cosine - expected).abs() < 2e-3, "{cosine} against {expected}");
        }
    }

    #[test]
    fn texts_that_mean_the_same_are_closer_than_texts_that_do_not() {
        let embedder = PotionEmbedder::new().unwrap();
        let cosine = |a: &str, b: &str| {
            let (a, b) = (embedder.embed_text(a).unwrap(), embedder.embed_text(b).unwrap());
            a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()
        };
        let same = cosine("delete a user account", "remove the customer's profile");
        let other = cosine("delete a user account", "render a chart of monthly sales");
        assert!(same > other + 0.1, "same {same}, other {other}");
    }
}
