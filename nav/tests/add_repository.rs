//! `add_repository` refusals with the loopback setting off (the
//! default), and the whole flow — pre-flight, `pending → processing →
//! completed`, the tools on the new repository — against `git daemon` on
//! 127.0.0.1 with the setting on; the pre-flight's messages for git's
//! failures, and git never following a redirect. Also the reassembly of
//! files from the reference indexer's Chroma records.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use rr_nav::add_repository::{RepoUrl, parse_url, preflight_error};
use rr_nav::reassemble::{missing_note, reassemble};
use rr_nav::{NavConfig, NavService};
use rr_testkit::serve_git;
use serde_json::{Value, json};

async fn err(nav: &Arc<NavService>, args: Value) -> String {
    nav.call("add_repository", Some(&args)).await.unwrap().expect_err("refused")
}

fn nav(allow: bool) -> (tempfile::TempDir, Arc<NavService>) {
    let dir = tempfile::tempdir().unwrap();
    let config =
        NavConfig { allow_loopback_git: allow, preflight_timeout: Duration::from_secs(10), ..NavConfig::default() };
    let nav = rr_engine::nav_embedded::open_dir(dir.path(), config).unwrap();
    (dir, nav)
}

#[tokio::test]
async fn add_repository_refusals_with_the_setting_off() {
    let (_dir, nav) = nav(false);
    for (url, message) in [
        (
            "ftp://github.com/octo/demo",
            "url: Invalid repository URL (only https is supported): ftp://github.com/octo/demo",
        ),
        ("git://127.0.0.1/demo.git", "url: Invalid repository URL (only https is supported): git://127.0.0.1/demo.git"),
        ("https://user:pw@github.com/octo/demo", "url: Repository URLs must not include credentials"),
        ("https://github.com:8443/octo/demo", "url: Repository URLs must not include a port"),
        ("https://github.com/octo/demo?tab=readme", "url: Repository URLs must not include a query or fragment"),
        ("https://github.com/octo/demo#readme", "url: Repository URLs must not include a query or fragment"),
        ("https://localhost/octo/demo", "url: localhost URLs are not allowed"),
        ("https://repo.localhost/octo/demo", "url: localhost URLs are not allowed"),
        ("https://127.0.0.1/octo/demo", "url: Private or loopback addresses are not allowed"),
        ("https://10.0.0.5/octo/demo", "url: Private or loopback addresses are not allowed"),
        ("https://[::1]/octo/demo", "url: Private or loopback addresses are not allowed"),
        ("https://169.254.169.254/latest/meta", "url: Private or loopback addresses are not allowed"),
        (
            "https://github.com/octo",
            "url: Invalid repository URL (expected https://<host>/<owner>/<repo>): https://github.com/octo",
        ),
        (
            "https://github.com/octo/demo/extra",
            "url: Invalid repository URL (expected https://<host>/<owner>/<repo>): https://github.com/octo/demo/extra",
        ),
        // Loopback with a port is only for the test setting.
        ("http://127.0.0.1:9418/demo/x", "url: Repository URLs must not include a port"),
        // Names are checked on the addresses they resolve to (`vm` is 127.0.0.1 in /etc/hosts here).
        ("https://vm/octo/demo", "Can't index vm/octo/demo: vm resolves to a private or loopback address."),
        (
            "https://no-such-host.invalid/octo/demo",
            "Can't index no-such-host.invalid/octo/demo: no-such-host.invalid could not be resolved.",
        ),
    ] {
        assert_eq!(err(&nav, json!({"url": url})).await, message, "{url}");
    }
    for branch in ["-x", "a/../b", "x\u{0}y", &"b".repeat(101)] {
        assert_eq!(
            err(&nav, json!({"url": "https://github.com/octo/demo", "branch": branch})).await,
            "branch: Invalid branch name",
            "{branch:?}"
        );
    }
    assert_eq!(
        err(&nav, json!({"url": ""})).await,
        "Invalid arguments for 'add_repository': url must be at least 1 character"
    );
    assert_eq!(nav.catalogue().repositories().unwrap().len(), 0, "nothing is created when a check fails");
}

#[test]
fn preflight_messages() {
    let gh = parse_url("https://github.com/octo/demo", false).unwrap();
    let gl = parse_url("https://gitlab.com/group/project", false).unwrap();
    let e = |u: &RepoUrl, stderr: &str| preflight_error(u, stderr, false);
    assert_eq!(
        e(&gh, "remote: Repository not found.\nfatal: repository 'https://github.com/octo/demo/' not found"),
        "GitHub repository octo/demo was not found. Check the URL; if it's private, the server's GITHUB_TOKEN needs access."
    );
    assert_eq!(
        e(&gh, "fatal: unable to access '...': The requested URL returned error: 403"),
        "GitHub denied access to octo/demo."
    );
    assert_eq!(
        e(&gh, "fatal: unable to access '...': The requested URL returned error: 429"),
        "GitHub's API rate limit was reached; try again in about 2 minutes."
    );
    assert_eq!(
        e(&gh, "remote: invalid token\nfatal: The requested URL returned error: 401"),
        "GitHub rejected the server's GITHUB_TOKEN; check the token configured on the repo-retriever server."
    );
    assert_eq!(e(&gh, "fatal: unable to access: Could not resolve host"), "Could not reach GitHub; try again.");
    assert_eq!(preflight_error(&gh, "", true), "GitHub did not respond in time; try again.");
    assert_eq!(
        e(&gl, "fatal: repository 'https://gitlab.com/group/project/' not found"),
        "gitlab.com/group/project was not found or is private; only public repositories are supported on gitlab.com."
    );
    assert_eq!(e(&gl, "fatal: unable to access: Connection reset"), "Could not reach gitlab.com; try again.");
    assert_eq!(preflight_error(&gl, "", true), "gitlab.com did not respond in time; try again.");
}

#[tokio::test]
async fn add_repository_end_to_end_against_a_loopback_git_server() {
    let base = tempfile::tempdir().unwrap();
    let (_daemon, port) = serve_git(base.path());
    let url = format!("git://127.0.0.1:{port}/demo/widgets.git");

    // Off (the default): the loopback server is refused.
    let (_d0, off) = nav(false);
    assert_eq!(
        err(&off, json!({"url": url})).await,
        format!("url: Invalid repository URL (only https is supported): {url}")
    );

    let (dir, nav) = nav(true);
    let name = format!("127.0.0.1:{port}/demo/widgets");
    assert_eq!(
        err(&nav, json!({"url": url, "branch": "nope"})).await,
        format!("Branch 'nope' does not exist in {name}.")
    );
    assert_eq!(
        err(&nav, json!({"url": format!("git://127.0.0.1:{port}/demo/empty.git")})).await,
        format!("127.0.0.1:{port}/demo/empty is empty; there is nothing to index.")
    );
    assert_eq!(
        err(&nav, json!({"url": format!("git://127.0.0.1:{port}/demo/missing.git")})).await,
        format!(
            "127.0.0.1:{port}/demo/missing was not found or is private; only public repositories are supported on 127.0.0.1."
        )
    );
    let text = nav.call("add_repository", Some(&json!({"url": url, "description": "demo"}))).await.unwrap().unwrap();
    let added: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        added,
        json!({"repository_id": 1, "name": name, "status": "pending", "message": "Indexing started; check list_repositories for progress."})
    );
    assert_eq!(err(&nav, json!({"url": url})).await, format!("{name} is already added as repository 1."));

    // Poll until it completes; it passes through processing.
    let repo = support::wait_until_indexed(&nav, 1, |_| {}).await;
    assert_eq!(repo["total_files"], 4);
    assert_eq!(repo["branch"], Value::Null, "the default branch");
    assert_eq!(repo["commit_sha"].as_str().unwrap().len(), 40);
    assert_eq!(repo["error_message"], "Partially indexed: 1 files of 1 MB or more skipped");

    let r: Value = serde_json::from_str(
        &nav.call("list_definitions", Some(&json!({"repository": name, "entity_type": "class"})))
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert!(r["total"].as_i64().unwrap() >= 3, "{r}");
    let r: Value = serde_json::from_str(
        &nav.call("get_file", Some(&json!({"repository": "1", "path": "src/lib.rs", "end_line": 2})))
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r["end_line"], 2);
    // Other hosts have no known link format.
    let r: Value = serde_json::from_str(
        &nav.call("search_code", Some(&json!({"query": "parse_color", "repository": "1"}))).await.unwrap().unwrap(),
    )
    .unwrap();
    assert_eq!(r["results"][0]["url"], Value::Null);
    // The records name the owner path and the host, as `index` of a checkout
    // of this URL does, so the search tool renders no GitHub link for them.
    let store = rr_embedded::EmbeddedStore::open(dir.path()).unwrap();
    let namespaces = store.namespaces().unwrap();
    let names: Vec<_> = namespaces.iter().map(|n| (n.organization.as_str(), n.repository.as_str())).collect();
    assert_eq!(names, [("demo", "widgets")]);
    let metadata = store.namespace_metadata(&namespaces[0].namespace_id).unwrap();
    assert!(!metadata.is_empty());
    for m in &metadata {
        assert_eq!(m.extra.get("source_host"), Some(&json!(format!("127.0.0.1:{port}"))), "{}", m.path);
        assert_eq!(rr_core::render::source_url(m), None, "{}", m.path);
    }

    // A named branch is a separate repository.
    let text = nav.call("add_repository", Some(&json!({"url": format!("{url}"), "branch": "dev"}))).await.unwrap();
    assert_eq!(text.unwrap_err(), format!("{name} is already added as repository 1."), "same URL");
}

fn chunks() -> Vec<rr_core::Chunk> {
    rr_testkit::fixture_records()
        .iter()
        .map(|v| rr_core::Chunk {
            id: v["id"].as_str().unwrap().into(),
            document: v["document"].as_str().unwrap().into(),
            metadata: rr_core::Metadata::from_map(v["metadata"].as_object().unwrap().clone()),
        })
        .collect()
}

#[test]
fn files_reassembled_from_chroma_records() {
    let chunks = chunks();
    let corpus = support::corpus();
    let mut paths: Vec<String> = chunks.iter().map(|c| c.metadata.path.clone()).collect();
    paths.dedup();
    for path in &paths {
        let r = reassemble(path, &chunks);
        let raw = std::fs::read(corpus.join(path)).unwrap();
        let text = String::from_utf8(raw).unwrap().replace("\r\n", "\n");
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        assert_eq!(r.content.trim_end(), text.trim_end(), "{path}");
        assert_eq!(missing_note(&r.path, &r.missing_lines), None, "{path}");
    }
    // A lost record: its lines are reported, not invented.
    let without: Vec<rr_core::Chunk> = chunks
        .iter()
        .filter(|c| !(c.metadata.path == "internal/store/store.go" && c.metadata.chunk_index == 3))
        .cloned()
        .collect();
    let r = reassemble("internal/store/store.go", &without);
    assert_eq!(r.missing_lines, vec![(22, 30)]);
    assert_eq!(
        missing_note(&r.path, &r.missing_lines).unwrap(),
        "Lines 22-30 of internal/store/store.go could not be recovered from the index."
    );
}

/// An HTTP server on 127.0.0.1 that answers every request with `response`
/// and counts the connections it accepted.
fn http_stub(response: String) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (port, hits)
}

#[tokio::test]
async fn git_never_follows_a_redirect() {
    // The "metadata service" a redirect would lead to, on another port.
    let (target, target_hits) =
        http_stub("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into());
    let redirect = format!(
        "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{target}/octo/demo/info/refs?service=git-upload-pack\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let (allowed, allowed_hits) = http_stub(redirect);
    let url = format!("http://127.0.0.1:{allowed}/octo/demo");

    // The check can fail: plain git does follow this redirect to the other port.
    let plain = std::process::Command::new("git")
        .args(["ls-remote", "--", &url])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(!plain.status.success());
    assert_eq!(target_hits.swap(0, std::sync::atomic::Ordering::SeqCst), 1, "plain git followed the redirect");

    let (_dir, nav) = nav(true);
    let message = err(&nav, json!({"url": url})).await;
    // git stops at the 302 and reports it as an HTTP failure.
    assert_eq!(message, "Could not reach 127.0.0.1; try again.");
    assert!(allowed_hits.load(std::sync::atomic::Ordering::SeqCst) >= 1, "git asked the allowed host");
    assert_eq!(target_hits.load(std::sync::atomic::Ordering::SeqCst), 0, "add_repository's git followed the redirect");
    assert_eq!(nav.catalogue().repositories().unwrap().len(), 0);
}
