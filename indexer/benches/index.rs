//! Index throughput, in two phases: discovery + chunking (`rr_indexer::build`)
//! and embedding + write (`sync` with the hash embedder into the embedded
//! store). Prints a Markdown table.
//!
//! `cargo bench -p rr-indexer --bench index` runs the full workload. Run
//! without `--bench` (as `cargo test --all-targets` does, in debug mode) it
//! only checks, on a small tree, that every phase works.

use std::path::Path;
use std::time::Instant;

use rr_embedded::EmbeddedStore;
use rr_hash_embed::HashEmbedder;
use rr_indexer::sync::{SyncOptions, sync_build};
use rr_indexer::{Identity, IndexOptions, build};
use rr_testkit::{Rng, vm_rss_mib};

const WORDS: [&str; 16] = [
    "widget", "store", "config", "load", "parse", "handler", "request", "cache", "index", "token", "client", "server",
    "query", "record", "batch", "retry",
];

fn ident(rng: &mut Rng) -> String {
    let a = WORDS[rng.below(16)];
    let b = WORDS[rng.below(16)];
    format!("{a}{}{}", b[..1].to_uppercase(), &b[1..])
}

fn go_file(rng: &mut Rng) -> String {
    let mut s = String::from("package demo\n\nimport \"fmt\"\n\n");
    for _ in 0..(3 + rng.below(6)) {
        let name = ident(rng);
        s.push_str(&format!("// {name} does one thing.\nfunc {name}(x int) int {{\n"));
        for i in 0..(3 + rng.below(12)) {
            s.push_str(&format!("\tfmt.Println(\"{} {i}\")\n\tx += {i}\n", ident(rng)));
        }
        s.push_str("\treturn x\n}\n\n");
    }
    s
}

fn python_file(rng: &mut Rng) -> String {
    let mut s = String::from("import os\n\n");
    for _ in 0..(2 + rng.below(5)) {
        s.push_str(&format!("class {}:\n", ident(rng)));
        for _ in 0..(2 + rng.below(4)) {
            s.push_str(&format!(
                "    def {}(self, value):\n        return os.path.join(value, \"{}\")\n\n",
                ident(rng).to_lowercase(),
                ident(rng)
            ));
        }
    }
    s
}

fn markdown_file(rng: &mut Rng) -> String {
    let mut s = format!("# {}\n\n", ident(rng));
    for _ in 0..(2 + rng.below(5)) {
        s.push_str(&format!("## {}\n\n", ident(rng)));
        for _ in 0..(2 + rng.below(6)) {
            s.push_str(&format!("The {} reads the {} before the {}.\n", ident(rng), ident(rng), ident(rng)));
        }
        s.push('\n');
    }
    s
}

/// A tree of `n` source files in nested folders: Go, Python and Markdown.
fn generate(root: &Path, n: usize) {
    // Seeded, so every run indexes the same tree.
    let mut rng = Rng(0x1dea_5eed);
    for i in 0..n {
        let dir = root.join(format!("pkg{}/sub{}", i % 40, i % 7));
        std::fs::create_dir_all(&dir).unwrap();
        let (name, text) = match i % 3 {
            0 => (format!("file{i}.go"), go_file(&mut rng)),
            1 => (format!("file{i}.py"), python_file(&mut rng)),
            _ => (format!("file{i}.md"), markdown_file(&mut rng)),
        };
        std::fs::write(dir.join(name), text).unwrap();
    }
}

fn row(corpus: &str, root: &Path, rt: &tokio::runtime::Runtime) {
    let identity = Identity {
        organization: "acme".into(),
        repository: "bench".into(),
        branch: "main".into(),
        commit_sha: String::new(),
        source_host: None,
    };
    let options = IndexOptions::default();
    let t = Instant::now();
    let built = build(root, &identity, &options).expect("build");
    let chunking = t.elapsed().as_secs_f64();
    let files = built.stats.files_indexed;
    let chunks = built.records.len();
    assert!(chunks > 0, "the tree yields chunks");

    let store_dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(store_dir.path()).unwrap();
    let embedder = HashEmbedder::default();
    let t = Instant::now();
    let summary = rt
        .block_on(sync_build(
            &store,
            &embedder,
            built,
            &identity,
            &SyncOptions { batch_size: 1000, ..Default::default() },
        ))
        .expect("sync");
    let writing = t.elapsed().as_secs_f64();
    assert_eq!(summary.chunks_added_or_updated, chunks);
    println!(
        "| {corpus} | {files} | {chunks} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.0} |",
        files as f64 / chunking,
        chunks as f64 / chunking,
        chunks as f64 / writing,
        chunking,
        writing,
        vm_rss_mib().unwrap_or(0.0)
    );
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "| corpus | files | chunks | chunking files/s | chunking chunks/s | embed+write chunks/s | chunking s | embed+write s | VmRSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/corpus");
    // Loading the tokenizer's ranks and the grammars is a one-time cost per
    // process; keep it out of the throughput rows.
    let warm_up = Identity::new("w", "w", "w", "");
    // Every grammar: the 24-language polyglot fixture.
    let polyglot = fixture.join("../polyglot/corpus");
    for corpus in [&fixture, &polyglot] {
        build(corpus, &warm_up, &IndexOptions::default()).expect("warm-up build");
    }
    row("fixture corpus", &fixture, &rt);
    row("polyglot corpus", &polyglot, &rt);
    let tree = tempfile::tempdir().unwrap();
    let n = if timed { 2_000 } else { 60 };
    generate(tree.path(), n);
    row(&format!("generated, {n} files"), tree.path(), &rt);
}
