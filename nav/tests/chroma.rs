//! The navigation tools over a real Chroma 1.5.9 holding the 89 records the
//! reference indexer wrote for `testdata/corpus` (`testdata/records.jsonl`),
//! through `rr_engine::nav_chroma::ChromaSource`: whole files rebuilt from
//! chunks, add_repository indexing into the collection, a chunk deleted under
//! a running service, and the same tools over the embedded store indexed from
//! the same corpus.

use std::path::Path;
use std::sync::Arc;

use crate::support::{COMMIT, corpus, err, fixture, index_chunked, numbered, off, ok, wait_until_indexed};
use rr_chroma::{ChromaConfig, ChromaStore};
use rr_engine::local::ChromaTarget;
use rr_engine::nav_chroma::ChromaSource;
use rr_http::test_util::Recorder;
use rr_http::{HttpClient, HttpSettings};
use rr_nav::{NavConfig, NavService};
use rr_testkit::{DATABASE, TENANT};
use serde_json::{Value, json};

/// Files of the corpus the reference indexer did not keep byte for byte:
/// it drops a UTF-8 byte-order mark and reads CRLF line ends as LF before
/// chunking, an empty file has no chunk at all, and a binary file is not
/// indexed (by either indexer).
const NOT_BYTE_EXACT: [&str; 4] = ["docs/bom.md", "docs/windows.md", "docs/empty.md", "web/logo.png"];

async fn chroma_nav(collection: &str) -> Arc<NavService> {
    chroma_nav_at(&fixture().chroma_url, collection).await
}

async fn chroma_nav_at(chroma_url: &str, collection: &str) -> Arc<NavService> {
    chroma_nav_with(chroma_url, collection, off(), false).await
}

/// A service over `collection`; with `indexing`, add_repository writes into
/// it through the test embed server.
async fn chroma_nav_with(chroma_url: &str, collection: &str, config: NavConfig, indexing: bool) -> Arc<NavService> {
    let target = indexing.then(|| ChromaTarget {
        server_url: chroma_url.to_owned(),
        collection_name: collection.to_owned(),
        tenant: TENANT.into(),
        database: DATABASE.into(),
        bearer_token: None,
        embedding_api_url: fixture().embed_url.clone(),
        embedding_model: rr_testkit::EMBED_MODEL.into(),
        embedding_api_key: None,
    });
    let store = ChromaStore::new(
        ChromaConfig {
            server_url: chroma_url.to_owned(),
            tenant: TENANT.into(),
            database: DATABASE.into(),
            collection_name: collection.into(),
            bearer_token: None,
        },
        HttpClient::new(HttpSettings::new("nav-chroma-tests")).unwrap(),
    );
    rr_engine::nav_chroma::open(ChromaSource::new(store, target).unwrap(), config).await.unwrap()
}

/// The fixture in an embedded store, with the reference's chunking: the
/// records the collection holds.
async fn embedded_nav() -> (tempfile::TempDir, Arc<NavService>) {
    let dir = tempfile::tempdir().unwrap();
    let reference = Some(rr_indexer::ChunkingScheme::Reference);
    index_chunked(&corpus(), dir.path(), "acme", "widgets", "main", reference).await;
    let nav = rr_engine::nav_embedded::open_dir(dir.path(), off()).unwrap();
    (dir, nav)
}

/// The text of `get_file`'s content: numbers off, the final line end back.
fn unnumbered(content: &str) -> String {
    content.split('\n').map(|l| l.split_once("| ").map_or(l, |(_, rest)| rest)).collect::<Vec<_>>().join("\n") + "\n"
}

fn corpus_paths() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(&corpus(), &corpus(), &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn chroma_repositories_and_whole_files_rebuilt_from_chunks() {
    let nav = chroma_nav(&fixture().collection).await;
    let list = ok(&nav, "list_repositories", json!({})).await;
    let repos = list["repositories"].as_array().unwrap();
    assert_eq!(repos.len(), 1);
    let repo = &repos[0];
    assert_eq!(repo["id"], 1);
    assert_eq!(repo["name"], "acme/widgets");
    assert_eq!(repo["url"], "https://github.com/acme/widgets");
    assert_eq!(repo["branch"], "main");
    assert_eq!(repo["commit_sha"], COMMIT);
    assert_eq!(repo["status"], "completed");
    assert_eq!(repo["total_files"], 15, "docs/empty.md has no chunk");

    let paths = corpus_paths();
    assert_eq!(paths.len(), 17);
    for path in paths.iter().filter(|p| !NOT_BYTE_EXACT.contains(&p.as_str())) {
        let original = std::fs::read_to_string(corpus().join(path)).unwrap();
        let r = ok(&nav, "get_file", json!({"repository": "acme/widgets", "path": path})).await;
        let content = r["content"].as_str().unwrap();
        assert_eq!(content, numbered(&original), "{path}");
        assert_eq!(unnumbered(content).as_bytes(), original.as_bytes(), "{path}");
        assert_eq!(r["total_lines"], original.lines().count(), "{path}");
        assert_eq!(r["truncated"], false);
        assert!(r.get("missing_lines").is_none() && r.get("note").is_none(), "{path}: {r}");
    }
    // CHANGELOG.md is 41 chunks, docs/notes.txt five that share a line each
    // (the token splitter's overlap): both come back whole.
    let r =
        ok(&nav, "get_file", json!({"repository": "1", "path": "docs/notes.txt", "start_line": 13, "end_line": 13}))
            .await;
    let notes = std::fs::read_to_string(corpus().join("docs/notes.txt")).unwrap();
    assert_eq!(r["content"], format!("  13| {}", notes.lines().nth(12).unwrap()));

    // The three that differ: the text the reference indexer chunked.
    let bom = std::fs::read_to_string(corpus().join("docs/bom.md")).unwrap();
    let r = ok(&nav, "get_file", json!({"repository": "1", "path": "docs/bom.md"})).await;
    assert_eq!(unnumbered(r["content"].as_str().unwrap()), bom.trim_start_matches('\u{feff}'));
    let windows = std::fs::read_to_string(corpus().join("docs/windows.md")).unwrap();
    assert!(windows.contains("\r\n"));
    let r = ok(&nav, "get_file", json!({"repository": "1", "path": "docs/windows.md"})).await;
    assert_eq!(unnumbered(r["content"].as_str().unwrap()), windows.replace("\r\n", "\n"));
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1", "path": "docs/empty.md"})).await,
        "File 'docs/empty.md' not found in acme/widgets. Close paths: docs/bom.md, docs/café.md, docs/windows.md, docs/notes.txt, docs/guides/configuration.md"
    );

    // Without an embedding endpoint there is nothing to index with.
    assert_eq!(
        err(&nav, "add_repository", json!({"url": "https://github.com/acme/other"})).await,
        "add_repository is not available on this server: it has no embedding endpoint to index the collection with."
    );
}

/// add_repository over Chroma: cloned from a loopback git server, indexed
/// into the collection with our indexer, then served like the reference
/// indexer's records beside it.
#[tokio::test]
async fn chroma_add_repository_indexes_into_the_collection() {
    let f = fixture();
    let name = "nav-add-repository";
    let collection_id = rr_testkit::load_fixture(&f.chroma_url, name).await;
    let base = tempfile::tempdir().unwrap();
    let (_daemon, port) = rr_testkit::serve_git(base.path());
    let config = NavConfig { allow_loopback_git: true, ..NavConfig::default() };
    let nav = chroma_nav_with(&f.chroma_url, name, config, true).await;
    let url = format!("git://127.0.0.1:{port}/demo/widgets.git");
    let added = ok(&nav, "add_repository", json!({"url": url})).await;
    let repo_name = format!("127.0.0.1:{port}/demo/widgets");
    assert_eq!(
        added,
        json!({"repository_id": 2, "name": repo_name, "status": "pending", "message": "Indexing started; check list_repositories for progress."})
    );
    let repo = wait_until_indexed(&nav, 2, |list| {
        assert_eq!(list["repositories"][0]["name"], "acme/widgets", "the reference indexer's repository stays");
    })
    .await;
    assert_eq!(repo["total_files"], 4);
    assert_eq!(repo["error_message"], "Partially indexed: 1 files of 1 MB or more skipped");
    // The records are in the collection, beside the 89 fixture records.
    assert!(rr_testkit::collection_count(&f.chroma_url, &collection_id).await > rr_testkit::FIXTURE_RECORDS as u64);
    let original = std::fs::read_to_string(corpus().join("internal/store/store.go")).unwrap();
    let r = ok(&nav, "get_file", json!({"repository": "2", "path": "internal/store/store.go"})).await;
    assert_eq!(r["content"], numbered(&original));
    let r = ok(&nav, "list_definitions", json!({"repository": "2", "name": "withRetry"})).await;
    assert_eq!(r["definitions"][0]["line_start"], 53);
    // A second service over the same collection sees it as a namespace like any other.
    let again = chroma_nav(name).await;
    // It numbers the namespaces afresh, in namespace-id order, which depends on the git port.
    let list = ok(&again, "list_repositories", json!({})).await;
    let names: Vec<&str> =
        list["repositories"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2, "{list}");
    assert!(names.contains(&"acme/widgets") && names.contains(&repo_name.as_str()), "{list}");
    assert!(list["repositories"].as_array().unwrap().iter().all(|r| r["status"] == "completed"), "{list}");
    rr_testkit::delete_collection(&f.chroma_url, name).await;
}

#[tokio::test]
async fn chroma_a_deleted_chunk_is_reported_as_missing_lines() {
    let f = fixture();
    let name = "nav-deleted-chunk";
    let id = rr_testkit::load_fixture(&f.chroma_url, name).await;
    let recorder = Recorder::forward(&f.chroma_url).await;
    // Whole reads of the collection (documents and metadata), as opposed to
    // the id listings every call makes.
    let full_reads = || {
        recorder
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/get") && r.json()["include"] == json!(["documents", "metadatas"]))
            .count()
    };
    let nav = chroma_nav_at(recorder.url(), name).await;
    assert_eq!(full_reads(), 1);
    let before = ok(&nav, "get_file", json!({"repository": "acme/widgets", "path": "CHANGELOG.md"})).await;
    assert!(before.get("missing_lines").is_none());
    ok(&nav, "list_definitions", json!({"repository": "acme/widgets"})).await;
    assert_eq!(full_reads(), 1, "the ids did not change: nothing is read again");
    let id_listings = recorder.requests().iter().filter(|r| r.path.ends_with("/get")).count() - 1;
    assert_eq!(id_listings, 3, "one id listing at start-up and one per call");

    // Chunk 2 of CHANGELOG.md covers lines 12-20; delete it under the running service.
    let record = rr_testkit::fixture_records()
        .iter()
        .find(|r| r["metadata"]["path"] == "CHANGELOG.md" && r["metadata"]["chunk_index"] == 2)
        .unwrap();
    assert_eq!(
        (record["metadata"]["start_line"].as_i64(), record["metadata"]["end_line"].as_i64()),
        (Some(12), Some(20))
    );
    let url = format!("{}/{id}/delete", rr_testkit::collections_url(&f.chroma_url, TENANT, DATABASE));
    let resp = reqwest::Client::new().post(url).json(&json!({"ids": [record["id"]]})).send().await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.text().await.unwrap());

    let r = ok(
        &nav,
        "get_file",
        json!({"repository": "acme/widgets", "path": "CHANGELOG.md", "start_line": 10, "end_line": 22}),
    )
    .await;
    assert_eq!(full_reads(), 2, "a record left: the collection is read again");
    assert_eq!(r["missing_lines"], json!([[12, 20]]));
    assert_eq!(r["note"], "Lines 12-20 of CHANGELOG.md could not be recovered from the index.");
    assert_eq!(r["total_lines"], 361, "the lost lines keep their places");
    let original = std::fs::read_to_string(corpus().join("CHANGELOG.md")).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let shown: Vec<&str> = r["content"].as_str().unwrap().split('\n').collect();
    assert_eq!(shown[0], format!("  10| {}", lines[9]));
    assert_eq!(shown[1], format!("  11| {}", lines[10]));
    assert!(shown[2..11].iter().enumerate().all(|(i, l)| *l == format!("{:>4}| ", i + 12)), "{shown:?}");
    assert_eq!(shown[11], format!("  21| {}", lines[20]));
    assert_eq!(shown[12], format!("  22| {}", lines[21]));
    // Other files are whole as before.
    let r = ok(&nav, "get_file", json!({"repository": "acme/widgets", "path": "src/lib.rs"})).await;
    assert!(r.get("missing_lines").is_none());
    rr_testkit::delete_collection(&f.chroma_url, name).await;
}

/// The same corpus over both stores: where the records are identical the
/// tools agree; the differences are the three files of [`NOT_BYTE_EXACT`].
#[tokio::test]
async fn chroma_agrees_with_the_embedded_store() {
    let chroma = chroma_nav(&fixture().collection).await;
    let (_dir, embedded) = embedded_nav().await;

    // Definitions: every one, in order, field for field.
    let all = json!({"repository": "acme/widgets", "limit": 500});
    let over_chroma = ok(&chroma, "list_definitions", all.clone()).await;
    assert_eq!(over_chroma["total"], 76);
    assert!(over_chroma == ok(&embedded, "list_definitions", all).await, "list_definitions differs");

    for args in [
        json!({"query": "withRetry"}),
        json!({"query": "widget store", "limit": 50}),
        json!({"query": "configuration", "entity_type": "doc_section", "limit": 50}),
        json!({"query": "os", "entity_type": "import"}),
        json!({"query": "client", "language": "python"}),
    ] {
        assert_eq!(
            ok(&chroma, "search_code", args.clone()).await,
            ok(&embedded, "search_code", args.clone()).await,
            "{args}"
        );
    }

    for args in [
        json!({"repository": "1", "pattern": "withRetry"}),
        json!({"repository": "1", "pattern": "(?i)^func\\s+\\w+", "regex": true}),
        json!({"repository": "1", "pattern": "return", "max_results": 500}),
        json!({"repository": "1", "pattern": "Windows", "path_glob": "docs/*"}),
    ] {
        assert_eq!(
            ok(&chroma, "find_patterns", args.clone()).await,
            ok(&embedded, "find_patterns", args.clone()).await,
            "{args}"
        );
    }

    // analyze_repository: docs/empty.md is a file of the embedded store but
    // has no chunk in the collection; everything derived from chunks agrees.
    let a = ok(&chroma, "analyze_repository", json!({"repository": "acme/widgets"})).await;
    let b = ok(&embedded, "analyze_repository", json!({"repository": "acme/widgets"})).await;
    assert_eq!((a["total_files"].as_i64(), b["total_files"].as_i64()), (Some(15), Some(16)));
    assert_eq!(
        (a["files_by_language"]["markdown"].as_i64(), b["files_by_language"]["markdown"].as_i64()),
        (Some(6), Some(7))
    );
    assert_eq!(a["top_directories"][0], json!({"directory": "docs", "files": 5}));
    assert_eq!(b["top_directories"][0], json!({"directory": "docs", "files": 6}));
    for key in [
        "total_lines",
        "total_entities",
        "entities_by_type",
        "definitions_by_language",
        "language",
        "framework",
        "largest_files",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
    let mut a_languages = a["files_by_language"].clone();
    a_languages["markdown"] = json!(7);
    assert_eq!(a_languages, b["files_by_language"]);

    // The files resource lists the same files but the empty one.
    let files = rr_nav::repos::read_resource(&chroma, "repo-retriever://repositories/1/files");
    let files: Value = serde_json::from_str(&files.unwrap()).unwrap();
    assert_eq!(files["total_files"], 15);
    assert_eq!(files["files"][0], json!({"file_path": "CHANGELOG.md", "language": "markdown", "line_count": 361}));
}
