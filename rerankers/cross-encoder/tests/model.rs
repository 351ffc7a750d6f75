//! The reranker on a tiny random model that `tests/tiny_model.py` writes and
//! scores with numpy, on a real cross-encoder when `RR_CROSS_ENCODER_DIR`
//! names one, and its refusals. A test that needs what is absent (a python
//! with numpy, the MiniLM tokenizer, a real model) prints why it is skipped
//! and returns.

use std::path::Path;
use std::process::{Command, Stdio};

use rr_bert::BertError;
use rr_bert::test_util::{python_for, run_json};
use rr_core::registry::FactoryContext;
use rr_core::{CallContext, Registry, Reranker};
use rr_cross_encoder::{Activation, CrossEncoder, CrossEncoderError, CrossEncoderOptions};
use serde_json::json;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tiny_model.py");

/// Writes the tiny model into `dir` (`flags`: see the script), or says why
/// it cannot.
fn tiny_model(python: &Path, dir: &Path, flags: &[&str]) -> Result<(), String> {
    let output =
        Command::new(python).arg(SCRIPT).arg("write").arg(dir).args(flags).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    match output.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err(stderr),
        _ => panic!("tiny_model.py write failed: {stderr}"),
    }
}

/// `tiny_model.py reference`: the numpy logits of `pairs`, checked against
/// the encodings the Rust side made.
fn reference_logits(python: &Path, model: &CrossEncoder, pairs: &[(String, String)]) -> (Vec<f64>, String) {
    let encoded: Vec<(Vec<u32>, Vec<u32>)> = pairs.iter().map(|(q, d)| model.encode_pair(q, d).unwrap()).collect();
    let request = json!({
        "pairs": pairs,
        "ids": encoded.iter().map(|e| &e.0).collect::<Vec<_>>(),
        "type_ids": encoded.iter().map(|e| &e.1).collect::<Vec<_>>(),
        "max_length": model.max_length(),
    });
    let answer = run_json(python, SCRIPT, [Path::new("reference"), model.dir()], &request);
    let logits = serde_json::from_value(answer["logits"].clone()).unwrap();
    (logits, answer["tokenizer"].as_str().unwrap_or("?").to_owned())
}

/// Pairs with an empty document, accents and CJK (the BERT normaliser), code,
/// and one document long enough to be cut at the tiny model's 64 positions.
fn pairs() -> Vec<(String, String)> {
    let long = "fn parse_config(path: &Path) -> Result<Config, Error> { let text = read(path)?; } ".repeat(8);
    let q = "how is the config file parsed?";
    [
        (q, "The configuration is read from config.toml and parsed with serde."),
        (q, ""),
        ("crème brûlée recipe", "Crème brûlée, naïve café — 東京タワー"),
        (q, "def remove_user(user_id): db.delete(User, id=user_id)"),
        (q, long.as_str()),
        ("a", "b"),
    ]
    .into_iter()
    .map(|(q, d)| (q.to_owned(), d.to_owned()))
    .collect()
}

#[tokio::test]
async fn matches_the_numpy_reference_with_and_without_the_bert_prefix() {
    let Some(python) = python_for("tests/tiny_model.py") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (prefixed, bare) = (tmp.path().join("prefixed"), tmp.path().join("bare"));
    if let Err(reason) = tiny_model(&python, &prefixed, &[]) {
        eprintln!("SKIPPED: cannot make the tiny model ({reason}); scripts/setup-minilm installs the tokenizer");
        return;
    }
    tiny_model(&python, &bare, &["--no-prefix"]).unwrap();

    let pairs = pairs();
    let (query, documents) = (&pairs[0].0, pairs.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>());
    let mut reference = None;
    for dir in [&prefixed, &bare] {
        // Batches of 2 over length-sorted pairs: padding in every batch.
        let options = CrossEncoderOptions { batch_size: 2, activation: Activation::None, ..Default::default() };
        let model = CrossEncoder::from_dir(dir, &options).unwrap();
        assert_eq!(model.max_length(), 64, "512 capped at max_position_embeddings");

        let (ids, types) = model.encode_pair(&pairs[4].0, &pairs[4].1).unwrap();
        let query_ids = model.encode_pair(&pairs[4].0, "").unwrap().0;
        assert_eq!(ids.len(), 64, "the long pair is cut at 64");
        assert_eq!(ids[..query_ids.len() - 1], query_ids[..query_ids.len() - 1], "the query is kept whole");
        assert_eq!(types.iter().filter(|&&t| t == 0).count(), query_ids.len() - 1, "[CLS] query [SEP] are type 0");
        assert_eq!((ids[0], ids[63], types[63]), (101, 102, 1), "[CLS] … [SEP]");

        let (want, tokenizer) = reference_logits(&python, &model, &pairs);
        // One query for every document goes through `rerank`; the others are
        // scored pair by pair.
        let mut got: Vec<f64> = model.rerank(query, &documents, &CallContext::default()).await.unwrap();
        for (i, (q, d)) in pairs.iter().enumerate().filter(|(_, (q, _))| q != query) {
            got[i] = f64::from(model.logits_blocking(q, std::slice::from_ref(d)).unwrap()[0]);
        }
        let mut worst = 0f64;
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            assert!((got - want).abs() < 1e-4, "pair {i}: candle {got}, numpy {want}");
            worst = worst.max((got - want).abs());
        }
        let spread = want.iter().fold(f64::MIN, |a, &b| a.max(b)) - want.iter().fold(f64::MAX, |a, &b| a.min(b));
        assert!(spread > 0.5, "the random head should tell pairs apart: logits {want:?}");
        eprintln!("{}: {} pairs vs numpy ({tokenizer}): max abs diff {worst:.2e}", dir.display(), pairs.len());
        match &reference {
            None => reference = Some(got),
            Some(first) => assert_eq!(first, &got, "the same weights under both names"),
        }
    }

    // The default activation is the sigmoid of the same logits.
    let logits = reference.unwrap();
    let model = CrossEncoder::from_dir(&prefixed, &CrossEncoderOptions::default()).unwrap();
    assert_eq!((model.activation(), model.batch_size()), (Activation::Sigmoid, 16));
    let scores = model.rerank(query, &documents, &CallContext::default()).await.unwrap();
    for (i, (score, logit)) in scores.iter().zip(&logits).enumerate().filter(|(i, _)| pairs[*i].0 == *query) {
        assert!((score - 1.0 / (1.0 + (-logit).exp())).abs() < 1e-6, "pair {i}: {score} vs sigmoid({logit})");
    }
    assert!(model.rerank(query, &[], &CallContext::default()).await.unwrap().is_empty());
    assert_eq!(model.name(), "cross-encoder");
}

#[tokio::test]
async fn the_registry_builds_it_from_a_stores_section() {
    let Some(python) = python_for("tests/tiny_model.py") else { return };
    let tmp = tempfile::tempdir().unwrap();
    if let Err(reason) = tiny_model(&python, tmp.path(), &[]) {
        eprintln!("SKIPPED: cannot make the tiny model ({reason}); scripts/setup-minilm installs the tokenizer");
        return;
    }
    let registry = Registry::builtin().unwrap();
    let ctx = FactoryContext::new("t");
    let config = json!({"model_dir": tmp.path(), "max_length": 16, "batch_size": 1, "activation": "none"});
    let reranker = registry.reranker("cross-encoder", &config, &ctx).unwrap();
    let direct = CrossEncoder::from_dir(
        tmp.path(),
        &CrossEncoderOptions { max_length: 16, batch_size: 1, activation: Activation::None },
    )
    .unwrap();
    let docs: Vec<String> = pairs().into_iter().map(|(_, d)| d).collect();
    let got = reranker.rerank("how is the config file parsed?", &docs, &CallContext::default()).await.unwrap();
    let want = direct.logits_blocking("how is the config file parsed?", &docs).unwrap();
    assert_eq!(got, want.into_iter().map(f64::from).collect::<Vec<_>>());
    assert_eq!(direct.encode_pair("how is the config file parsed?", &docs[4]).unwrap().0.len(), 16);
}

fn write_folder(dir: &Path, config: serde_json::Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
    std::fs::write(dir.join("model.safetensors"), "").unwrap();
}

fn load_err(dir: &Path) -> String {
    CrossEncoder::from_dir(dir, &CrossEncoderOptions::default()).unwrap_err().to_string()
}

#[test]
fn missing_folder_and_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let nope = tmp.path().join("nope");
    let err = CrossEncoder::from_dir(&nope, &CrossEncoderOptions::default()).unwrap_err();
    assert!(matches!(err, CrossEncoderError::Model(BertError::NoFolder { .. })), "{err}");
    assert_eq!(err.to_string(), format!("cross-encoder model folder {} does not exist", nope.display()));

    let dir = tmp.path();
    assert_eq!(load_err(dir), format!("{} is not a cross-encoder model folder: config.json is missing", dir.display()));
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    assert_eq!(
        load_err(dir),
        format!("{} is not a cross-encoder model folder: tokenizer.json is missing", dir.display())
    );
    std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
    assert_eq!(
        load_err(dir),
        format!("{} is not a cross-encoder model folder: model.safetensors is missing", dir.display())
    );
    std::fs::write(dir.join("config.json"), "{not json").unwrap();
    std::fs::write(dir.join("model.safetensors"), "").unwrap();
    let err = load_err(dir);
    assert!(err.starts_with(&format!("{} is not usable: ", dir.join("config.json").display())), "{err}");
}

#[test]
fn other_architectures_are_refused_saying_what_is_supported() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config.json");
    write_folder(tmp.path(), json!({"architectures": ["XLMRobertaForSequenceClassification"], "num_labels": 1}));
    assert_eq!(
        load_err(tmp.path()),
        format!(
            "{} is not usable: architecture XLMRobertaForSequenceClassification is not supported; the cross-encoder \
             reranker runs BertForSequenceClassification models with one label \
             (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2)",
            config.display()
        )
    );
    write_folder(tmp.path(), json!({"model_type": "roberta", "id2label": {"0": "LABEL_0"}}));
    assert_eq!(
        load_err(tmp.path()),
        format!(
            "{} is not usable: model type roberta is not supported; the cross-encoder reranker runs \
             BertForSequenceClassification models with one label (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2)",
            config.display()
        )
    );
}

#[test]
fn two_labels_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_folder(
        tmp.path(),
        json!({"architectures": ["BertForSequenceClassification"], "id2label": {"0": "no", "1": "yes"}}),
    );
    assert_eq!(
        load_err(tmp.path()),
        format!(
            "{} is not usable: the classifier has 2 labels, but a reranker needs exactly 1 (one relevance logit \
             per pair); the cross-encoder reranker runs BertForSequenceClassification models with one label \
             (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2)",
            tmp.path().join("config.json").display()
        )
    );
}

/// A real cross-encoder (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) named by
/// `RR_CROSS_ENCODER_DIR`; none is installable from a package registry, so
/// this runs only where someone has put one.
#[tokio::test]
async fn a_real_model_ranks_the_relevant_passage_first() {
    let Some(dir) = std::env::var_os(rr_cross_encoder::ENV_DIR).filter(|d| !d.is_empty()) else {
        eprintln!("SKIPPED: RR_CROSS_ENCODER_DIR is not set (no real cross-encoder model folder here)");
        return;
    };
    let model = CrossEncoder::from_dir(&dir, &CrossEncoderOptions::default()).unwrap();
    let query = "How many people live in Berlin?";
    let documents: Vec<String> = [
        "The train to Lyon leaves at nine in the morning.",
        "Berlin has a population of 3,520,031 registered inhabitants in an area of 891.82 square kilometers.",
        "New York City is famous for the Metropolitan Museum of Art.",
    ]
    .map(String::from)
    .to_vec();
    let scores = model.rerank(query, &documents, &CallContext::default()).await.unwrap();
    eprintln!("{}: scores {scores:?}", Path::new(&dir).display());
    assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "sigmoid scores: {scores:?}");
    assert!(scores[1] > scores[0] && scores[1] > scores[2], "the Berlin passage should win: {scores:?}");
}

/// `cargo test -p rr-cross-encoder --release --test model -- --ignored --nocapture`:
/// pairs per second for a random model of ms-marco-MiniLM-L-6-v2's shape
/// (the cost does not depend on the weights), at two chunk sizes.
#[test]
#[ignore = "a measurement, not a check"]
fn throughput() {
    let Some(python) = python_for("tests/tiny_model.py") else { return };
    let tmp = tempfile::tempdir().unwrap();
    if let Err(reason) = tiny_model(&python, tmp.path(), &["--full-size"]) {
        eprintln!("SKIPPED: cannot make the model ({reason}); scripts/setup-minilm installs the tokenizer");
        return;
    }
    let model = CrossEncoder::from_dir(tmp.path(), &CrossEncoderOptions::default()).unwrap();
    let query = "how is the configuration file parsed?";
    let line = "fn parse_config(path: &Path) -> Result<Config, Error> { read(path) } ";
    for (label, repeat, n) in [("~128-token chunks", 6, 64), ("~512-token chunks (cut at 512)", 30, 32)] {
        let documents = vec![line.repeat(repeat); n];
        let tokens = model.encode_pair(query, &documents[0]).unwrap().0.len();
        model.logits_blocking(query, &documents[..4]).unwrap();
        let started = std::time::Instant::now();
        model.logits_blocking(query, &documents).unwrap();
        let secs = started.elapsed().as_secs_f64();
        eprintln!("{label} ({tokens} tokens per pair): {n} in {secs:.2}s = {:.1} pairs/s", n as f64 / secs);
    }
}
