//! The navigation tools on a generated repository of about 2,000 files:
//! p50/p99 per call of get_file, list_definitions, find_patterns (literal
//! and regex) and search_code, through `NavService::call` (validation,
//! resolution, the blocking pool and JSON rendering included).
//!
//! `cargo bench -p repo-retriever --bench nav` runs the full size; without
//! `--bench` (as `cargo test --all-targets` runs it) it is a smoke check on
//! a few files.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rr_nav::{NavConfig, NavService};
use serde_json::{Value, json};

fn generate(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("pkg{:02}", i % 40));
        std::fs::create_dir_all(&dir).unwrap();
        match i % 4 {
            0 | 1 => {
                let mut s = format!("package pkg{:02}\n\nimport \"fmt\"\n\n", i % 40);
                for f in 0..6 {
                    s.push_str(&format!(
                        "// Handler{i}x{f} handles request {f} of file {i}.\nfunc Handler{i}x{f}(ctx Context, id int) error {{\n\tif id < 0 {{\n\t\treturn fmt.Errorf(\"bad id %d\", id)\n\t}}\n\tretryWithBackoff(ctx, id)\n\treturn nil\n}}\n\n"
                    ));
                }
                s.push_str(&format!("type Store{i} struct {{\n\tname string\n}}\n"));
                std::fs::write(dir.join(format!("file{i}.go")), s).unwrap();
            }
            2 => {
                let mut s = String::from("import os\n\n");
                for f in 0..5 {
                    s.push_str(&format!(
                        "def parse_item_{i}_{f}(value):\n    \"\"\"Parse one item.\"\"\"\n    if not value:\n        raise ValueError('empty')\n    return value.strip()\n\n\n"
                    ));
                }
                s.push_str(&format!(
                    "class Client{i}:\n    def fetch(self, key):\n        return os.environ.get(key)\n"
                ));
                std::fs::write(dir.join(format!("mod{i}.py")), s).unwrap();
            }
            _ => {
                let mut s = format!("# Guide {i}\n\nIntroduction to component {i}.\n\n");
                for f in 0..4 {
                    s.push_str(&format!("## Section {f}\n\nConfigure the retry policy and backoff for part {f}.\n\n"));
                }
                std::fs::write(dir.join(format!("guide{i}.md")), s).unwrap();
            }
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn measure(nav: &Arc<NavService>, tool: &str, args: impl Fn(usize) -> Value, n: usize) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let a = args(i);
        let started = Instant::now();
        let result = nav.call(tool, Some(&a)).await.expect("tool");
        times.push(started.elapsed());
        if let Err(e) = result {
            panic!("{tool} {a}: {e}");
        }
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (files, n) = if full { (2000, 200) } else { (24, 3) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let src = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        generate(src.path(), files);
        let started = Instant::now();
        rr_engine::local::index(rr_engine::local::IndexRequest {
            root: src.path().to_path_buf(),
            store: store.path().to_path_buf(),
            chroma: None,
            lexical_index: false,
            chunking: None,
            identity: rr_indexer::Identity {
                organization: "bench".into(),
                repository: "generated".into(),
                branch: "main".into(),
                commit_sha: String::new(),
                source_host: None,
            },
            options: rr_indexer::IndexOptions::default(),
            batch_size: 500,
            dry_run: false,
            output_manifest: None,
            progress: None,
        })
        .await
        .unwrap();
        let indexed = started.elapsed();
        let started = Instant::now();
        let nav = rr_engine::nav_embedded::open_dir(store.path(), NavConfig::default()).unwrap();
        let catalogued = started.elapsed();
        let analysis: Value = serde_json::from_str(
            &nav.call("analyze_repository", Some(&json!({"repository": "1"}))).await.unwrap().unwrap(),
        )
        .unwrap();
        eprintln!(
            "{} files, {} lines, {} definitions; index {:.1} s, catalogue {:.2} s",
            analysis["total_files"],
            analysis["total_lines"],
            analysis["total_entities"],
            indexed.as_secs_f64(),
            catalogued.as_secs_f64()
        );
        let files = files.max(1);
        let path = move |i: usize| {
            let i = (i * 4) % files;
            format!("pkg{:02}/file{i}.go", i % 40)
        };
        let rows = [
            ("get_file", measure(&nav, "get_file", |i| json!({"repository": "bench/generated", "path": path(i)}), n).await),
            (
                "list_definitions",
                measure(&nav, "list_definitions", |i| json!({"repository": "1", "path_prefix": format!("pkg{:02}/", i % 40)}), n).await,
            ),
            (
                "find_patterns (literal)",
                measure(&nav, "find_patterns", |_| json!({"repository": "1", "pattern": "func Handler1996x3(", "max_results": 100}), n).await,
            ),
            (
                "find_patterns (regex)",
                measure(&nav, "find_patterns", |_| json!({"repository": "1", "pattern": r"func Handler\d+x5\(", "regex": true, "max_results": 500}), n).await,
            ),
            (
                "search_code",
                measure(&nav, "search_code", |i| json!({"query": format!("parse item {}", i * 4 % files), "limit": 10}), n).await,
            ),
        ];
        println!("| tool | p50 | p99 |");
        println!("|---|---:|---:|");
        for (name, (p50, p99)) in rows {
            println!("| {name} | {:.2} ms | {:.2} ms |", p50.as_secs_f64() * 1e3, p99.as_secs_f64() * 1e3);
        }
    });
}
