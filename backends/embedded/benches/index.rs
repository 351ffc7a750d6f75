//! Indexing benchmark: `cargo bench -p rr-embedded --bench index`.
//!
//! Generates 1M chunks (`RR_BENCH_N` sets another count) with the corpus of
//! `benches/common`, embeds each with the 256-d `hash` embedder and writes
//! them into a fresh embedded store in batches of [`MAX_BATCH_SIZE`], batch
//! by batch as they are generated (as an indexer streams its records), then
//! reopens the store. Prints chunks/s of embedding plus writing, the time
//! spent writing alone, the peak resident memory of the process (`VmHWM`),
//! the resident memory at the end and the database size.
//!
//! Without `--bench` (`cargo test --all-targets`) it indexes 5,000 chunks
//! and checks that all of them are found after a reopen.

use std::time::{Duration, Instant};

use rr_core::{EmbeddedChunk, SearchFilter};
use rr_embedded::{EmbeddedStore, MAX_BATCH_SIZE};
use rr_hash_embed::HashEmbedder;

mod common;

use common::*;

/// A line of `/proc/self/status` in MiB; NaN where there is none.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let timed = std::env::args().any(|arg| arg == "--bench");
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let n: usize =
        std::env::var("RR_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(if timed { 1_000_000 } else { 5_000 });
    let dir = tempfile::tempdir().unwrap();
    let zipf = Zipf::new();
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    let embedder = HashEmbedder::default();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let start = Instant::now();
    let mut writing = Duration::ZERO;
    let mut rng = Rng(0x1de7_0000 + n as u64);
    generate_in_batches(
        n,
        &mut rng,
        &zipf,
        &words,
        MAX_BATCH_SIZE,
        |_, document| embedder.embed_text(document),
        |batch| {
            let records: Vec<EmbeddedChunk> = batch.into_iter().map(|(_, c)| c).collect();
            let t = Instant::now();
            store.upsert_chunks(&records).unwrap();
            writing += t.elapsed();
        },
    );
    let total = start.elapsed();
    let rss_indexed = status_mib("VmRSS:");
    drop(store);
    let t = Instant::now();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let reopen = t.elapsed();
    assert_eq!(store.len(), n);
    let probe = embedder.embed_text("retry handler config");
    assert!(!store.search(&probe, &SearchFilter::default(), 5).unwrap().is_empty());
    let db_mib = std::fs::metadata(dir.path().join(rr_embedded::DATABASE_FILE)).map_or(0, |m| m.len()) as f64
        / (1u64 << 20) as f64;
    println!(
        "- {n} chunks, hash embedder, batches of {MAX_BATCH_SIZE}: {:.0} chunks/s ({:.1} s; {:.1} s of it writing, \
         {:.0} chunks/s); peak VmHWM {:.0} MiB, VmRSS {rss_indexed:.0} MiB after indexing, {:.0} MiB after a \
         reopen ({:.1} s); database {db_mib:.0} MiB",
        n as f64 / total.as_secs_f64(),
        total.as_secs_f64(),
        writing.as_secs_f64(),
        n as f64 / writing.as_secs_f64(),
        status_mib("VmHWM:"),
        status_mib("VmRSS:"),
        reopen.as_secs_f64(),
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "- load average at the end (1, 5, 15 min): {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
}
