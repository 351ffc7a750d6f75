//! The embedded store against the 89 fixture records, hand-made cases, and a
//! writer killed with SIGKILL.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rr_core::{
    CallContext, Candidate, Chunk, EmbeddedChunk, IndexStore, Metadata, PathClass, SearchFilter, VectorQuery,
    VectorStore,
};
use rr_embedded::{EmbeddedStore, FileEntry, FileKey, STORE_NAME, StoredFile, WriteBatch};
use rr_hash_embed::HashEmbedder;

// ---------------------------------------------------------------- helpers

fn fixture() -> Vec<EmbeddedChunk> {
    let records = rr_testkit::fixture_records();
    records
        .iter()
        .map(|r| EmbeddedChunk {
            chunk: serde_json::from_value(r.clone()).unwrap(),
            embedding: rr_testkit::record_embedding(r),
        })
        .collect()
}

fn filled(dir: &Path, records: &[EmbeddedChunk]) -> EmbeddedStore {
    let store = EmbeddedStore::open(dir).unwrap();
    for batch in records.chunks(40) {
        store.upsert_chunks(batch).unwrap();
    }
    store
}

/// A record with a `Source:` line like the indexer's.
fn record(id: &str, org: &str, repo: &str, branch: &str, path: &str, body: &str, embedding: Vec<f32>) -> EmbeddedChunk {
    EmbeddedChunk {
        chunk: Chunk {
            id: id.into(),
            document: format!("Source: {org}/{repo}@{branch}:{path}\nType: text\n\n{body}"),
            metadata: Metadata {
                schema_version: 1,
                namespace_id: format!("{org}/{repo}@{branch}"),
                organization: org.into(),
                repository: repo.into(),
                branch: branch.into(),
                path: path.into(),
                ..Default::default()
            },
        },
        embedding,
    }
}

/// The fixture plus copies of it under two other sources, so filters have
/// something to exclude.
fn fixture_with_other_sources() -> Vec<EmbeddedChunk> {
    let base = fixture();
    let mut all = base.clone();
    for (org, repo, branch) in [("acme", "widgets", "dev"), ("other", "gadgets", "main")] {
        for r in &base {
            let mut c = r.clone();
            c.chunk.id = format!("{org}/{repo}@{branch}/{}", r.chunk.id);
            let from = "Source: acme/widgets@main:";
            c.chunk.document = c.chunk.document.replacen(from, &format!("Source: {org}/{repo}@{branch}:"), 1);
            c.chunk.metadata.organization = org.into();
            c.chunk.metadata.repository = repo.into();
            c.chunk.metadata.branch = branch.into();
            c.chunk.metadata.namespace_id = format!("{org}/{repo}@{branch}");
            all.push(c);
        }
    }
    all
}

/// Exact cosine distances in f64, computed independently of the store.
fn brute_force(records: &[EmbeddedChunk], query: &[f32], filter: &SearchFilter) -> Vec<(String, f64)> {
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    let qn = norm(query);
    let mut scored: Vec<(String, f64)> = records
        .iter()
        .filter(|r| filter.matches(&r.chunk))
        .map(|r| {
            let dot: f64 = r.embedding.iter().zip(query).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            (r.chunk.id.clone(), 1.0 - dot / (qn * norm(&r.embedding)))
        })
        .collect();
    scored.sort_by(|a, b| a.1.total_cmp(&b.1));
    scored
}

/// Recall@k of `got` against the exact ranking, counting an id as found when
/// its exact distance ties (within 1e-6) with the k-th exact one.
fn recall_at(got: &[Candidate], exact: &[(String, f64)], k: usize) -> f64 {
    let want = &exact[..k.min(exact.len())];
    if want.is_empty() {
        return 1.0;
    }
    let kth = want.last().unwrap().1;
    let exact_of: HashMap<&str, f64> = exact.iter().map(|(id, d)| (id.as_str(), *d)).collect();
    let found =
        got.iter().take(k).filter(|c| exact_of.get(c.chunk.id.as_str()).is_some_and(|&d| d <= kth + 1e-6)).count();
    found as f64 / want.len() as f64
}

fn filter(source: (&str, &str, &str), path: &str) -> SearchFilter {
    SearchFilter::scoped(source.0, source.1, source.2, path)
}

fn ids(c: &[Candidate]) -> Vec<&str> {
    c.iter().map(|c| c.chunk.id.as_str()).collect()
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

// ---------------------------------------------------------------- round trip, exactness

#[test]
fn fixture_records_round_trip_through_a_reopened_store() {
    let dir = tempfile::tempdir().unwrap();
    let records = fixture();
    assert_eq!(records.len(), 89);
    drop(filled(dir.path(), &records));

    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(store.len(), 89);
    assert_eq!(store.dimension(), Some(256));
    let check = store.check().unwrap();
    assert!(check.is_consistent(), "{check:?}");
    assert_eq!((check.chunks, check.vectors, check.fts_rows), (89, 89, 89));

    let all = store.search(&records[0].embedding, &SearchFilter::default(), 200).unwrap();
    assert_eq!(all.len(), 89);
    let by_id: HashMap<&str, &Candidate> = all.iter().map(|c| (c.chunk.id.as_str(), c)).collect();
    for r in &records {
        assert_eq!(by_id[r.chunk.id.as_str()].chunk, r.chunk, "record {} changed", r.chunk.id);
    }
    // Every record is its own nearest neighbour, at distance ~0.
    for r in &records {
        let top = store.search(&r.embedding, &SearchFilter::default(), 1).unwrap();
        assert_eq!(top[0].chunk.id, r.chunk.id);
        assert!(top[0].distance.unwrap().abs() < 1e-6);
    }
    let namespace = &records[0].chunk.metadata.namespace_id;
    let mut want: Vec<String> = records.iter().map(|r| r.chunk.id.clone()).collect();
    want.sort();
    assert_eq!(store.ids_in_namespace(namespace).unwrap(), want);
}

#[test]
fn knn_equals_brute_force_recall_at_10_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let records = fixture_with_other_sources();
    let store = filled(dir.path(), &records);
    let embedder = HashEmbedder::default();
    let mut queries: Vec<Vec<f32>> = [
        "how is the configuration loaded",
        "retry with backoff",
        "fetch widgets from the API",
        "store snapshot",
        "café",
        "newRouter http handler",
    ]
    .iter()
    .map(|q| embedder.embed_text(&format!("query: {q}")))
    .collect();
    queries.extend(records.iter().step_by(7).map(|r| r.embedding.clone()));
    let filters = [
        SearchFilter::default(),
        filter(("acme", "", ""), ""),
        filter(("acme", "widgets", "dev"), ""),
        filter(("", "", ""), "**/*.go"),
        filter(("other", "gadgets", "main"), "docs/*"),
    ];
    let mut checked = 0;
    for query in &queries {
        for f in &filters {
            let exact = brute_force(&records, query, f);
            let got = store.search(query, f, 10).unwrap();
            assert_eq!(got.len(), exact.len().min(10));
            assert_eq!(recall_at(&got, &exact, 10), 1.0, "filter {f:?}");
            for (c, (_, d)) in got.iter().zip(&exact) {
                assert!((c.distance.unwrap() - d).abs() < 1e-5, "distance {:?} vs exact {d}", c.distance);
            }
            assert!(got.windows(2).all(|w| w[0].distance <= w[1].distance), "not in relevance order");
            checked += 1;
        }
    }
    assert_eq!(checked, queries.len() * filters.len());
}

// ---------------------------------------------------------------- filters

#[test]
fn every_filter_is_applied_before_ranking_like_chroma() {
    let dir = tempfile::tempdir().unwrap();
    let records = fixture_with_other_sources();
    let store = filled(dir.path(), &records);
    let query = HashEmbedder::default().embed_text("query: widgets daemon configuration");
    let cases: [(SearchFilter, usize); 14] = [
        (filter(("acme", "", ""), ""), 178),
        (filter(("", "widgets", ""), ""), 178),
        (filter(("", "", "dev"), ""), 89),
        (filter(("acme", "widgets", "main"), ""), 89),
        (filter(("other", "gadgets", "main"), ""), 89),
        (filter(("nobody", "", ""), ""), 0),
        (filter(("", "", ""), "docs/*"), 3 * 13),
        (filter(("", "", ""), "**/*.go"), 3 * 15),
        (filter(("", "", ""), "**/config.go"), 3 * 5),
        (filter(("", "", ""), "cmd/widget?/main.go"), 3 * 3),
        (filter(("", "", ""), "/README.md"), 3 * 5),
        (filter(("acme", "widgets", "main"), "docs/café.md"), 1),
        (filter(("", "", ""), "docs/caf?.md"), 3),
        (filter(("acme", "", "main"), "py/**/__init__.py"), 3),
    ];
    for (f, expected) in &cases {
        let want: HashSet<&str> = records.iter().filter(|r| f.matches(&r.chunk)).map(|r| r.chunk.id.as_str()).collect();
        assert_eq!(want.len(), *expected, "fixture expectation for {f:?}");
        let got = store.search(&query, f, 1000).unwrap();
        assert_eq!(ids(&got).into_iter().collect::<HashSet<_>>(), want, "{f:?}");
        // A narrow filter still fills k: nothing is ranked before filtering.
        let top3 = store.search(&query, f, 3).unwrap();
        assert_eq!(top3.len(), expected.min(&3).to_owned(), "{f:?}");
        let exact = brute_force(&records, &query, f);
        assert_eq!(recall_at(&top3, &exact, 3), 1.0, "{f:?}");
        // Lexical search honours the same filter.
        for c in store.lexical_search("widgets config daemon retry", f, 50).unwrap() {
            assert!(f.matches(&c.chunk), "lexical result {} escapes {f:?}", c.chunk.id);
        }
    }
}

// ---------------------------------------------------------------- lexical and hybrid

#[test]
fn lexical_search_finds_an_identifier() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(dir.path(), &fixture());
    let any = SearchFilter::default();
    let hits = store.lexical_search("fetchWidgets", &any, 5).unwrap();
    assert!(!hits.is_empty());
    assert_eq!(hits[0].chunk.metadata.path, "web/app.ts");
    assert!(hits[0].chunk.document.contains("fetchWidgets"));
    assert!(hits.windows(2).all(|w| w[0].distance <= w[1].distance));

    let hits = store.lexical_search("where is newRouter defined?", &any, 3).unwrap();
    assert_eq!(hits[0].chunk.metadata.path, "cmd/widgetd/main.go");
    assert!(hits[0].chunk.document.contains("func newRouter"));

    // Under a filter that excludes web/app.ts, only its parts ("fetch",
    // "widgets") can match, and only in files the filter lets through.
    let go = filter(("", "", ""), "**/*.go");
    let hits = store.lexical_search("fetchWidgets", &go, 5).unwrap();
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|c| go.matches(&c.chunk) && !c.chunk.document.contains("fetchWidgets")));
    // Punctuation-only queries and FTS5 syntax are harmless.
    assert!(store.lexical_search("?!", &any, 5).unwrap().is_empty());
    store.lexical_search(r#"" OR NEAR( * :"#, &any, 5).unwrap();
}

#[test]
fn hybrid_ranking_fuses_by_reciprocal_rank() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let q = [1.0, 0.0, 0.0, 0.0];
    // Vector ranking: a, c, d, b. Lexical ranking ("zephyr quokka"): b, c.
    let docs = [
        record("a", "o", "r", "main", "a.txt", "nothing relevant here", unit(&[1.0, 0.05, 0.0, 0.0])),
        record("b", "o", "r", "main", "b.txt", "zephyr quokka zephyr quokka zephyr", unit(&[0.0, 0.0, 1.0, 0.0])),
        record(
            "c",
            "o",
            "r",
            "main",
            "c.txt",
            "a zephyr appears once among many other words",
            unit(&[1.0, 0.5, 0.0, 0.0]),
        ),
        record("d", "o", "r", "main", "d.txt", "still nothing", unit(&[1.0, 1.0, 0.3, 0.0])),
    ];
    store.upsert_chunks(&docs).unwrap();
    let any = SearchFilter::default();
    assert_eq!(ids(&store.search(&q, &any, 4).unwrap()), ["a", "c", "d", "b"]);
    assert_eq!(ids(&store.lexical_search("zephyr quokka", &any, 4).unwrap()), ["b", "c"]);
    // One word: no verbatim promotion, so the order is the fusion's alone.
    assert_eq!(ids(&store.lexical_search("zephyr", &any, 4).unwrap()), ["b", "c"]);
    // With equal weights and k = 60: c: 1/62 + 1/62 = 0.032258 > b: 1/64 + 1/61 = 0.032018 > a: 1/61 > d: 1/63.
    let equal = rr_core::HybridOptions { weight_dense: 1.0, weight_lexical: 1.0, rrf_k: 60.0, depth: 50, rerank: 0 };
    let hybrid = store.hybrid_search_with("zephyr", &q, &any, 4, &equal).unwrap();
    assert_eq!(ids(&hybrid), ["c", "b", "a", "d"]);
    assert!((hybrid[0].distance.unwrap() + 2.0 / 62.0).abs() < 1e-12);
    // The lexical ranking weighted 3x: b: 1/64 + 3/61 = 0.064805 > c: 1/62 + 3/62 = 0.064516.
    let heavy = rr_core::HybridOptions { weight_lexical: 3.0, ..equal };
    assert_eq!(ids(&store.hybrid_search_with("zephyr", &q, &any, 4, &heavy).unwrap()), ["b", "c", "a", "d"]);
    // The defaults (1 and 4, k = 20): b: 1/24 + 4/21 = 0.232143 > c: 5/22 = 0.227273.
    let hybrid = store.hybrid_search("zephyr", &q, &any, 4).unwrap();
    assert_eq!(ids(&hybrid), ["b", "c", "a", "d"]);
    assert!((hybrid[0].distance.unwrap() + (1.0 / 24.0 + 4.0 / 21.0)).abs() < 1e-12);
    assert_eq!(ids(&store.hybrid_search("zephyr", &q, &any, 2).unwrap()), ["b", "c"]);
    // b holds the two-word query word for word: it comes first, with its
    // own fused score, even where the fusion puts c first.
    let hybrid = store.hybrid_search_with("Zephyr, quokka!", &q, &any, 4, &equal).unwrap();
    assert_eq!(ids(&hybrid), ["b", "c", "a", "d"]);
    assert!((hybrid[0].distance.unwrap() + (1.0 / 64.0 + 1.0 / 61.0)).abs() < 1e-12);
    // The filter applies to both rankings.
    let only_b = filter(("", "", ""), "b.txt");
    assert_eq!(ids(&store.hybrid_search("zephyr", &q, &only_b, 4).unwrap()), ["b"]);
}

/// A code chunk of `path` starting at `start_line`, with its symbol.
fn code(id: &str, path: &str, symbol: &str, start_line: i64, body: &str, embedding: Vec<f32>) -> EmbeddedChunk {
    let mut r = record(id, "o", "r", "main", path, body, embedding);
    r.chunk.document = r.chunk.document.replace("Type: text", "Type: code");
    r.chunk.metadata.chunking_strategy = "code".into();
    r.chunk.metadata.symbol = symbol.into();
    r.chunk.metadata.start_line = start_line;
    r
}

#[test]
fn hybrid_search_reads_the_head_again_for_the_querys_terms() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let q = [1.0, 0.0, 0.0, 0.0];
    let docs = [
        // A file's preamble that talks about both words, in comments only.
        code(
            "license",
            "src/lib.rs",
            "",
            1,
            "// Config files: every config we parse; we parse a config, then parse each config again.\nuse std::io;",
            unit(&[1.0, 0.1, 0.0, 0.0]),
        ),
        code("other", "src/other.rs", "run", 10, "fn run() {\n    // config\n}", unit(&[1.0, 0.3, 0.0, 0.0])),
        // The function the query names, by its file and its symbol.
        code(
            "target",
            "src/config.rs",
            "parse_config",
            40,
            "pub fn parse_config(input: &str) -> Config {\n    Config::from(input)\n}",
            unit(&[1.0, 0.6, 0.0, 0.0]),
        ),
        code("far", "src/far.rs", "far", 5, "fn far() {}", unit(&[0.0, 1.0, 0.0, 0.0])),
    ];
    store.upsert_chunks(&docs).unwrap();
    let any = SearchFilter::default();
    // The lexical ranking weighs nothing, so the vectors set the fused order.
    let read_again = rr_core::HybridOptions { weight_lexical: 0.0, ..rr_core::HybridOptions::default() };
    let fused_only = rr_core::HybridOptions { rerank: 0, ..read_again };
    let search = |query: &str, k: usize, options: &rr_core::HybridOptions| {
        store.hybrid_search_with(query, &q, &any, k, options).unwrap()
    };
    let fused = search("config parse", 4, &fused_only);
    assert_eq!(ids(&fused), ["license", "other", "target", "far"]);
    // Read again, the chunk that names both words passes the preamble that
    // holds them in comments and the chunk that holds one.
    let again = search("config parse", 4, &read_again);
    assert_eq!(ids(&again), ["target", "license", "other", "far"]);
    // The distances stay the fused scores.
    assert_eq!(again[0].distance, fused[2].distance);
    // Only the head is read again: with a head of two, the target stays third.
    let two = rr_core::HybridOptions { rerank: 2, ..read_again };
    assert_eq!(ids(&search("config parse", 4, &two)), ["license", "other", "target", "far"]);
    // The head is read before the answer is cut to k.
    assert_eq!(ids(&search("config parse", 1, &read_again)), ["target"]);
    // A verbatim match keeps its lead.
    assert_eq!(ids(&search("config we parse", 2, &read_again)), ["license", "target"]);
    // A head longer than the fused list reads the whole list.
    let all = rr_core::HybridOptions { rerank: usize::MAX, ..read_again };
    assert_eq!(ids(&search("config parse", 4, &all)), ids(&again));
    // A query of stopwords only has no terms to weigh: the fused order.
    assert_eq!(ids(&search("what is the", 4, &read_again)), ids(&search("what is the", 4, &fused_only)));
}

// ---------------------------------------------------------------- writes

#[test]
fn upsert_replaces_and_delete_removes() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let any = SearchFilter::default();
    store.upsert_chunks(&[record("x", "o", "r", "main", "x.rs", "alpha marmot", unit(&[1.0, 0.0]))]).unwrap();
    store.upsert_chunks(&[record("y", "o", "r", "main", "y.rs", "gamma", unit(&[0.0, 1.0]))]).unwrap();
    store.upsert_chunks(&[record("x", "o", "r", "main", "x2.rs", "beta wombat", unit(&[0.0, 1.0]))]).unwrap();
    assert_eq!(store.len(), 2);
    let top = store.search(&[0.0, 1.0], &any, 5).unwrap();
    assert_eq!(top.len(), 2);
    let x = top.iter().find(|c| c.chunk.id == "x").unwrap();
    assert!(x.chunk.document.ends_with("beta wombat"));
    assert_eq!(x.chunk.metadata.path, "x2.rs");
    assert!(x.distance.unwrap().abs() < 1e-6);
    assert!(store.lexical_search("marmot", &any, 5).unwrap().is_empty(), "old text still indexed");
    assert_eq!(ids(&store.lexical_search("wombat", &any, 5).unwrap()), ["x"]);
    assert!(store.search(&[0.0, 1.0], &filter(("", "", ""), "x.rs"), 5).unwrap().is_empty(), "old path matched");

    store.delete_chunks(&["x".into(), "never-existed".into()]).unwrap();
    assert_eq!(ids(&store.search(&[0.0, 1.0], &any, 5).unwrap()), ["y"]);
    assert!(store.lexical_search("wombat", &any, 5).unwrap().is_empty());
    assert_eq!(store.ids_in_namespace("o/r@main").unwrap(), ["y"]);
    let check = store.check().unwrap();
    assert!(check.is_consistent(), "{check:?}");
    assert_eq!(check.chunks, 1);
}

#[test]
fn a_failed_batch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    store.upsert_chunks(&[record("a", "o", "r", "main", "a", "one", vec![1.0, 0.0, 0.0])]).unwrap();
    let err = store
        .upsert_chunks(&[
            record("b", "o", "r", "main", "b", "two", vec![1.0, 0.0, 0.0]),
            record("c", "o", "r", "main", "c", "three", vec![1.0, 0.0]),
        ])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "embedded store write failed: embedding of 2 dimensions, the store holds 3-dimensional vectors"
    );
    let err = store.upsert_chunks(&[record("d", "o", "r", "main", "d", "four", vec![1.0; 4])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "embedded store write failed: embedding of 4 dimensions, the store holds 3-dimensional vectors"
    );
    assert_eq!(store.ids_in_namespace("o/r@main").unwrap(), ["a"]);
    let err = store.search(&[1.0, 0.0], &SearchFilter::default(), 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "embedded store query failed: embedding of 2 dimensions, the store holds 3-dimensional vectors"
    );
}

#[test]
fn namespaces_are_isolated() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let one: Vec<EmbeddedChunk> =
        (0..2500).map(|i| record(&format!("one-{i:05}"), "o", "one", "main", "f", "x", vec![1.0, 0.0])).collect();
    let two: Vec<EmbeddedChunk> =
        (0..3).map(|i| record(&format!("two-{i}"), "o", "two", "main", "f", "x", vec![0.0, 1.0])).collect();
    for batch in one.chunks(1000) {
        store.upsert_chunks(batch).unwrap();
    }
    store.upsert_chunks(&two).unwrap();
    let ids_one = store.ids_in_namespace("o/one@main").unwrap();
    assert_eq!(ids_one.len(), 2500, "paging must return every id");
    assert!(ids_one.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(store.ids_in_namespace("o/two@main").unwrap(), ["two-0", "two-1", "two-2"]);
    assert!(store.ids_in_namespace("o/three@main").unwrap().is_empty());

    store.delete_chunks(&ids_one[..1000]).unwrap();
    store.delete_chunks(&ids_one[1000..]).unwrap();
    assert!(store.ids_in_namespace("o/one@main").unwrap().is_empty());
    assert_eq!(store.ids_in_namespace("o/two@main").unwrap().len(), 3);
    assert_eq!(store.len(), 3);

    for (ns, text) in [("o/one@main", "first"), ("o/two@main", "second")] {
        store
            .put_file(&StoredFile {
                namespace_id: ns.into(),
                path: "f".into(),
                file_hash: "h".into(),
                content: text.into(),
                chunking: String::new(),
                chunks: 0,
            })
            .unwrap();
    }
    assert_eq!(store.get_file("o/one@main", "f").unwrap().unwrap().content, "first");
    assert_eq!(store.get_file("o/two@main", "f").unwrap().unwrap().content, "second");
}

#[test]
fn files_are_stored_with_their_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let ns = "o/r@main";
    let text = "fn main() {\n    println!(\"héllo\");\n}\n";
    let file = StoredFile {
        namespace_id: ns.into(),
        path: "src/main.rs".into(),
        file_hash: "h1".into(),
        content: text.into(),
        chunking: "semantic-v3".into(),
        chunks: 1,
    };
    let chunks = [record("m0", "o", "r", "main", "src/main.rs", text, vec![0.6, 0.8])];
    store.write(&WriteBatch { upsert: &chunks, put_files: std::slice::from_ref(&file), ..Default::default() }).unwrap();
    assert_eq!(store.get_file(ns, "src/main.rs").unwrap(), Some(file.clone()));
    store
        .put_file(&StoredFile {
            path: "README.md".into(),
            file_hash: "h2".into(),
            content: "# r".into(),
            ..file.clone()
        })
        .unwrap();
    assert_eq!(
        store.list_files(ns).unwrap(),
        [
            FileEntry {
                path: "README.md".into(),
                file_hash: "h2".into(),
                size: 3,
                chunking: "semantic-v3".into(),
                chunks: 1
            },
            FileEntry {
                path: "src/main.rs".into(),
                file_hash: "h1".into(),
                size: text.len() as u64,
                chunking: "semantic-v3".into(),
                chunks: 1
            },
        ]
    );
    assert!(store.list_files("other").unwrap().is_empty());
    assert_eq!(store.get_file("other", "src/main.rs").unwrap(), None);

    // Deleting a file and its chunks together.
    store
        .write(&WriteBatch {
            delete: &["m0".into()],
            delete_files: &[FileKey { namespace_id: ns.into(), path: "src/main.rs".into() }],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(store.get_file(ns, "src/main.rs").unwrap(), None);
    assert!(store.is_empty());
    assert_eq!(store.list_files(ns).unwrap().len(), 1);
}

#[test]
fn another_connections_writes_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    let reader = EmbeddedStore::open(dir.path()).unwrap();
    let writer = EmbeddedStore::open(dir.path()).unwrap();
    let any = SearchFilter::default();
    assert!(reader.search(&[1.0, 0.0], &any, 3).unwrap().is_empty());
    writer.upsert_chunks(&[record("a", "o", "r", "main", "a", "shared text", vec![1.0, 0.0])]).unwrap();
    assert_eq!(ids(&reader.search(&[1.0, 0.0], &any, 3).unwrap()), ["a"]);
    writer.delete_chunks(&["a".into()]).unwrap();
    assert!(reader.search(&[1.0, 0.0], &any, 3).unwrap().is_empty());
    assert!(reader.lexical_search("shared", &any, 3).unwrap().is_empty());
}

#[test]
fn searches_run_while_another_thread_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(dir.path(), &fixture());
    let records = fixture();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let any = SearchFilter::default();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    assert_eq!(store.search(&records[3].embedding, &any, 5).unwrap().len(), 5);
                    assert!(!store.lexical_search("fetchWidgets", &any, 5).unwrap().is_empty());
                    store.hybrid_search("store snapshot", &records[9].embedding, &any, 5).unwrap();
                }
            });
        }
        for round in 0..20 {
            let batch: Vec<EmbeddedChunk> = records
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.chunk.id = format!("{}-{round}", r.chunk.id);
                    r
                })
                .collect();
            store.upsert_chunks(&batch).unwrap();
            if round % 2 == 1 {
                store.delete_chunks(&batch.iter().map(|r| r.chunk.id.clone()).collect::<Vec<_>>()).unwrap();
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(store.len(), 89 * 11);
    assert!(store.check().unwrap().is_consistent());
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(EmbeddedStore::open(dir.path()).unwrap());
    let conn = rusqlite::Connection::open(dir.path().join(rr_embedded::DATABASE_FILE)).unwrap();
    conn.execute("UPDATE schema_version SET version = 99", []).unwrap();
    drop(conn);
    let err = EmbeddedStore::open(dir.path()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "embedded store open failed: schema version 99 is newer than this build supports ({})",
            rr_embedded::SCHEMA_VERSION
        )
    );
}

#[test]
fn a_version_1_store_gets_the_new_lexical_columns_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let records = [record("p", "acme", "widgets", "main", "src/opts.rs", "fn parsed_flags() {}", vec![1.0, 0.0])];
    drop(filled(dir.path(), &records));
    // What a version-1 build left: the full-text table without the stems and
    // names columns.
    let store = reopened_after(
        dir.path(),
        "DROP TABLE chunks_fts;
         CREATE VIRTUAL TABLE chunks_fts USING fts5 (body, idents, content = '', contentless_delete = 1,
             tokenize = 'unicode61 remove_diacritics 2');
         INSERT INTO chunks_fts (rowid, body, idents) SELECT pk, document, '' FROM chunks;
         DROP TABLE lexicon; DROP TABLE postings;
         ALTER TABLE files DROP COLUMN chunking; ALTER TABLE files DROP COLUMN chunks;
         DROP TABLE vector_codes;
         UPDATE schema_version SET version = 1;",
    );
    // "parsing" meets "parsed" only through the stems column (`pars`), which
    // the refill wrote.
    let hits = store.lexical_search("parsing", &SearchFilter::default(), 5).unwrap();
    assert_eq!(hits.iter().map(|c| c.chunk.id.as_str()).collect::<Vec<_>>(), ["p"]);
}

/// A chunk of `src/<id>.rs` that the indexer made from code.
fn code_record(id: &str, body: &str) -> EmbeddedChunk {
    let mut r = record(id, "acme", "tools", "main", &format!("src/{id}.rs"), body, vec![1.0, 0.0]);
    r.chunk.metadata.chunking_strategy = "code".into();
    r
}

#[test]
fn a_version_7_store_loses_its_names_and_comments_columns_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        // `gizmo` only in the chunker's symbol, which the old `names` column held.
        {
            let mut r = code_record("named", "fn spin() {}");
            r.chunk.metadata.symbol = "struct_item:Gizmo".into();
            r
        },
        // `widget` only in a comment, which the old `comments` column held.
        code_record("mentions", "/// A widget.\nfn f() {}"),
        // Rows without the word, so it is not in half of them (where FTS5's
        // IDF is all but 0).
        code_record("a", "fn a() {}"),
        code_record("b", "fn b() {}"),
        code_record("c", "fn c() {}"),
    ];
    drop(filled(dir.path(), &records));
    // What a version-7 build left: five columns, the comment out of the
    // body, the symbol in `names`.
    let store = reopened_after(
        dir.path(),
        "DROP TABLE chunks_fts;
         CREATE VIRTUAL TABLE chunks_fts USING fts5 (body, idents, stems, names, comments, content = '',
             contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2');
         INSERT INTO chunks_fts (rowid, body, idents, stems, names, comments)
             SELECT pk, 'fn', '', '', 'gizmo', document FROM chunks;
         DROP TABLE vector_codes;
         UPDATE schema_version SET version = 7;",
    );
    // The refill indexed each document as it is: the comment is text like
    // the code, and a symbol the text does not hold is no longer its word.
    let ids = |query: &str| {
        let hits = store.lexical_search(query, &SearchFilter::default(), 5).unwrap();
        hits.into_iter().map(|c| c.chunk.id).collect::<Vec<_>>()
    };
    assert_eq!(ids("widget"), ["mentions"]);
    assert_eq!(ids("spin"), ["named"]);
    assert!(ids("gizmo").is_empty());
}

#[test]
fn a_version_6_store_keeps_its_files_with_an_unknown_chunking() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let file = StoredFile {
        namespace_id: "o/r@main".into(),
        path: "src/lib.rs".into(),
        file_hash: "h".into(),
        content: "fn f() {}".into(),
        chunking: "semantic".into(),
        chunks: 1,
    };
    store.put_file(&file).unwrap();
    drop(store);
    // What a version-6 build left: files without their chunking.
    let store = reopened_after(
        dir.path(),
        "ALTER TABLE files DROP COLUMN chunking; ALTER TABLE files DROP COLUMN chunks;
         DROP TABLE vector_codes;
         UPDATE schema_version SET version = 6;",
    );
    let got = store.get_file("o/r@main", "src/lib.rs").unwrap().unwrap();
    assert_eq!(got, StoredFile { chunking: String::new(), chunks: 0, ..file });
}

/// A record of `path` in `language`, its text naming the widget.
fn of_language(id: &str, path: &str, language: &str) -> EmbeddedChunk {
    let mut r = record(id, "acme", "widgets", "main", path, &format!("the widget {id}"), vec![1.0, 0.1]);
    r.chunk.metadata.language = language.into();
    r
}

#[test]
fn language_and_kind_filters_apply_before_the_limit_in_every_mode_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    for i in 0..6 {
        records.push(of_language(&format!("go{i}"), &format!("cmd/main{i}.go"), "go"));
        records.push(of_language(&format!("gotest{i}"), &format!("cmd/main{i}_test.go"), "go"));
        records.push(of_language(&format!("py{i}"), &format!("tests/test_{i}.py"), "python"));
        records.push(of_language(&format!("md{i}"), &format!("docs/page{i}.md"), "markdown"));
    }
    let ids = |hits: Vec<Candidate>| hits.into_iter().map(|c| c.chunk.id).collect::<Vec<_>>();
    let check = |store: &EmbeddedStore| {
        let go_tests =
            SearchFilter { languages: vec!["go".into()], kinds: vec![PathClass::Test], ..Default::default() };
        for found in [
            ids(store.search(&[1.0, 0.1], &go_tests, 5).unwrap()),
            ids(store.lexical_search("widget", &go_tests, 5).unwrap()),
            ids(store.hybrid_search("widget", &[1.0, 0.1], &go_tests, 5).unwrap()),
        ] {
            assert_eq!(found.len(), 5, "{found:?}");
            assert!(found.iter().all(|id| id.starts_with("gotest")), "{found:?}");
        }
        let docs = SearchFilter { kinds: vec![PathClass::Docs], ..Default::default() };
        let found = ids(store.search(&[1.0, 0.1], &docs, 20).unwrap());
        assert_eq!(found.len(), 6, "{found:?}");
        assert!(found.iter().all(|id| id.starts_with("md")), "{found:?}");
        let nothing = SearchFilter { languages: vec!["cobol".into()], ..Default::default() };
        assert!(store.search(&[1.0, 0.1], &nothing, 5).unwrap().is_empty());

        let facets = store.facets(&SearchFilter::default()).unwrap();
        let languages: Vec<(&str, usize)> = facets.languages.iter().map(|(l, n)| (l.as_str(), *n)).collect();
        assert_eq!(languages, [("go", 12), ("markdown", 6), ("python", 6)]);
        assert_eq!(
            (
                facets.kinds.get(&PathClass::Source),
                facets.kinds.get(&PathClass::Test),
                facets.kinds.get(&PathClass::Docs)
            ),
            (Some(&6), Some(&12), Some(&6))
        );
        let in_docs = store.facets(&filter(("", "", ""), "docs/*")).unwrap();
        assert_eq!(in_docs.languages.keys().collect::<Vec<_>>(), ["markdown"]);
    };
    check(&filled(dir.path(), &records));
    // Read back from SQLite, not kept from the writes.
    check(&EmbeddedStore::open(dir.path()).unwrap());
}

/// The store in `dir` opened by this build after `sql` turned it back into
/// what an older build left.
fn reopened_after(dir: &Path, sql: &str) -> EmbeddedStore {
    let conn = rusqlite::Connection::open(dir.join(rr_embedded::DATABASE_FILE)).unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    opened_at_this_version(dir)
}

/// The store in `dir` opened by this build: its migrations ran, and what
/// they refilled is consistent.
fn opened_at_this_version(dir: &Path) -> EmbeddedStore {
    let store = EmbeddedStore::open(dir).unwrap();
    let version: i64 = rusqlite::Connection::open(dir.join(rr_embedded::DATABASE_FILE))
        .unwrap()
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, rr_embedded::SCHEMA_VERSION);
    assert!(store.check().unwrap().is_consistent());
    store
}

#[test]
fn a_version_2_store_gets_the_lexical_index_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        record("p", "acme", "widgets", "main", "src/opts.rs", "fn parsed_flags() { load_config() }", vec![1.0, 0.0]),
        record("q", "acme", "widgets", "main", "src/run.rs", "fn run() { parse() }", vec![0.0, 1.0]),
    ];
    let before: Vec<(String, f64)> = {
        let store = filled(dir.path(), &records);
        let hits = store.lexical_search("parsing load_config", &SearchFilter::default(), 5).unwrap();
        hits.into_iter().map(|c| (c.chunk.id, c.distance.unwrap())).collect()
    };
    // What a version-2 build left: no lexical index.
    let conn = rusqlite::Connection::open(dir.path().join(rr_embedded::DATABASE_FILE)).unwrap();
    conn.execute_batch("DROP TABLE lexicon; DROP TABLE postings; ALTER TABLE files DROP COLUMN chunking; ALTER TABLE files DROP COLUMN chunks;
         DROP TABLE vector_codes; UPDATE schema_version SET version = 2;").unwrap();
    drop(conn);
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join(rr_embedded::DATABASE_FILE)).unwrap();
    let version: i64 = conn.query_row("SELECT version FROM schema_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, rr_embedded::SCHEMA_VERSION);
    let df: i64 = conn.query_row("SELECT df FROM lexicon WHERE term = 'parse'", [], |r| r.get(0)).unwrap();
    assert_eq!(df, 1);
    let hits = store.lexical_search("parsing load_config", &SearchFilter::default(), 5).unwrap();
    let after: Vec<(String, f64)> = hits.into_iter().map(|c| (c.chunk.id, c.distance.unwrap())).collect();
    assert_eq!(after, before);
    assert_eq!(after.len(), 2);
}

/// A store of version 8 (no stored vector codes) gets them written from
/// its vectors when opened, and answers every search as before: the same
/// rows, distances, facets and filters, with what one more write changes.
#[test]
fn a_version_8_store_gets_its_vector_codes_when_opened_and_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let records = fixture_with_other_sources();
    let queries: Vec<&[f32]> = records.iter().step_by(11).map(|r| r.embedding.as_slice()).collect();
    let filters = [
        SearchFilter::default(),
        filter(("acme", "widgets", "dev"), ""),
        filter(("", "", ""), "**/*.go"),
        SearchFilter { kinds: vec![PathClass::Docs], ..Default::default() },
    ];
    let answers = |store: &EmbeddedStore| {
        let mut all = Vec::new();
        for query in &queries {
            for f in &filters {
                let hits = store.search(query, f, 10).unwrap();
                all.push(hits.into_iter().map(|c| (c.chunk.id, c.distance.unwrap().to_bits())).collect::<Vec<_>>());
            }
        }
        (all, store.facets(&SearchFilter::default()).unwrap())
    };
    let before = answers(&filled(dir.path(), &records));
    let store = reopened_after(dir.path(), "DROP TABLE vector_codes; UPDATE schema_version SET version = 8;");
    assert_eq!(store.check().unwrap().codes, records.len() as u64);
    assert_eq!(answers(&store), before);
    assert!(!before.0.iter().all(Vec::is_empty));
    // Written after the upgrade: the codes read back from SQLite answer as
    // those the write put in memory.
    store.delete_chunks(&[records[0].chunk.id.clone()]).unwrap();
    store.upsert_chunks(&records[..1]).unwrap();
    let written = answers(&store);
    drop(store);
    assert_eq!(answers(&opened_at_this_version(dir.path())), written);
}

/// A store of version 4 (the index in varint blocks keyed by their last
/// pk) gets the index rewritten in the packed blocks when opened, with the
/// same scores.
#[test]
fn a_version_4_store_gets_the_packed_lexical_index_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let words = ["parse", "load", "config", "value", "flag"];
    let records: Vec<EmbeddedChunk> = (0..400)
        .map(|i| {
            let body = format!("fn f{i}() {{ {} {} }}", words[i % 5], words[(i / 5) % 5]);
            record(&format!("r{i}"), "acme", "widgets", "main", &format!("src/f{i}.rs"), &body, vec![1.0, 0.0])
        })
        .collect();
    let query = "parse config";
    let before: Vec<(String, f64)> = {
        let store = filled(dir.path(), &records);
        let hits = store.lexical_search(query, &SearchFilter::default(), 15).unwrap();
        hits.into_iter().map(|c| (c.chunk.id, c.distance.unwrap())).collect()
    };
    assert_eq!(before.len(), 15);
    // What a version-4 build left: version 3's tables (here with a row this
    // build cannot read), and no directory.
    let store = reopened_after(
        dir.path(),
        "DROP TABLE lexicon; DROP TABLE postings; DROP TABLE blocks;
         CREATE TABLE lexicon (term TEXT PRIMARY KEY, df INTEGER NOT NULL, gen INTEGER NOT NULL) WITHOUT ROWID;
         CREATE TABLE postings (term TEXT NOT NULL, last_pk INTEGER NOT NULL, block BLOB NOT NULL,
             PRIMARY KEY (term, last_pk)) WITHOUT ROWID;
         INSERT INTO lexicon VALUES ('parse', 1, 0);
         INSERT INTO postings VALUES ('parse', 1, x'01');
         ALTER TABLE files DROP COLUMN chunking; ALTER TABLE files DROP COLUMN chunks;
         DROP TABLE vector_codes;
         UPDATE schema_version SET version = 4;",
    );
    let conn = rusqlite::Connection::open(dir.path().join(rr_embedded::DATABASE_FILE)).unwrap();
    let (df, stored): (i64, i64) = conn
        .query_row(
            "SELECT df, (SELECT count(*) FROM blocks WHERE term = 'parse') FROM lexicon WHERE term = 'parse'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    // 80 rows say `parse` in the body and 80 more in their second word's
    // place (16 say it twice): 144 rows, a stored block and a tail.
    assert_eq!((df, stored), (144, 1));
    let hits = store.lexical_search(query, &SearchFilter::default(), 15).unwrap();
    let after: Vec<(String, f64)> = hits.into_iter().map(|c| (c.chunk.id, c.distance.unwrap())).collect();
    assert_eq!(after, before);
}

#[tokio::test]
async fn traits_drive_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(VectorStore::name(&store), STORE_NAME);
    assert_eq!(IndexStore::name(&store), "embedded");
    assert_eq!(store.max_batch_size(), 1000);
    let records = fixture();
    store.upsert(&records[..50]).await.unwrap();
    store.upsert(&records[50..]).await.unwrap();
    let ns = records[0].chunk.metadata.namespace_id.clone();
    assert_eq!(store.namespace_ids(&ns).await.unwrap().len(), 89);
    let ctx = CallContext::default();
    let query = VectorQuery { embedding: records[5].embedding.clone(), n_results: 3, filter: SearchFilter::default() };
    let got = store.query(&query, &ctx).await.unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].chunk.id, records[5].chunk.id);
    store.delete(&[records[5].chunk.id.clone()]).await.unwrap();
    assert_ne!(store.query(&query, &ctx).await.unwrap()[0].chunk.id, records[5].chunk.id);
    let bad = VectorQuery { embedding: vec![1.0], ..query };
    let err = store.query(&bad, &ctx).await.unwrap_err();
    assert_eq!(err.backend(), "embedded");
}

// ---------------------------------------------------------------- crash safety

const CRASH_ENV: &str = "RR_EMBEDDED_CRASH_CHILD_DIR";
const MAIN_RECORDS: usize = 300;
const EXTRA_RECORDS: usize = 100;

fn crash_vector(generation: u64, i: usize) -> Vec<f32> {
    let mut s = generation.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1);
    unit(
        &(0..16)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect::<Vec<_>>(),
    )
}

fn crash_record(prefix: &str, generation: u64, i: usize) -> EmbeddedChunk {
    record(
        &format!("{prefix}-{i:04}"),
        "o",
        "crash",
        "main",
        &format!("src/f{}.rs", i % 20),
        &format!("generation {generation} record {i} token{i}"),
        // Extras get vectors of their own, so no two records tie.
        crash_vector(generation, if prefix == "extra" { i + 10_000 } else { i }),
    )
}

fn generation_of(document: &str) -> u64 {
    document.split("generation ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap()
}

/// Not a test on its own: when `CRASH_ENV` is set, this is the writer that
/// `a_writer_killed_mid_write_leaves_a_consistent_store` runs and kills.
/// Generation `g` rewrites every main record and the file `gen.txt` in one
/// batch; even generations also write the extra records, odd ones delete them.
#[test]
fn crash_writer_child() {
    let Ok(dir) = std::env::var(CRASH_ENV) else { return };
    let store = EmbeddedStore::open(&dir).unwrap();
    let start = store.get_file("o/crash@main", "gen.txt").unwrap().map_or(0, |f| f.content.parse::<u64>().unwrap() + 1);
    for generation in start.. {
        let mut upsert: Vec<EmbeddedChunk> = (0..MAIN_RECORDS).map(|i| crash_record("main", generation, i)).collect();
        let extra: Vec<String> = (0..EXTRA_RECORDS).map(|i| format!("extra-{i:04}")).collect();
        let delete: &[String] = if generation.is_multiple_of(2) {
            upsert.extend((0..EXTRA_RECORDS).map(|i| crash_record("extra", generation, i)));
            &[]
        } else {
            &extra
        };
        let file = StoredFile {
            namespace_id: "o/crash@main".into(),
            path: "gen.txt".into(),
            file_hash: format!("h{generation}"),
            content: generation.to_string(),
            chunking: String::new(),
            chunks: 0,
        };
        store.write(&WriteBatch { delete, upsert: &upsert, put_files: &[file], ..Default::default() }).unwrap();
        std::fs::write(Path::new(&dir).join("ready"), generation.to_string()).unwrap();
    }
}

/// Asserts that the store holds exactly one whole generation.
fn assert_one_whole_generation(dir: &Path) -> u64 {
    let store = EmbeddedStore::open(dir).unwrap();
    let check = store.check().unwrap();
    assert!(check.is_consistent(), "{check:?}");
    let generation: u64 = store.get_file("o/crash@main", "gen.txt").unwrap().unwrap().content.parse().unwrap();
    let ids = store.ids_in_namespace("o/crash@main").unwrap();
    let extras = if generation.is_multiple_of(2) { EXTRA_RECORDS } else { 0 };
    assert_eq!(ids.len(), MAIN_RECORDS + extras, "generation {generation}");
    assert_eq!(store.len(), ids.len(), "in-memory index disagrees with the tables");
    // Every document and vector belongs to the same generation as the file.
    let all = store.search(&crash_vector(generation, 0), &SearchFilter::default(), 10_000).unwrap();
    assert_eq!(all.len(), ids.len());
    for c in &all {
        assert_eq!(generation_of(&c.chunk.document), generation, "{} is from another batch", c.chunk.id);
    }
    let first = store.search(&crash_vector(generation, 7), &SearchFilter::default(), 1).unwrap();
    assert_eq!(first[0].chunk.id, "main-0007", "vector of another batch");
    assert!(first[0].distance.unwrap().abs() < 1e-6);
    let lexical = store.lexical_search("token42", &SearchFilter::default(), 5).unwrap();
    assert_eq!(lexical.iter().filter(|c| c.chunk.id.ends_with("-0042")).count(), 1 + usize::from(extras > 0));
    generation
}

#[test]
fn a_writer_killed_mid_write_leaves_a_consistent_store() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut last = None;
    for delay_ms in [0u64, 37, 140, 290, 455, 610] {
        let _ = std::fs::remove_file(dir.path().join("ready"));
        let mut child = Command::new(&exe)
            .args(["crash_writer_child", "--exact", "--nocapture", "--test-threads", "1"])
            .env(CRASH_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !dir.path().join("ready").exists() {
            assert!(Instant::now() < deadline, "writer never committed");
            assert!(child.try_wait().unwrap().is_none(), "writer exited early");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success());
        let generation = assert_one_whole_generation(dir.path());
        if let Some(previous) = last {
            assert!(generation > previous, "the writer made no progress");
        }
        eprintln!("killed after {delay_ms} ms at generation {generation}");
        last = Some(generation);
    }
    // The store stays writable and converges after the crashes.
    let store = EmbeddedStore::open(dir.path()).unwrap();
    store.delete_chunks(&store.ids_in_namespace("o/crash@main").unwrap()).unwrap();
    assert!(store.is_empty());
    assert!(store.check().unwrap().is_consistent());
}
