//! The binary over a real Chroma: `serve --chroma-url … --tools all` over
//! stdio (every navigation tool, files rebuilt from the collection's chunks),
//! the drop-in flags alone still listing `search` only, `--per-file`, and the
//! HTTP rate limit counting every tool.

use std::time::Instant;

use crate::support::nav::{corpus, numbered};
use crate::support::{ALL_TOOLS, EMBED_MODEL, Server, excerpt_files, fixture, is_error, most_per_file, tool_text};
use serde_json::{Value, json};

fn serve_chroma_args() -> Vec<String> {
    let f = fixture();
    [
        "serve",
        "--tools",
        "all",
        "--chroma-url",
        &f.chroma_url,
        "--collection-name",
        &f.collection,
        "--embedding-api-url",
        &f.embed_url,
        "--embedding-model",
        EMBED_MODEL,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[tokio::test]
async fn serve_chroma_url_with_all_tools_over_stdio() {
    let mut mcp = Server::new().args(serve_chroma_args()).stdio().await;
    let tools = mcp.list_tools().await;
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ALL_TOOLS);
    let r = mcp.call_tool("get_file", json!({"repository": "acme/widgets", "path": "src/lib.rs"})).await;
    assert!(!is_error(&r), "{r}");
    let file: Value = serde_json::from_str(tool_text(&r)).unwrap();
    let original = std::fs::read_to_string(corpus().join("src/lib.rs")).unwrap();
    assert_eq!(file["content"], numbered(&original));
    let r = mcp.call_tool("search", json!({"query": "retry a store operation"})).await;
    assert!(!is_error(&r), "{r}");
    assert!(tool_text(&r).contains("acme/widgets"), "{r}");
    mcp.close().await;

    // The drop-in flags alone: search only, as the reference.
    let mut plain = Server::fixture().stdio().await;
    let tools = plain.list_tools().await;
    assert_eq!(tools["tools"], json!([rr_mcp::search::definition()]));
    plain.close().await;

    // --chroma-url serves the collection, not a store folder as well.
    let out = Server::new().args(serve_chroma_args()).args(["--store", "/nonexistent"]).output().await;
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: --chroma-url serves a Chroma collection; it cannot be combined with --store or --stores\n"
    );
}

/// `serve --chroma-url` selects as the drop-in (two results per file first) unless `--per-file`
/// says otherwise.
#[tokio::test]
async fn serve_chroma_url_takes_per_file() {
    let args = json!({"query": "where is the configuration loaded and validated", "limit": 5});
    let mut mcp = Server::new().args(serve_chroma_args()).stdio().await;
    let default = mcp.call_tool("search", args.clone()).await;
    mcp.close().await;
    let mut drop_in = Server::fixture().stdio().await;
    let reference = drop_in.call_tool("search", args.clone()).await;
    drop_in.close().await;
    assert_eq!(tool_text(&default), tool_text(&reference));
    assert_eq!(most_per_file(tool_text(&default)), 2, "{}", tool_text(&default));
    let mut mcp = Server::new().args(serve_chroma_args()).args(["--per-file", "1"]).stdio().await;
    let one = mcp.call_tool("search", args).await;
    mcp.close().await;
    assert!(!is_error(&one), "{one}");
    assert_eq!(excerpt_files(tool_text(&one)).len(), 5, "{}", tool_text(&one));
    assert_eq!(most_per_file(tool_text(&one)), 1, "{}", tool_text(&one));
}

/// The limit counts every `tools/call` of a client address, `search`
/// included: the fourth call within the minute is refused whatever the tool.
#[tokio::test]
async fn rate_limit_over_http_counts_every_tool() {
    let mut mcp = Server::new().args(serve_chroma_args()).args(["--rate-limit", "3"]).http().await;
    let client = mcp.client().await;
    let started = Instant::now();
    let first = client.call_tool("list_repositories", json!({})).await;
    assert!(!is_error(&first), "{first}");
    let second = client.call_tool("search", json!({"query": "widget"})).await;
    assert!(!is_error(&second), "{second}");
    let third = client.call_tool("get_file", json!({"repository": "1", "path": "README.md", "end_line": 2})).await;
    assert!(!is_error(&third), "{third}");
    let fourth = client.call_tool("search", json!({"query": "widget"})).await;
    let elapsed = started.elapsed().as_secs();
    assert!(is_error(&fourth), "{fourth}");
    // The hint counts whole seconds until the first call leaves the window: 60 on an idle machine,
    // less by however long the four calls took on a loaded one.
    let text = tool_text(&fourth);
    let retry: u64 = text
        .strip_prefix("Rate limit exceeded: at most 3 tool calls per minute per client address. Retry in ")
        .and_then(|rest| rest.strip_suffix(" seconds."))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected text: {text}"));
    assert!((60 - elapsed.min(59) - 1..=60).contains(&retry), "retry {retry} after {elapsed} s");
    // tools/list is not a tool call.
    assert_eq!(client.list_tools().await["tools"].as_array().unwrap().len(), 8);
    mcp.kill().await;
}
