//! Federated search benchmark: `cargo bench -p rr-embedded --bench federated`.
//!
//! Generates N chunks (default 40k; `RR_BENCH_N` overrides) with realistic
//! metadata over 3 organizations, 12 repositories and 2 branches, embeds each
//! with the 256-d hash embedder, and writes them once into one embedded store
//! and once split by repository across 2 and across 4 embedded stores (each
//! store holds whole repositories, as an organization with several stores
//! would). Every store answers through the same hash embedder instance, so a
//! federated query is embedded once, as with one store.
//!
//! The whole call is the real pipeline: `SearchEngine::search` over one store
//! (the baseline, measured in the same run) and over a federated `SearchEngine` of 2
//! and of 4 stores. Each store sits behind a thin `VectorStore` wrapper that
//! records how long its own `query` took (including the hop to tokio's
//! blocking pool), so every call yields `overhead = total − slowest store`:
//! what fan-out, fusion and selection add on top of the slowest store. The
//! issue's target is an overhead of at most 1 ms.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it, in debug mode)
//! it only runs a small smoke check of every case.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rr_core::{
    BackendError, CallContext, Candidate, EmbeddedChunk, Embedder, FederatedStore, PipelineOptions, RerankOptions,
    SearchArgs, SearchEngine, VectorQuery, VectorStore,
};
use rr_embedded::{EmbeddedStore, MAX_BATCH_SIZE};
use rr_hash_embed::HashEmbedder;

mod common;

use common::*;

const LIMITS: [usize; 2] = [5, 20];

/// A store that records how long its last `query` took.
struct Timed {
    inner: EmbeddedStore,
    last: Mutex<Duration>,
}

#[async_trait]
impl VectorStore for Timed {
    fn name(&self) -> &str {
        "embedded"
    }
    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        let t = Instant::now();
        let result = VectorStore::query(&self.inner, query, ctx).await;
        *self.last.lock().unwrap() = t.elapsed();
        result
    }
    async fn dimension(&self, _ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        Ok(self.inner.dimension())
    }
}

/// Writes the chunks whose repository index passes `keep` into a fresh store
/// in `dir`.
fn build(dir: &std::path::Path, chunks: &[(usize, EmbeddedChunk)], keep: impl Fn(usize) -> bool) -> Arc<Timed> {
    let store = EmbeddedStore::open(dir).unwrap();
    let mine: Vec<EmbeddedChunk> = chunks.iter().filter(|(r, _)| keep(*r)).map(|(_, c)| c.clone()).collect();
    for batch in mine.chunks(MAX_BATCH_SIZE) {
        store.upsert_chunks(batch).unwrap();
    }
    assert_eq!(store.len(), mine.len());
    Arc::new(Timed { inner: store, last: Mutex::new(Duration::ZERO) })
}

struct Setup {
    stores: usize,
    engine: SearchEngine,
    timed: Vec<Arc<Timed>>,
}

/// Per-call measurements of one case.
struct Calls {
    total: Vec<Duration>,
    slowest: Vec<Duration>,
    ids: Vec<Vec<String>>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(times: &[Duration], p: usize) -> f64 {
    let mut t = times.to_vec();
    t.sort();
    ms(t[(t.len() * p).div_ceil(100).max(1) - 1])
}

fn run(rt: &tokio::runtime::Runtime, setup: &Setup, queries: &[String], limit: usize, warmup: usize) -> Calls {
    let ctx = CallContext::default();
    let mut calls = Calls { total: Vec::new(), slowest: Vec::new(), ids: Vec::new() };
    for (i, query) in queries.iter().enumerate() {
        let request =
            SearchArgs { query: query.clone(), limit: limit as i64, ..Default::default() }.validate().unwrap();
        for t in &setup.timed {
            *t.last.lock().unwrap() = Duration::ZERO;
        }
        let t = Instant::now();
        let results = rt.block_on(setup.engine.search(&request, &ctx)).unwrap();
        let total = t.elapsed();
        let slowest = setup.timed.iter().map(|t| *t.last.lock().unwrap()).max().unwrap();
        assert!(!results.is_empty(), "{} stores: query {i} found nothing", setup.stores);
        assert!(slowest > Duration::ZERO, "{} stores: no store timed on query {i}", setup.stores);
        if i >= warmup {
            calls.total.push(total);
            calls.slowest.push(slowest);
            calls.ids.push(results.into_iter().map(|c| c.chunk.id).collect());
        }
    }
    calls
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this
    // binary without it, in debug mode: then a small size only checks that
    // every case runs.
    let timed = std::env::args().any(|arg| arg == "--bench");
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let n: usize = std::env::var("RR_BENCH_N").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(if timed {
        40_000
    } else {
        1_200
    });
    let (queries_per_case, warmup) = if timed { (500, 50) } else { (12, 2) };

    let embedder = HashEmbedder::new(DIM).unwrap();
    let zipf = Zipf::new();
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    let mut rng = Rng(0x5eed_fed0 + n as u64);
    let t = Instant::now();
    let chunks = generate(n, &mut rng, &zipf, &words, |_, document| embedder.embed_text(document));
    let generated = t.elapsed();
    // Three words drawn like the text's: most queries mix a word found in
    // most chunks with a rarer identifier or two.
    let queries: Vec<String> = (0..queries_per_case + warmup)
        .map(|_| (0..3).map(|_| words[zipf.sample(&mut rng)].as_str()).collect::<Vec<_>>().join(" "))
        .collect();

    let shared: Arc<dyn Embedder> = Arc::new(embedder);
    let root = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let mut setups = Vec::new();
    for stores in [1usize, 2, 4] {
        let timed: Vec<Arc<Timed>> = (0..stores)
            .map(|s| build(&root.path().join(format!("{stores}-{s}")), &chunks, |r| r % stores == s))
            .collect();
        let engine = if stores == 1 {
            SearchEngine::new(shared.clone(), timed[0].clone(), None, PipelineOptions::default())
        } else {
            let members = timed
                .iter()
                .enumerate()
                .map(|(s, t)| {
                    FederatedStore::new(format!("store{s}"), t.clone() as Arc<dyn VectorStore>, shared.clone())
                })
                .collect();
            SearchEngine::federated(members, None, RerankOptions::default())
        };
        setups.push(Setup { stores, engine, timed });
    }
    let written = t.elapsed();
    drop(chunks);

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "| stores | limit | p50 ms | p99 ms | slowest store p50 | slowest store p99 | overhead p50 | overhead p99 | calls with overhead ≤ 1 ms | p50 / 1 store | p99 / 1 store | top-`limit` overlap with 1 store |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for limit in LIMITS {
        let mut baseline: Option<Calls> = None;
        for setup in &setups {
            let calls = run(&rt, setup, &queries, limit, warmup);
            let overhead: Vec<Duration> =
                calls.total.iter().zip(&calls.slowest).map(|(t, s)| t.saturating_sub(*s)).collect();
            let within = overhead.iter().filter(|o| **o <= Duration::from_millis(1)).count();
            let (p50, p99) = (percentile(&calls.total, 50), percentile(&calls.total, 99));
            let base = baseline.as_ref().unwrap_or(&calls);
            let overlap = calls
                .ids
                .iter()
                .zip(&base.ids)
                .map(|(a, b)| a.iter().filter(|id| b.contains(id)).count() as f64 / b.len().max(1) as f64)
                .sum::<f64>()
                / calls.ids.len() as f64;
            println!(
                "| {} | {limit} | {p50:.2} | {p99:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} % | {:.2}× | {:.2}× | {:.0} % |",
                setup.stores,
                percentile(&calls.slowest, 50),
                percentile(&calls.slowest, 99),
                percentile(&overhead, 50),
                percentile(&overhead, 99),
                100.0 * within as f64 / overhead.len() as f64,
                p50 / percentile(&base.total, 50),
                p99 / percentile(&base.total, 99),
                100.0 * overlap,
            );
            if baseline.is_none() {
                baseline = Some(calls);
            }
        }
    }
    println!();
    println!(
        "- {n} chunks, {DIM}-d hash embeddings, {REPOSITORIES} repositories split round-robin across the stores; \
         {queries_per_case} queries per row after {warmup} warm-up calls, one call at a time"
    );
    println!(
        "- setup: generate + embed {:.1} s; write 1 + 2 + 4 stores {:.1} s",
        generated.as_secs_f64(),
        written.as_secs_f64()
    );
    // Other work on the machine skews every number above; say how much.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "- load average at the end (1, 5, 15 min): {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
}
