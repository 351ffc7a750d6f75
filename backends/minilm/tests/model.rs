//! The embedder on the real all-MiniLM-L6-v2 folder, when it is installed
//! (`scripts/test` installs it and sets `RR_MINILM_DIR`); otherwise each test
//! that needs it prints why it is skipped and returns.

use std::sync::OnceLock;

use rr_bert::test_util::{python_for, run_json};
use rr_core::{CallContext, Embedder};
use rr_minilm::{BertError, MiniLmEmbedder, MiniLmError};

/// The model, loaded once for all tests of this binary.
fn model() -> Option<&'static MiniLmEmbedder> {
    static MODEL: OnceLock<Result<MiniLmEmbedder, String>> = OnceLock::new();
    let loaded = MODEL.get_or_init(|| {
        let dir = rr_minilm::locate().map_err(|e| e.to_string())?;
        MiniLmEmbedder::from_dir(&dir).map_err(|e| e.to_string())
    });
    match loaded {
        Ok(model) => Some(model),
        Err(reason) => {
            eprintln!("SKIPPED: the all-MiniLM-L6-v2 model is not installed here ({reason})");
            None
        }
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// The sentences checked against the numpy reference: prefixes, code,
/// accents and CJK (the BERT normaliser), an empty input, and one long enough
/// to be truncated at 256 word pieces.
fn sentences() -> Vec<String> {
    let long = "fn parse_config(path: &Path) -> Result<Config, Error> { let text = read(path)?; } ".repeat(20);
    vec![
        "query: how do I open the embedded store?".into(),
        "passage: The embedded store keeps a full-text index of the chunks.".into(),
        "def remove_user(user_id): db.delete(User, id=user_id)".into(),
        "Crème brûlée, naïve café — 東京タワー".into(),
        String::new(),
        "a".into(),
        long,
    ]
}

#[test]
fn missing_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let err = MiniLmEmbedder::from_dir(tmp.path().join("nope")).unwrap_err();
    assert!(matches!(err, MiniLmError::Model(BertError::NoFolder { .. })), "{err}");
    assert!(err.to_string().ends_with("nope does not exist"), "{err}");

    std::fs::write(tmp.path().join("config.json"), "{}").unwrap();
    let err = MiniLmEmbedder::from_dir(tmp.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("{} is not a sentence-transformers model folder: tokenizer.json is missing", tmp.path().display())
    );
    std::fs::write(tmp.path().join("tokenizer.json"), "{}").unwrap();
    let err = MiniLmEmbedder::from_dir(tmp.path()).unwrap_err().to_string();
    assert!(err.ends_with("model.safetensors is missing"), "{err}");
    std::fs::write(tmp.path().join("model.safetensors"), "").unwrap();
    let err = MiniLmEmbedder::from_dir(tmp.path()).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{} is not usable: ", tmp.path().join("config.json").display())), "{err}");
}

#[test]
fn truncates_at_256_word_pieces_and_pads_per_batch() {
    let Some(model) = model() else { return };
    assert_eq!(model.dimension(), rr_minilm::DIMENSION);
    assert_eq!(model.max_seq_length(), 256, "sentence_bert_config.json says 256, tokenizer.json 128");
    let long = sentences().pop().unwrap();
    let ids = model.token_ids(&long).unwrap();
    assert_eq!(ids.len(), 256);
    assert_eq!((ids[0], ids[255]), (101, 102), "[CLS] … [SEP]");
    assert_eq!(model.token_ids("a").unwrap().len(), 3, "no padding in the tokenizer");

    // A short text batched with a long one (padded to 256) equals it alone.
    let alone = model.embed_blocking(&["passage: short".into()]).unwrap();
    let mixed = model.embed_blocking(&[long, "passage: short".into()]).unwrap();
    assert!(cosine(&alone[0], &mixed[1]) > 0.99999, "padding changed the vector");
    let max = alone[0].iter().zip(&mixed[1]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(max < 1e-5, "max abs diff {max}");
}

#[tokio::test]
async fn matches_the_numpy_reference() {
    let Some(model) = model() else { return };
    let Some(python) = python_for("tests/reference.py") else { return };
    let sentences = sentences();
    let ids: Vec<Vec<u32>> = sentences.iter().map(|s| model.token_ids(s).unwrap()).collect();
    let request = serde_json::json!({"sentences": sentences, "ids": ids});

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference.py");
    let answer = run_json(&python, script, [model.dir()], &request);
    let want: Vec<Vec<f32>> = serde_json::from_value(answer["embeddings"].clone()).unwrap();

    let got = model.embed(&sentences, &CallContext::default()).await.unwrap();
    assert_eq!(got.len(), want.len());
    let (mut worst_cos, mut worst_diff) = (1.0f64, 0.0f32);
    for ((sentence, got), want) in sentences.iter().zip(&got).zip(&want) {
        assert_eq!(got.len(), 384);
        let cos = cosine(got, want);
        let diff = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        let norm = got.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "not unit length: {norm}");
        assert!(cos > 0.9999 && diff < 1e-4, "cosine {cos}, max abs diff {diff} for {:?}", &sentence);
        worst_cos = worst_cos.min(cos);
        worst_diff = worst_diff.max(diff);
    }
    eprintln!(
        "{} sentences vs the numpy reference ({}): min cosine {worst_cos:.9}, max abs diff {worst_diff:.2e}",
        sentences.len(),
        answer["tokenizer"].as_str().unwrap_or("?")
    );
}

#[tokio::test]
async fn paraphrases_are_closer_than_an_unrelated_sentence() {
    let Some(model) = model() else { return };
    let texts: Vec<String> = [
        "passage: How do I delete a user account?",
        "passage: What is the way to remove a user's profile?",
        "passage: The train to Lyon leaves at nine in the morning.",
    ]
    .map(String::from)
    .to_vec();
    let v = model.embed(&texts, &CallContext::default()).await.unwrap();
    let (para, unrelated) = (cosine(&v[0], &v[1]), cosine(&v[0], &v[2]));
    eprintln!("paraphrase cosine {para:.3}, unrelated {unrelated:.3}");
    assert!(para > unrelated + 0.2, "paraphrase {para} vs unrelated {unrelated}");
    assert_eq!(model.name(), "minilm");
    assert!(model.embed(&[], &CallContext::default()).await.unwrap().is_empty());
}

/// `cargo test -p rr-minilm --release --test model -- --ignored --nocapture`:
/// sentences per second for short queries and for chunk-sized passages.
#[test]
#[ignore = "a measurement, not a check"]
fn throughput() {
    let Some(model) = model() else { return };
    let chunk = "passage: fn parse_config(path: &Path) -> Result<Config, Error> { read(path) } ".repeat(12);
    for (label, text, n) in
        [("query (~12 tokens)", "query: how is the store opened?".to_owned(), 512), ("chunk (256 tokens)", chunk, 128)]
    {
        let inputs = vec![text; n];
        model.embed_blocking(&inputs[..8]).unwrap();
        let started = std::time::Instant::now();
        model.embed_blocking(&inputs).unwrap();
        let secs = started.elapsed().as_secs_f64();
        eprintln!("{label}: {n} in {secs:.2}s = {:.1} sentences/s", n as f64 / secs);
    }
}

/// The `minilm` kind of the registry (what a stores file's `embedder = { kind = "minilm" }` and an
/// embedded store written with minilm get) loads the same model, and names a folder it cannot use.
#[tokio::test]
async fn the_registry_kind_loads_the_model_and_names_a_bad_folder() {
    let registry = rr_core::Registry::builtin().unwrap();
    let ctx = rr_core::FactoryContext::new("test");
    let missing = serde_json::json!({ "dir": "/nonexistent/minilm" });
    let err = registry.embedder("minilm", &missing, &ctx).err().unwrap().to_string();
    assert!(err.starts_with("embedder \"minilm\": ") && err.contains("/nonexistent/minilm"), "{err}");
    let unknown = serde_json::json!({ "model": "x" });
    let err = registry.embedder("minilm", &unknown, &ctx).err().unwrap().to_string();
    assert!(err.contains("unknown field `model`"), "{err}");
    let Some(model) = model() else { return };
    let built = registry.embedder("minilm", &serde_json::json!({ "dir": model.dir() }), &ctx).unwrap();
    assert_eq!((built.name(), built.dimension()), ("minilm", Some(rr_minilm::DIMENSION)));
    let input = vec!["query: open the store".to_owned()];
    let ctx = CallContext::default();
    assert_eq!(built.embed(&input, &ctx).await.unwrap(), model.embed(&input, &ctx).await.unwrap());
}
