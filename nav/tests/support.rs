//! What the navigation-tool tests share: the corpus indexed into an embedded store, tool calls that
//! must succeed or fail, the wait for an `add_repository` to finish, and the test binary's Chroma
//! fixture. The server's integration tests include this file as their `support::nav`; each binary uses
//! part of it.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rr_nav::{NavConfig, NavService};
use serde_json::{Value, json};

/// The commit the tests index `testdata/corpus` at (the reference records carry the same).
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

pub use rr_testkit::corpus;

/// The test binary's Chroma, embed server and fixture collection; the services' logs go to
/// `CARGO_TARGET_TMPDIR/test-services`.
pub fn fixture() -> &'static rr_testkit::Fixture {
    rr_testkit::fixture(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-services"))
}

/// `get_file`'s numbering of a text.
pub fn numbered(text: &str) -> String {
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').enumerate().map(|(i, l)| format!("{:>4}| {l}", i + 1)).collect::<Vec<_>>().join("\n")
}

/// The default settings with loopback git refused (the production setting).
pub fn off() -> NavConfig {
    NavConfig { allow_loopback_git: false, ..NavConfig::default() }
}

/// Indexes `root` into the embedded store in `store` as `org/repo@branch` at [`COMMIT`].
pub async fn index(root: &Path, store: &Path, org: &str, repo: &str, branch: &str) {
    index_chunked(root, store, org, repo, branch, None).await;
}

/// [`index`] with a chunking (`None`: the store's, or the default of a new one).
pub async fn index_chunked(
    root: &Path,
    store: &Path,
    org: &str,
    repo: &str,
    branch: &str,
    chunking: Option<rr_indexer::ChunkingScheme>,
) {
    let request = rr_engine::local::IndexRequest {
        root: root.to_path_buf(),
        store: store.to_path_buf(),
        chroma: None,
        lexical_index: false,
        chunking,
        identity: rr_indexer::Identity {
            organization: org.into(),
            repository: repo.into(),
            branch: branch.into(),
            commit_sha: COMMIT.into(),
            source_host: None,
        },
        options: rr_indexer::IndexOptions::default(),
        batch_size: 100,
        dry_run: false,
        output_manifest: None,
        progress: None,
    };
    rr_engine::local::index(request).await.expect("index");
}

/// The JSON answer of a tool call that must succeed.
pub async fn ok(nav: &Arc<NavService>, tool: &str, args: Value) -> Value {
    let text = nav.call(tool, Some(&args)).await.expect("known tool").unwrap_or_else(|e| panic!("{tool}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The message of a tool call that must fail.
pub async fn err(nav: &Arc<NavService>, tool: &str, args: Value) -> String {
    nav.call(tool, Some(&args)).await.expect("known tool").expect_err("a tool error")
}

/// Polls `list_repositories` until repository `id` is `completed` (at most 120 s) and returns its
/// entry; a `failed` one fails the test. `each_poll` checks every listing on the way.
pub async fn wait_until_indexed(nav: &Arc<NavService>, id: i64, each_poll: impl Fn(&Value)) -> Value {
    let started = Instant::now();
    loop {
        let list = ok(nav, "list_repositories", json!({})).await;
        each_poll(&list);
        let repos = list["repositories"].as_array().unwrap();
        let repo = repos.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no repository {id}: {list}"));
        match repo["status"].as_str().unwrap() {
            "completed" => return repo.clone(),
            "failed" => panic!("indexing failed: {repo}"),
            _ => {
                assert!(started.elapsed() < Duration::from_secs(120), "{repo}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
