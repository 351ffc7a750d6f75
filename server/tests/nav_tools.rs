//! The navigation tools on the fixture corpus indexed into a
//! temporary embedded store, every error message of seed 003, the
//! resources, add_repository against a loopback git server (with the test
//! setting on) and its refusals (with it off). (The rate limit is an HTTP layer: rr-mcp's tests.)

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::ALL_TOOLS;
use crate::support::nav::{COMMIT, corpus, err, index, off, ok};
use repo_retriever::mcp_nav::NavTools;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rr_nav::{NavConfig, NavService};
use serde_json::{Value, json};

async fn fixture(config: NavConfig) -> (tempfile::TempDir, Arc<NavService>) {
    let dir = tempfile::tempdir().unwrap();
    index(&corpus(), dir.path(), "acme", "widgets", "main").await;
    let nav = rr_engine::nav_embedded::open_dir(dir.path(), config).unwrap();
    (dir, nav)
}

#[tokio::test]
async fn list_repositories_and_resolution() {
    let (dir, nav) = fixture(off()).await;
    let list = ok(&nav, "list_repositories", json!({})).await;
    let repo = &list["repositories"][0];
    assert_eq!(repo["id"], 1);
    assert_eq!(repo["name"], "acme/widgets");
    assert_eq!(repo["url"], "https://github.com/acme/widgets");
    assert_eq!(repo["commit_sha"], COMMIT);
    assert_eq!(repo["status"], "completed");
    assert_eq!(repo["total_files"], 16);
    assert!(repo["processed_at"].as_str().unwrap().ends_with("+00:00"));
    let keys: Vec<&String> = repo.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 10);

    // Every form resolves, case-insensitively.
    for form in
        ["1", " ACME/Widgets ", "github.com/acme/widgets", "https://github.com/acme/widgets", "acme/widgets@main"]
    {
        let r = ok(&nav, "analyze_repository", json!({"repository": form})).await;
        assert_eq!(r["repository_id"], 1, "{form}");
    }
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "nope", "path": "x"})).await,
        "Repository 'nope' not found. Available repositories: acme/widgets"
    );
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "12345678901234567890", "path": "x"})).await,
        "Repository '12345678901234567890' not found. Available repositories: acme/widgets"
    );
    assert_eq!(
        err(&nav, "list_definitions", json!({"repository": "99"})).await,
        "Repository '99' not found. Available repositories: acme/widgets"
    );

    // A second branch of the same repository: the name is ambiguous.
    index(&corpus(), dir.path(), "acme", "widgets", "dev").await;
    nav.refresh().unwrap();
    assert_eq!(
        err(&nav, "analyze_repository", json!({"repository": "acme/widgets"})).await,
        "Repository 'acme/widgets' is ambiguous: acme/widgets (id 1), acme/widgets (id 2). Use the numeric ID."
    );
    assert_eq!(ok(&nav, "analyze_repository", json!({"repository": "acme/widgets@dev"})).await["repository_id"], 2);

    // Readiness messages.
    nav.catalogue().set_status(2, "failed", Some("git clone failed")).unwrap();
    assert_eq!(
        err(&nav, "list_definitions", json!({"repository": "2"})).await,
        "Repository 'acme/widgets' failed to index: git clone failed. Reprocess it with add_repository or `repo-retriever index`."
    );
    nav.catalogue().set_status(2, "failed", None).unwrap();
    assert_eq!(
        err(&nav, "find_patterns", json!({"repository": "2", "pattern": "x"})).await,
        "Repository 'acme/widgets' failed to index. Reprocess it with add_repository or `repo-retriever index`."
    );
    nav.catalogue().set_status(2, "processing", None).unwrap();
    nav.catalogue().set_progress(2, 120, 400).unwrap();
    assert_eq!(
        err(&nav, "search_code", json!({"query": "x", "repository": "2"})).await,
        "Repository 'acme/widgets' is still indexing (120/400 files); try again when it completes."
    );
    nav.catalogue().set_progress(2, 0, 0).unwrap();
    nav.catalogue().set_status(2, "pending", None).unwrap();
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "2", "path": "README.md"})).await,
        "Repository 'acme/widgets' is still indexing; try again when it completes."
    );
}

#[tokio::test]
async fn nothing_indexed_yet() {
    let dir = tempfile::tempdir().unwrap();
    let nav = rr_engine::nav_embedded::open_dir(dir.path(), off()).unwrap();
    assert_eq!(ok(&nav, "list_repositories", json!({})).await, json!({"repositories": []}));
    assert_eq!(
        err(&nav, "analyze_repository", json!({"repository": "nope"})).await,
        "Repository 'nope' not found. Available repositories: none indexed yet"
    );
}

#[tokio::test]
async fn search_code() {
    let (_dir, nav) = fixture(off()).await;
    let r = ok(&nav, "search_code", json!({"query": "withRetry", "repository": "acme/widgets", "limit": 2})).await;
    assert_eq!(r["query"], "withRetry");
    assert_eq!(r["repository"], "acme/widgets");
    let hit = &r["results"][0];
    assert_eq!(hit["entity_name"], "withRetry");
    assert_eq!(hit["entity_type"], "function");
    assert_eq!(hit["file_path"], "internal/store/store.go");
    assert_eq!((hit["line_start"].as_i64(), hit["line_end"].as_i64()), (Some(53), Some(70)));
    assert_eq!(hit["language"], "go");
    assert_eq!(hit["signature"], "func withRetry(ctx context.Context, attempts int, fn func() error) error {");
    assert_eq!(hit["description"], "Go function: withRetry");
    assert_eq!(hit["url"], format!("https://github.com/acme/widgets/blob/{COMMIT}/internal/store/store.go#L53-L70"));
    assert!(hit["snippet"].as_str().unwrap().starts_with("func withRetry("));
    // Part of a camelCase name matches; pages are counted.
    let r = ok(&nav, "search_code", json!({"query": "Retry", "entity_type": "function"})).await;
    assert_eq!(r["results"][0]["entity_name"], "withRetry");
    assert_eq!(r["repository"], Value::Null);
    let r = ok(&nav, "search_code", json!({"query": "configuration", "limit": 1, "page": 1})).await;
    assert_eq!(r["page"], 1);
    assert_eq!(r["pages"], r["total_hits"]);
    assert_eq!(r["results"].as_array().unwrap().len(), 1);
    // Imports only when asked.
    let r = ok(&nav, "search_code", json!({"query": "WidgetClient"})).await;
    assert!(r["results"].as_array().unwrap().iter().all(|h| h["entity_type"] != "import"));
    assert_eq!(r["results"][0]["entity_type"], "class");
    let r = ok(&nav, "search_code", json!({"query": "WidgetClient", "entity_type": "import"})).await;
    assert_eq!(r["results"][0]["file_path"], "py/widgets/__init__.py");
    // Language filter.
    let r = ok(&nav, "search_code", json!({"query": "Rect", "language": "rust"})).await;
    assert!(r["results"].as_array().unwrap().iter().all(|h| h["language"] == "rust"));
    assert!(r["total_hits"].as_i64().unwrap() >= 1);
    // Words that miss are dropped when nothing matches every word.
    let r = ok(&nav, "search_code", json!({"query": "where is parse_color zzzqqq"})).await;
    assert_eq!(r["results"][0]["entity_name"], "parse_color");
    // Limits.
    assert_eq!(
        err(&nav, "search_code", json!({"query": "é".repeat(257)})).await,
        "Invalid arguments for 'search_code': query is too long; the limit is 512 bytes"
    );
    assert_eq!(
        err(&nav, "search_code", json!({"query": "x", "limit": 51})).await,
        "Invalid arguments for 'search_code': limit must be between 1 and 50"
    );
    assert_eq!(
        err(&nav, "search_code", json!({"query": "x", "entity_type": "module"})).await,
        "Invalid arguments for 'search_code': entity_type must be one of function, class, import, doc_section, terraform_block"
    );
    assert_eq!(
        err(&nav, "search_code", json!({"query": "x", "extra": true})).await,
        "Invalid arguments for 'search_code': unexpected argument 'extra' (additional properties are not allowed)"
    );
}

#[tokio::test]
async fn search_is_unavailable_when_the_catalogue_fails() {
    let (dir, nav) = fixture(off()).await;
    // Break the full-text table under the service: the query fails and the client sees the
    // generic message, never the SQLite detail.
    let conn = rusqlite::Connection::open(dir.path().join("navigation.sqlite")).unwrap();
    conn.execute_batch("DROP TABLE entities_fts").unwrap();
    assert_eq!(err(&nav, "search_code", json!({"query": "retry"})).await, "Search is unavailable; try again later.");
}

#[tokio::test]
async fn get_file() {
    let (_dir, nav) = fixture(off()).await;
    let r = ok(
        &nav,
        "get_file",
        json!({"repository": "acme/widgets", "path": "src/lib.rs", "start_line": 7, "end_line": 9}),
    )
    .await;
    assert_eq!(r["repository"], "acme/widgets");
    assert_eq!(r["language"], "rust");
    assert_eq!(r["total_lines"], 58);
    assert_eq!((r["start_line"].as_i64(), r["end_line"].as_i64()), (Some(7), Some(9)));
    assert_eq!(r["truncated"], false);
    let content = r["content"].as_str().unwrap();
    assert_eq!(content.lines().count(), 3);
    assert!(content.starts_with("   7| "), "{content}");
    // CRLF lines are shown without the carriage return.
    let r = ok(&nav, "get_file", json!({"repository": "1", "path": "docs/windows.md"})).await;
    assert!(!r["content"].as_str().unwrap().contains('\r'));
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1", "path": "src/lib.rs", "start_line": 500})).await,
        "start_line 500 is past the end of the file (58 lines)"
    );
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1", "path": "src/lib.rs", "start_line": 5, "end_line": 4})).await,
        "end_line must not be before start_line"
    );
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1", "path": "src/lbi.rs"})).await,
        "File 'src/lbi.rs' not found in acme/widgets. Close paths: src/lib.rs"
    );
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1", "path": "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"})).await,
        "File 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz' not found in acme/widgets."
    );
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1", "path": "x", "start_line": 0})).await,
        "Invalid arguments for 'get_file': start_line must be 1 or more"
    );
    assert_eq!(
        err(&nav, "get_file", json!({"repository": "1"})).await,
        "Invalid arguments for 'get_file': path is required"
    );
}

#[tokio::test]
async fn get_file_caps_at_400_lines_and_100000_characters() {
    let src = tempfile::tempdir().unwrap();
    let long: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(src.path().join("long.txt"), &long).unwrap();
    let wide: String = (1..=300).map(|_| format!("{}\n", "x".repeat(990))).collect();
    std::fs::write(src.path().join("wide.txt"), &wide).unwrap();
    let store = tempfile::tempdir().unwrap();
    index(src.path(), store.path(), "acme", "caps", "main").await;
    let nav = rr_engine::nav_embedded::open_dir(store.path(), off()).unwrap();
    let r = ok(&nav, "get_file", json!({"repository": "acme/caps", "path": "long.txt"})).await;
    assert_eq!(
        (r["start_line"].as_i64(), r["end_line"].as_i64(), r["truncated"].as_bool()),
        (Some(1), Some(400), Some(true))
    );
    let r = ok(&nav, "get_file", json!({"repository": "acme/caps", "path": "long.txt", "start_line": 801})).await;
    assert_eq!((r["end_line"].as_i64(), r["truncated"].as_bool()), (Some(1000), Some(false)));
    assert!(r["content"].as_str().unwrap().starts_with(" 801| line 801"));
    let r = ok(&nav, "get_file", json!({"repository": "acme/caps", "path": "wide.txt"})).await;
    assert_eq!(r["truncated"], true);
    assert_eq!(r["end_line"], 100);
    assert!(r["content"].as_str().unwrap().chars().count() <= 100_000);
}

#[tokio::test]
async fn list_definitions_and_analyze_repository() {
    let (_dir, nav) = fixture(off()).await;
    let r = ok(
        &nav,
        "list_definitions",
        json!({"repository": "acme/widgets", "path_prefix": "internal/store", "limit": 2}),
    )
    .await;
    assert_eq!(r["total"], 6);
    let defs = r["definitions"].as_array().unwrap();
    assert_eq!(defs.len(), 2);
    assert_eq!(defs[0]["entity_name"], "Widget");
    assert_eq!(defs[0]["entity_type"], "class");
    assert_eq!(defs[0]["description"], "Go type: Widget");
    let r = ok(&nav, "list_definitions", json!({"repository": "1", "entity_type": "function", "name": "LIST"})).await;
    assert_eq!(r["total"], 1);
    assert_eq!(r["definitions"][0]["entity_name"], "List");
    assert_eq!(r["definitions"][0]["description"], "Go method: Store.List");
    let r =
        ok(&nav, "list_definitions", json!({"repository": "1", "entity_type": "doc_section", "path_prefix": "README"}))
            .await;
    assert_eq!(r["total"], 5);
    let r = ok(&nav, "list_definitions", json!({"repository": "1", "path_prefix": "%"})).await;
    assert_eq!(r["total"], 0, "path_prefix is literal");

    let r = ok(&nav, "analyze_repository", json!({"repository": "acme/widgets"})).await;
    assert_eq!(r["status"], "completed");
    assert_eq!(r["total_files"], 16);
    assert_eq!(r["processed_files"], 16);
    assert_eq!(r["language"], "go");
    assert_eq!(r["files_by_language"]["go"], 3);
    assert_eq!(r["files_by_language"]["markdown"], 7);
    assert_eq!(r["top_directories"][0], json!({"directory": "docs", "files": 6}));
    assert_eq!(r["largest_files"][0], json!({"file_path": "CHANGELOG.md", "line_count": 361}));
    let by_type = r["entities_by_type"].as_object().unwrap();
    let total: i64 = by_type.values().map(|v| v.as_i64().unwrap()).sum();
    assert_eq!(total, r["total_entities"].as_i64().unwrap());
    assert_eq!(by_type["import"], 1);
}

#[tokio::test]
async fn find_patterns() {
    let (_dir, nav) = fixture(off()).await;
    let r = ok(&nav, "find_patterns", json!({"repository": "acme/widgets", "pattern": "withRetry"})).await;
    assert_eq!(r["regex"], false);
    assert_eq!(r["truncated"], false);
    assert_eq!(r["total_matches"], r["matches"].as_array().unwrap().len());
    assert_eq!(r["matches"][0]["file_path"], "internal/store/store.go");
    assert!(r.get("skipped_files").is_none());
    let r = ok(&nav, "find_patterns", json!({"repository": "1", "pattern": "withretry"})).await;
    assert_eq!(r["total_matches"], 0, "literal search is case-sensitive");
    let r = ok(
        &nav,
        "find_patterns",
        json!({"repository": "1", "pattern": "(?i)^func\\s+\\w+", "regex": true, "path_glob": "cmd/*.go"}),
    )
    .await;
    assert_eq!(r["total_matches"], 2);
    assert_eq!(r["matches"][0], json!({"file_path": "cmd/widgetd/main.go", "line": 12, "text": "func main() {"}));
    let r = ok(&nav, "find_patterns", json!({"repository": "1", "pattern": "e", "max_results": 3})).await;
    assert_eq!((r["total_matches"].as_i64(), r["truncated"].as_bool()), (Some(3), Some(true)));
    let e = err(&nav, "find_patterns", json!({"repository": "1", "pattern": "(unclosed", "regex": true})).await;
    assert!(e.starts_with("Invalid regular expression: "), "{e}");
    let e = err(&nav, "find_patterns", json!({"repository": "1", "pattern": "(a{1000}){1000}", "regex": true})).await;
    assert!(e.starts_with("Invalid regular expression: "), "{e}");
    assert_eq!(
        err(&nav, "find_patterns", json!({"repository": "1", "pattern": "x".repeat(201)})).await,
        "Invalid arguments for 'find_patterns': pattern must be at most 200 characters"
    );
}

#[tokio::test]
async fn pathological_regex_returns_within_the_budget_and_lists_the_file() {
    let src = tempfile::tempdir().unwrap();
    for name in ["big.txt", "huge.txt", "small.txt"] {
        std::fs::write(src.path().join(name), "aaaa\n").unwrap();
    }
    let store = tempfile::tempdir().unwrap();
    index(src.path(), store.path(), "acme", "regex", "main").await;
    // Large texts go straight into the store (tokenising them would only slow the test down):
    // long lines a backtracking engine would take exponential time on, and a file over the
    // 1,000,000-character regex limit.
    let namespace_id = rr_indexer::namespace_id("acme", "regex", "main");
    let put = |path: &str, content: String| rr_embedded::StoredFile {
        namespace_id: namespace_id.clone(),
        path: path.into(),
        file_hash: rr_indexer::sha256_hex(&content),
        content,
        chunking: String::new(),
        chunks: 0,
    };
    let embedded = rr_embedded::EmbeddedStore::open(store.path()).unwrap();
    embedded.put_file(&put("big.txt", format!("{}!\n", "a".repeat(200)).repeat(50_000))).unwrap();
    embedded.put_file(&put("huge.txt", "abcdefghijklmn\n".repeat(70_000))).unwrap();
    let config =
        NavConfig { regex_file_budget: Duration::from_millis(1), regex_call_budget: Duration::from_secs(2), ..off() };
    let nav = rr_engine::nav_embedded::open_dir(store.path(), config).unwrap();
    let started = Instant::now();
    let r = ok(
        &nav,
        "find_patterns",
        json!({"repository": "acme/regex", "pattern": "^(\\w+\\s?)*$|(a|aa)+b{3,}c", "regex": true}),
    )
    .await;
    // The call budget (2 s) bounds it; the margin is for a debug build on a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    assert_eq!(r["skipped_files"], json!(["big.txt", "huge.txt"]));
    assert_eq!(r["skipped_count"], 2);
    assert_eq!(r["matches"][0]["file_path"], "small.txt");
}

/// `serve --store DIR --tools all` opens the store once; search
/// and the navigation tools share the one in-memory index.
#[tokio::test]
async fn search_and_navigation_share_one_open_store() {
    let dir = tempfile::tempdir().unwrap();
    index(&corpus(), dir.path(), "acme", "widgets", "main").await;
    let choice = rr_engine::retrieval::RetrievalSettings::default();
    let local = repo_retriever::cli::local_services(dir.path(), &choice, None, Some(off())).unwrap();
    let nav = local.nav.expect("--tools all has navigation");
    let navigated = local.nav_source.as_ref().expect("an embedded source").store();
    let searched = &local.engine.stores()[0].store;
    assert!(
        std::ptr::addr_eq(Arc::as_ptr(searched), Arc::as_ptr(navigated)),
        "search and navigation opened the store separately"
    );
    let list = ok(&nav, "list_repositories", json!({})).await;
    assert_eq!(list["repositories"][0]["name"], "acme/widgets");

    let search_only = repo_retriever::cli::local_services(dir.path(), &choice, None, None).unwrap();
    assert!(search_only.nav.is_none());
    let missing = dir.path().join("absent");
    let err = repo_retriever::cli::local_services(&missing, &choice, None, Some(off())).err().unwrap();
    assert_eq!(
        err,
        format!(
            "no index at {}: run `repo-retriever index <folder> --store {}` first",
            missing.display(),
            missing.display()
        )
    );
}

fn server_for(dir: &std::path::Path, nav: &Arc<NavService>, with_navigation: bool) -> rr_mcp::McpServer {
    let engine = rr_engine::local::engine(dir).unwrap();
    let server = rr_mcp::McpServer::builder(engine, "repo-retriever", "test");
    if with_navigation { server.navigation(Arc::new(NavTools(nav.clone()))).build() } else { server.build() }
}

fn read_params(uri: &str) -> ReadResourceRequestParams {
    ReadResourceRequestParams::new(uri)
}

#[tokio::test]
async fn resources() {
    let (dir, nav) = fixture(off()).await;
    let client = support::in_process(server_for(dir.path(), &nav, true)).await;
    let list = json!(client.list_resources(None).await.unwrap());
    assert_eq!(list["resources"][0]["uri"], "repo-retriever://repositories");
    assert_eq!(list["resources"][0]["name"], "Repositories");
    let t = json!(client.list_resource_templates(None).await.unwrap());
    assert_eq!(t["resourceTemplates"][0]["uriTemplate"], "repo-retriever://repositories/{id}/files");
    let r = json!(client.read_resource(read_params("repo-retriever://repositories")).await.unwrap());
    let text: Value = serde_json::from_str(r["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["repositories"][0]["name"], "acme/widgets");
    let r = json!(client.read_resource(read_params("repo-retriever://repositories/1/files")).await.unwrap());
    assert_eq!(r["contents"][0]["mimeType"], "application/json");
    let text: Value = serde_json::from_str(r["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["total_files"], 16);
    assert_eq!(text["truncated"], false);
    assert_eq!(text["files"][0], json!({"file_path": "CHANGELOG.md", "language": "markdown", "line_count": 361}));
    for (uri, message) in [
        ("repo-retriever://nope", "Resource or repository not found: Unknown resource 'repo-retriever://nope'"),
        (
            "repo-retriever://repositories/12345678901234567890/files",
            "Resource or repository not found: Unknown resource 'repo-retriever://repositories/12345678901234567890/files'",
        ),
        ("repo-retriever://repositories/99/files", "Resource or repository not found: Repository 99 not found"),
        (
            "repo-retriever://repositories/9223372036854775808/files",
            "Resource or repository not found: Repository 9223372036854775808 not found",
        ),
    ] {
        let e = support::rpc_error(client.read_resource(read_params(uri)).await.unwrap_err());
        assert_eq!(e.message, message, "{uri}");
        assert_eq!(e.code.0, -32002);
    }
    // The extended tools/list: search first, then the seven, every schema closed.
    let tools = client.list_tools(None).await.unwrap().tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ALL_TOOLS);
    assert!(tools.iter().all(|t| t.input_schema.get("additionalProperties") == Some(&json!(false))));
    // A tool call goes through the protocol as a JSON text result.
    let call =
        CallToolRequestParams::new("list_repositories").with_arguments(json!({"x": 1}).as_object().unwrap().clone());
    let r = json!(client.call_tool(call).await.unwrap());
    assert_eq!(r["isError"], true);
    assert_eq!(
        r["content"][0]["text"],
        "Invalid arguments for 'list_repositories': unexpected argument 'x' (additional properties are not allowed)"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn search_only_service_is_unchanged() {
    let (dir, nav) = fixture(off()).await;
    let client = support::in_process(server_for(dir.path(), &nav, false)).await;
    let tools = client.list_tools(None).await.unwrap().tools;
    assert_eq!(json!(tools), json!([rr_mcp::search::definition()]));
    // Without navigation there is nothing to list, and the lists are empty.
    assert_eq!(json!(client.list_resources(None).await.unwrap())["resources"], json!([]));
    assert_eq!(json!(client.list_resource_templates(None).await.unwrap())["resourceTemplates"], json!([]));
    assert_eq!(json!(client.list_prompts(None).await.unwrap())["prompts"], json!([]));
    let e = support::rpc_error(client.read_resource(read_params("repo-retriever://repositories")).await.unwrap_err());
    assert_eq!((e.code.0, e.message.as_ref()), (-32601, "method not found: \"resources/read\""));
    client.cancel().await.unwrap();
}
