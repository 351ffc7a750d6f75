//! The embedder against the vectors the reference server wrote for the 89
//! fixture records (each the embedding of `"passage: " + document`).

use rr_core::{CallContext, Embedder};
use rr_hash_embed::HashEmbedder;

fn fixture() -> Vec<(String, Vec<f32>)> {
    let records = rr_testkit::fixture_records();
    records.iter().map(|r| (r["document"].as_str().unwrap().to_owned(), rr_testkit::record_embedding(r))).collect()
}

#[tokio::test]
async fn reproduces_all_89_fixture_embeddings() {
    let records = fixture();
    assert_eq!(records.len(), 89);
    let embedder = HashEmbedder::default();
    assert_eq!(embedder.name(), "hash");
    let inputs: Vec<String> = records.iter().map(|(doc, _)| format!("passage: {doc}")).collect();
    let vectors = embedder.embed(&inputs, &CallContext::default()).await.unwrap();
    assert_eq!(vectors.len(), 89);
    let mut max_diff = 0.0f32;
    let mut exact = 0;
    for ((doc, want), got) in records.iter().zip(&vectors) {
        assert_eq!(got.len(), want.len());
        let diff = want.iter().zip(got).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(diff < 1e-6, "max diff {diff} for {:?}", &doc[..doc.len().min(60)]);
        max_diff = max_diff.max(diff);
        exact += usize::from(want == got);
    }
    eprintln!("max abs diff {max_diff:e}; {exact}/89 vectors bit-identical as f32");
    assert_eq!(exact, 89, "every vector should round to the same f32s");
}
