//! Embedded store benchmark: `cargo bench -p rr-embedded --bench search`.
//!
//! Generates 10k, 100k and 1M chunks (random unit 256-d vectors, realistic
//! metadata and `Source:` lines, ~10 chunks per file over 3 organizations,
//! 12 repositories and 2 branches), writes them in batches of 1000 as they
//! are generated, reopens the store in a fresh process (so resident memory
//! is the store's), and prints a Markdown table of search latency (p50/p99
//! wall time and mean CPU time over 200 queries, k = 15, the engine's
//! candidate count for 5 results), write throughput, reopen time and
//! resident memory. A second table sets each vector case beside the 2-bit
//! scan of every passing row (the index before its sign codes) and the exact
//! `f32` scan of every row (what the store did before its quantised index),
//! run in the same process on the same queries (the 2-bit scan interleaved
//! with the index, query by query; the exact scan after the resident memory
//! is read), with the CPU time of each (every thread, so the exact scan's
//! two threads count twice) and recall@10 of both indexes against the exact
//! scan. A glob row of the first table is timed with the index's
//! remembered glob answers forgotten before each query, as for a new glob.
//! The hybrid rows read the fused head again (the default); one more row
//! times the fused order alone, for that second look's cost.
//! A third table sets the lexical and hybrid cases, executed by the
//! persistent lexical index (the default), beside the same queries executed
//! by FTS5's own plan and by the postings read from FTS5 into memory (the
//! execution before the index), in the same process, with the CPU-time
//! ratios; a cold row drops every lexical cache before each query, and a
//! last row writes and deletes one chunk before each query.
//!
//! `RR_BENCH_SIZES=100000` runs only the given sizes; `RR_BENCH_KEEP_DIR=DIR`
//! keeps the written stores in `DIR` and reuses them on the next run;
//! `RR_BENCH_VECTOR_ONLY=1` runs the vector cases alone;
//! `RR_BENCH_BASELINE_QUERIES=40` times FTS5's scan on the first 40 queries
//! only (each takes a quarter second at 1M chunks);
//! `RR_BENCH_BASELINE_QUERIES=0` leaves it out.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rr_core::retrieval::HybridOptions;
use rr_core::{Candidate, EmbeddedChunk, PathGlob, SearchFilter};
use rr_embedded::{EmbeddedError, EmbeddedStore, LexicalPlan, MAX_BATCH_SIZE};

mod common;

use common::*;

const QUERIES: usize = 200;
const K: usize = 15;

/// Resident memory in MiB; NaN where `/proc` has none.
fn rss_mib() -> f64 {
    rr_testkit::vm_rss_mib().unwrap_or(f64::NAN)
}

/// CPU time of the whole process so far (user + system), in milliseconds.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line, in clock ticks (100 per second here).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(11) + ticks(12)) * 10.0
}

fn percentiles(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(times[times.len() / 2]), ms(times[(times.len() * 99).div_ceil(100) - 1]))
}

/// p50 and p99 wall time, and mean CPU time, of one query, in ms.
fn time_queries(f: impl FnMut(usize) -> usize) -> (f64, f64, f64) {
    time_first(QUERIES, f)
}

/// [`time_queries`] over the first `count` queries.
fn time_first(count: usize, mut f: impl FnMut(usize) -> usize) -> (f64, f64, f64) {
    for i in 0..10 {
        f(i);
    }
    let cpu = cpu_ms();
    let (p50, p99) = percentiles(
        (0..count)
            .map(|i| {
                let t = Instant::now();
                let found = f(i);
                let elapsed = t.elapsed();
                assert!(found > 0, "query {i} found nothing");
                elapsed
            })
            .collect(),
    );
    (p50, p99, (cpu_ms() - cpu) / count as f64)
}

/// Set in the child process that opens and queries a written store, so its
/// resident memory is the store's and not the generator's.
const CHILD_ENV: &str = "RR_BENCH_STORE_DIR";
/// Marks the child's rows of the index-versus-exact-scan table.
const VERSUS: &str = "VERSUS ";
/// Marks the child's rows of the lexical-execution table.
const LEXICAL_VERSUS: &str = "LEXICAL ";
/// The depth of the recall measure.
const RECALL_AT: usize = 10;

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let n: usize = std::env::var("RR_BENCH_N").unwrap().parse().unwrap();
        query_phase(Path::new(&dir), n);
        return;
    }
    // `cargo bench` passes `--bench`. `cargo test --all-targets` runs this
    // binary without it (and in debug mode): then one small size (large enough
    // for every filter case to match) only checks
    // that every case runs, so the test suite stays quick.
    let timed = std::env::args().any(|arg| arg == "--bench");
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let default_sizes = if timed { vec![10_000, 100_000, 1_000_000] } else { vec![5_000] };
    let sizes: Vec<usize> = std::env::var("RR_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or(default_sizes);
    println!("| chunks | case | p50 ms | p99 ms | CPU ms/query |");
    println!("|---:|---|---:|---:|---:|");
    let mut notes = Vec::new();
    let mut versus = Vec::new();
    let mut lexical_versus = Vec::new();
    let zipf = Zipf::new();
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    for n in sizes {
        let (dir, write) = written_store(n, &zipf, &words);
        let output = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, dir.path())
            .env("RR_BENCH_N", n.to_string())
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(output.status.success(), "query phase failed");
        let text = String::from_utf8(output.stdout).unwrap();
        let (rows, note) = text.rsplit_once("NOTE ").unwrap();
        for line in rows.lines() {
            if let Some(row) = line.strip_prefix(VERSUS) {
                versus.push(row.to_owned());
            } else if let Some(row) = line.strip_prefix(LEXICAL_VERSUS) {
                lexical_versus.push(row.to_owned());
            } else {
                println!("{line}");
            }
        }
        let db_mib = std::fs::metadata(dir.path().join(rr_embedded::DATABASE_FILE)).map_or(0, |m| m.len()) as f64
            / (1u64 << 20) as f64;
        let write = match write {
            Some(t) => format!(
                "write {:.0} chunks/s ({:.1} s in batches of {MAX_BATCH_SIZE})",
                n as f64 / t.as_secs_f64(),
                t.as_secs_f64()
            ),
            None => format!("store reused from {KEEP_ENV}"),
        };
        notes.push(format!("{n} chunks: {write}; {}; database {db_mib:.0} MiB", note.trim()));
    }
    println!();
    println!(
        "| chunks | case | exact scan p50 ms | 2-bit scan p50 ms | index p50 ms | exact scan p99 ms | 2-bit scan p99 ms \
         | index p99 ms | exact scan CPU ms | 2-bit scan CPU ms | index CPU ms | exact / index CPU | 2-bit recall@10 \
         | index recall@10 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in versus {
        println!("{row}");
    }
    println!();
    print_lexical_versus(&lexical_versus);
    println!();
    for note in notes {
        println!("- {note}");
    }
    // Other work on the machine skews every number above; say how much.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "- load average at the end (1, 5, 15 min): {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
}

/// Names a folder where the written stores are kept (`<folder>/<n>`) and
/// reused by later runs, which then skip the write phase: comparing two
/// builds' query times back to back takes seconds instead of minutes.
const KEEP_ENV: &str = "RR_BENCH_KEEP_DIR";

/// A store that holds the `n` generated chunks, and the time writing it took
/// (`None` when a kept one was reused).
fn written_store(n: usize, zipf: &Zipf, words: &[String]) -> (StoreDir, Option<Duration>) {
    let dir = match std::env::var_os(KEEP_ENV) {
        Some(root) => {
            let path = Path::new(&root).join(n.to_string());
            if path.join(rr_embedded::DATABASE_FILE).exists() {
                return (StoreDir::Kept(path), None);
            }
            StoreDir::Kept(path)
        }
        None => StoreDir::Temp(tempfile::tempdir().unwrap()),
    };
    let mut rng = Rng(0x5eed_0000 + n as u64);
    let store = EmbeddedStore::open(dir.path()).unwrap();
    // Generated batch by batch and written as it comes, as an indexer would:
    // a million chunks never sit in memory at once.
    let mut writing = Duration::ZERO;
    generate_in_batches(
        n,
        &mut rng,
        zipf,
        words,
        MAX_BATCH_SIZE,
        |rng, _| rng.unit_vector(DIM),
        |batch| {
            let records: Vec<EmbeddedChunk> = batch.into_iter().map(|(_, c)| c).collect();
            let t = Instant::now();
            store.upsert_chunks(&records).unwrap();
            writing += t.elapsed();
        },
    );
    (dir, Some(writing))
}

enum StoreDir {
    Temp(tempfile::TempDir),
    Kept(std::path::PathBuf),
}

impl StoreDir {
    fn path(&self) -> &Path {
        match self {
            StoreDir::Temp(dir) => dir.path(),
            StoreDir::Kept(path) => path,
        }
    }
}

/// Latency of one way of running a vector case, and the ids each query found.
struct VectorRow {
    p50: f64,
    p99: f64,
    /// Mean CPU time of a query (every thread), in ms.
    cpu: f64,
    ids: Vec<Vec<String>>,
}

/// Times [`EmbeddedStore::search`] and the 2-bit scan of every passing row
/// (`search_without_signs`) on the same queries, alternating query by query
/// (and which goes first) so that both see the same load from other work on
/// the machine and the same caches.
fn vector_rows(store: &EmbeddedStore, queries: &[Vec<f32>], filter: &SearchFilter) -> (VectorRow, VectorRow) {
    type Search = fn(&EmbeddedStore, &[f32], &SearchFilter, usize) -> Result<Vec<Candidate>, EmbeddedError>;
    let ways: [Search; 2] = [EmbeddedStore::search, EmbeddedStore::search_without_signs];
    let mut rows: Vec<(Vec<Duration>, Vec<Vec<String>>)> = vec![(Vec::new(), vec![Vec::new(); QUERIES]); 2];
    // Process CPU time is counted in clock ticks: summed over the timed
    // queries, the error of each reading averages out.
    let mut cpu = [0.0f64; 2];
    for i in 0..10 + QUERIES {
        // Whichever runs second finds the first one's rows and SQLite pages
        // in cache: take turns going first.
        let mut order = [0, 1];
        if i % 2 == 1 {
            order.reverse();
        }
        for way in order {
            let (search, (times, ids)) = (ways[way], &mut rows[way]);
            let (t, c) = (Instant::now(), cpu_ms());
            let found = search(store, &queries[i % QUERIES], filter, K).unwrap();
            let (elapsed, spent) = (t.elapsed(), cpu_ms() - c);
            assert!(!found.is_empty(), "query {i} found nothing");
            // The first ten rounds are the warm-up.
            if i >= 10 {
                times.push(elapsed);
                cpu[way] += spent;
            }
            ids[i % QUERIES] = found.iter().map(|c| c.chunk.id.clone()).collect();
        }
    }
    let mut rows = rows.into_iter().zip(cpu).map(|((times, ids), cpu)| {
        let (p50, p99) = percentiles(times);
        VectorRow { p50, p99, cpu: cpu / QUERIES as f64, ids }
    });
    (rows.next().unwrap(), rows.next().unwrap())
}

/// Opens the store in a fresh process, runs the queries, prints table rows
/// and a final `NOTE` line with the reopen time and resident memory.
fn query_phase(dir: &Path, n: usize) {
    let zipf = Zipf::new();
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    let mut rng = Rng(0x0bad_5eed + n as u64);
    let rss_before_open = rss_mib();
    let t = Instant::now();
    let store = EmbeddedStore::open(dir).unwrap();
    let open = t.elapsed();
    let rss_after_open = rss_mib();
    assert_eq!(store.len(), n);
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|_| rng.unit_vector(DIM)).collect();
    let q = |i: usize| &queries[i % QUERIES];
    let none = SearchFilter::default();
    let source = SearchFilter {
        organization: "acme".into(),
        repository: "repo3".into(),
        branch: "main".into(),
        ..Default::default()
    };
    let glob = SearchFilter { path: PathGlob::new("**/*.go"), ..Default::default() };
    let both = SearchFilter { path: PathGlob::new("internal/**"), ..source.clone() };
    let cases: [(&str, &SearchFilter); 4] = [
        ("vector, no filter", &none),
        ("vector, source filter", &source),
        ("vector, path glob **/*.go", &glob),
        ("vector, source + glob internal/**", &both),
    ];
    let mut index_rows = Vec::new();
    for (name, f) in cases {
        let (p50, p99, cpu) = time_queries(|i| store.search(q(i), f, K).unwrap().len());
        println!("| {n} | {name} | {p50:.2} | {p99:.2} | {cpu:.2} |");
        let (index, coarse) = vector_rows(&store, &queries, f);
        index_rows.push((name, f, index, coarse));
    }
    // The CPU column of this row is the calling thread's: a large glob's
    // first evaluation also runs on a second thread, which it leaves out.
    let (p50, p99, cpu) = time_cold(|_| store.forget_glob_answers(), |i| store.search(q(i), &glob, K).unwrap().len());
    println!("| {n} | vector, path glob **/*.go, first query of the glob | {p50:.2} | {p99:.2} | {cpu:.2} |");
    // `RR_BENCH_VECTOR_ONLY=1` leaves the lexical cases out: comparing two
    // builds of the vector index at 1M then takes minutes, not tens of them.
    let (lexical, rss_lexical) = if std::env::var_os(VECTOR_ONLY_ENV).is_some() {
        (Vec::new(), f64::NAN)
    } else {
        lexical_cases(&store, n, &zipf, &words, &mut rng, &queries, &none, &source)
    };
    let rss_after_queries = rss_mib();
    // The exact scan over an f32 copy of every vector: the store's search
    // before the quantised index, and the reference of the recall column.
    let scan = store.exact_scan().unwrap();
    for (name, f, index, coarse) in index_rows {
        let (mut found, mut found_coarse, mut calls) = (0, 0, 0);
        let (exact_p50, exact_p99, exact_cpu) = time_queries(|i| {
            let exact = store.search_exact(&scan, q(i), f, K).unwrap();
            calls += 1;
            // The first ten calls are the warm-up.
            if calls > 10 {
                let want: Vec<&str> = exact.iter().take(RECALL_AT).map(|c| c.chunk.id.as_str()).collect();
                let hits = |ids: &[String]| ids.iter().take(RECALL_AT).filter(|id| want.contains(&id.as_str())).count();
                found += hits(&index.ids[i % QUERIES]);
                found_coarse += hits(&coarse.ids[i % QUERIES]);
            }
            exact.len()
        });
        let recall = |found: usize| found as f64 / (QUERIES * RECALL_AT) as f64;
        println!(
            "{VERSUS}| {n} | {name} | {exact_p50:.2} | {:.2} | {:.2} | {exact_p99:.2} | {:.2} | {:.2} \
             | {exact_cpu:.2} | {:.2} | {:.2} | {:.1}× | {:.4} | {:.4} |",
            coarse.p50,
            index.p50,
            coarse.p99,
            index.p99,
            coarse.cpu,
            index.cpu,
            exact_cpu / index.cpu,
            recall(found_coarse),
            recall(found),
        );
    }
    for row in lexical {
        println!("{LEXICAL_VERSUS}{row}");
    }
    println!(
        "NOTE reopen {:.0} ms; VmRSS of a fresh process: {rss_before_open:.0} MiB before opening, \
         {rss_after_open:.0} MiB after, {rss_lexical:.0} MiB with the lexical index's cache warm, \
         {rss_after_queries:.0} MiB after the queries \
         ({:.0} MiB with the exact scan's f32 copy)",
        open.as_secs_f64() * 1e3,
        rss_mib(),
    );
}

/// Set to leave the lexical and hybrid cases out.
const VECTOR_ONLY_ENV: &str = "RR_BENCH_VECTOR_ONLY";

/// Queries timed cold, after the lexical caches are dropped: each costs
/// what the first query after a write costs.
const COLD_QUERIES: usize = 20;

/// CPU time of the calling thread so far, in milliseconds (nanosecond
/// resolution, from the scheduler's statistics); NaN where `/proc` has none.
fn thread_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse::<f64>().ok()).map_or(f64::NAN, |ns| ns / 1e6)
}

/// Lexical and hybrid rows of the main table (the default execution), and
/// the rows of the lexical-execution table: FTS5 scoring every allowed
/// match against the persistent index, on the same queries in the same
/// process, then the index cold and after a write. Also the resident memory
/// with the index's cache warm.
#[allow(clippy::too_many_arguments)]
fn lexical_cases(
    store: &EmbeddedStore,
    n: usize,
    zipf: &Zipf,
    words: &[String],
    rng: &mut Rng,
    queries: &[Vec<f32>],
    none: &SearchFilter,
    source: &SearchFilter,
) -> (Vec<String>, f64) {
    // Three words drawn like the text's, so most queries hold a word found
    // in most chunks and a rarer identifier or two.
    let texts: Vec<String> =
        (0..QUERIES).map(|_| (0..3).map(|_| words[zipf.sample(rng)].as_str()).collect::<Vec<_>>().join(" ")).collect();
    let q = |i: usize| &queries[i % QUERIES];
    let options = HybridOptions::default();
    type Run<'a> = Box<dyn Fn(usize) -> usize + 'a>;
    let (texts, options) = (&texts, &options);
    let names = [
        "lexical (BM25), no filter",
        "lexical (BM25), source filter",
        "hybrid (RRF), no filter",
        "hybrid (RRF), source filter",
    ];
    let run = |case: usize, plan: LexicalPlan| -> Run<'_> {
        let filter = if case.is_multiple_of(2) { none } else { source };
        match case < 2 {
            true => Box::new(move |i| store.lexical_search_planned(&texts[i], filter, K, plan).unwrap().len()),
            false => {
                Box::new(move |i| store.hybrid_search_planned(&texts[i], q(i), filter, K, options, plan).unwrap().len())
            }
        }
    };
    // The executions compared with take a quarter second a query at 1M
    // chunks: `RR_BENCH_BASELINE_QUERIES` times them on fewer queries.
    let baseline: usize = std::env::var("RR_BENCH_BASELINE_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(QUERIES, |n: usize| if n == 0 { 0 } else { n.clamp(10, QUERIES) });
    let mut rows = Vec::new();
    for (case, name) in names.iter().enumerate() {
        let (fts5, index) = (run(case, LexicalPlan::Fts5), run(case, LexicalPlan::Index));
        // Every query once with each execution first, so both are timed
        // with what they keep between writes in place (the cold rows below
        // time the opposite).
        for i in 0..QUERIES {
            if i < baseline {
                fts5(i);
            }
            index(i);
        }
        let (fts5_p50, fts5_p99, fts5_cpu) = match baseline {
            0 => (f64::NAN, f64::NAN, f64::NAN),
            _ => time_first(baseline, &fts5),
        };
        let (p50, p99, cpu) = time_queries(&index);
        println!("| {n} | {name} | {p50:.2} | {p99:.2} | {cpu:.2} |");
        rows.push(format!(
            "| {n} | {name} | {fts5_p50:.2} | {p50:.2} | {fts5_p99:.2} | {p99:.2} | {fts5_cpu:.2} | {cpu:.2} | {:.1}× |",
            fts5_cpu / cpu
        ));
    }
    // The hybrid case without the second look at its head, for the cost of
    // that look in the same process.
    let fused_only = HybridOptions { rerank: 0, ..*options };
    let fused = |i: usize| {
        store.hybrid_search_planned(&texts[i], q(i), none, K, &fused_only, LexicalPlan::Index).unwrap().len()
    };
    (0..QUERIES).for_each(|i| _ = fused(i));
    let (p50, p99, cpu) = time_queries(&fused);
    println!(
        "| {n} | hybrid (RRF), no filter, the fused order only (`hybrid_rerank` 0) | {p50:.2} | {p99:.2} | {cpu:.2} |"
    );
    let rss = rss_mib();
    let index = run(0, LexicalPlan::Index);
    let forget = |_: usize| store.forget_lexical_caches();
    let (p50, p99, cpu) = time_cold(forget, &index);
    rows.push(format!("| {n} | {}, cold (every cache dropped) | | {p50:.2} | | {p99:.2} | | {cpu:.2} | |", names[0]));
    // A real write between queries: one chunk of the corpus's words
    // written and deleted again, so the store ends as it was.
    let mut probe = generate(1, rng, zipf, words, |rng, _| rng.unit_vector(DIM));
    let mut record = probe.pop().unwrap().1;
    record.chunk.id = "bench-probe".into();
    let write = |_: usize| {
        store.upsert_chunks(std::slice::from_ref(&record)).unwrap();
        store.delete_chunks(&[record.chunk.id.clone()]).unwrap();
    };
    let (p50, p99, cpu) = time_cold(write, &index);
    rows.push(format!(
        "| {n} | {}, after a 1-chunk write and delete | | {p50:.2} | | {p99:.2} | | {cpu:.2} | |",
        names[0]
    ));
    (rows, rss)
}

/// [`time_queries`] over [`COLD_QUERIES`] queries without warm-up, each
/// after `prepare` (not timed).
fn time_cold(prepare: impl Fn(usize), f: impl Fn(usize) -> usize) -> (f64, f64, f64) {
    let mut cpu = 0.0;
    let times = (0..COLD_QUERIES)
        .map(|i| {
            prepare(i);
            let (t, c) = (Instant::now(), thread_cpu_ms());
            assert!(f(i) > 0, "query {i} found nothing");
            cpu += thread_cpu_ms() - c;
            t.elapsed()
        })
        .collect();
    let (p50, p99) = percentiles(times);
    (p50, p99, cpu / COLD_QUERIES as f64)
}

fn print_lexical_versus(rows: &[String]) {
    println!(
        "| chunks | case | FTS5 p50 ms | index p50 ms | FTS5 p99 ms | index p99 ms | FTS5 CPU ms | index CPU ms \
         | FTS5 / index CPU |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
}
