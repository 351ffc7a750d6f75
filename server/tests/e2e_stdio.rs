//! End to end over stdio: the built binary, spawned as an MCP client would spawn it,
//! against a real Chroma 1.5.9 loaded with the reference indexer's records and the deterministic
//! embed server.
//!
//! What is pinned: `initialize` and `tools/list` frames (as parsed JSON: key order and escaping
//! are free, CONTRACT §6), every validation and argument-schema message byte for byte, the no-match texts, the Context/fence/link rules on real records, and
//! the complete Markdown of a few reviewed searches (insta snapshots). Everything else about a
//! result list — which excerpts, in which order — is checked against Chroma itself: the test sends
//! Chroma the query the contract describes and applies the contract's selection rules to Chroma's
//! raw answer, independently of our crates.

use crate::support;

use crate::support::{
    NO_MATCH, NO_MATCH_WITH_SOURCE, Recorder, Server, contract_select, found_line, is_error, raw_candidates,
    shown_results, tool_text,
};
use rmcp::model::ClientRequest;
use serde_json::{Value, json};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// The stdout line that answers request `id`, as it was written.
fn raw_line(lines: &[String], id: &Value) -> String {
    let found: Vec<&String> =
        lines.iter().filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v.get("id") == Some(id))).collect();
    assert_eq!(found.len(), 1, "exactly one frame answers id {id}; stdout: {lines:#?}");
    found[0].clone()
}

/// The frame that answers request `id`, parsed.
fn raw_frame(lines: &[String], id: &Value) -> Value {
    v(&raw_line(lines, id))
}

/// A frame as the contract pins it: parsed JSON.
fn v(frame: &str) -> Value {
    serde_json::from_str(frame).unwrap_or_else(|e| panic!("not JSON ({e}): {frame}"))
}

/// An rmcp client session on the shared fixture collection.
async fn fixture_session() -> support::McpClient {
    Server::fixture().stdio().await
}

/// Calls `search`; returns the frame as the server wrote it and the result as rmcp decoded it.
async fn call_raw(s: &support::McpClient, arguments: Value) -> (Value, Value) {
    if arguments.is_null() {
        // `"arguments": null`, which rmcp's typed request cannot carry.
        let frame = s.request_frame("tools/call", json!({"name": "search", "arguments": null})).await;
        let result = frame["result"].clone();
        return (frame, result);
    }
    s.call_tool_frame("search", arguments).await
}

// -------------------------------------------------------------------------------------------
// initialize and tools/list
// -------------------------------------------------------------------------------------------

fn initialize_frame(id: u64, version: &str) -> Value {
    v(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"capabilities\":{{\"logging\":{{}},\"tools\":{{\"listChanged\":true}}}},\"protocolVersion\":\"{version}\",\"serverInfo\":{{\"name\":\"repo-retriever\",\"version\":\"{}\"}}}}}}",
        support::expected_version_line()
    ))
}

/// Known versions before 2026-07-28 are echoed; anything else gets 2025-11-25 (wire report §2).
#[tokio::test]
async fn initialize_result_bytes_and_version_negotiation() {
    let cases: [(Option<Value>, &str); 9] = [
        (Some(json!("2025-06-18")), "2025-06-18"),
        (Some(json!("2025-11-25")), "2025-11-25"),
        (Some(json!("2025-03-26")), "2025-03-26"),
        (Some(json!("2024-11-05")), "2024-11-05"),
        (Some(json!("2026-07-28")), "2025-11-25"),
        (Some(json!("1999-01-01")), "2025-11-25"),
        (Some(json!("unknown")), "2025-11-25"),
        (Some(json!("")), "2025-11-25"),
        (None, "2025-11-25"),
    ];
    // No backend is contacted by initialize: point them at nothing.
    let server = Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9");
    for (requested, answered) in cases {
        let mut s = server.raw_stdio().await;
        let mut params = json!({"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        if let Some(v) = &requested {
            params["protocolVersion"] = v.clone();
        }
        let id = s.send_request("initialize", params).await;
        s.wait_response(&id).await;
        assert_eq!(raw_frame(&s.stdout_lines(), &id), initialize_frame(1, answered), "requested {requested:?}");
        assert!(s.close().await.success());
        assert_eq!(s.stderr(), "", "stderr stays quiet without --debug");
    }
}

#[tokio::test]
async fn session_rules_before_and_after_initialize() {
    let mut s =
        Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9").raw_stdio().await;
    // Before initialize: ping works, anything else is refused as an invalid request.
    let id = s.send_request("ping", json!({})).await;
    s.wait_response(&id).await;
    assert_eq!(raw_frame(&s.stdout_lines(), &id), v(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    let id = s.send_request("tools/list", json!({})).await;
    s.wait_response(&id).await;
    assert_eq!(
        raw_frame(&s.stdout_lines(), &id),
        v(
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"method \"tools/list\" is invalid during session initialization"}}"#
        )
    );
    let id = s.send_request("initialize", support::initialize_params()).await;
    s.wait_response(&id).await;
    assert_eq!(raw_frame(&s.stdout_lines(), &id), initialize_frame(3, "2025-03-26"));
    s.notify("notifications/initialized", None).await;
    let id = s.send_request("initialize", support::initialize_params()).await;
    s.wait_response(&id).await;
    assert_eq!(
        raw_frame(&s.stdout_lines(), &id),
        v(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"duplicate \"initialize\" received"}}"#)
    );
    let id = s.send_request("foo/bar", json!({})).await;
    s.wait_response(&id).await;
    assert_eq!(
        raw_frame(&s.stdout_lines(), &id),
        v(r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found: \"foo/bar\""}}"#)
    );
    // The drop-in has no resources and no prompts, and lists none, as the reference does.
    for (method, result) in [
        ("resources/list", r#"{"resources":[]}"#),
        ("resources/templates/list", r#"{"resourceTemplates":[]}"#),
        ("prompts/list", r#"{"prompts":[]}"#),
    ] {
        let id = s.send_request(method, json!({})).await;
        s.wait_response(&id).await;
        assert_eq!(
            raw_frame(&s.stdout_lines(), &id),
            v(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#))
        );
    }
    // Ids come back as they were sent, fractional and beyond 64 bits included.
    s.send_line(r#"{"jsonrpc":"2.0","id":"abc","method":"ping"}"#).await;
    s.wait_response(&json!("abc")).await;
    s.send_line(r#"{"jsonrpc":"2.0","id":6.0,"method":"ping"}"#).await;
    s.wait_response(&json!(6.0)).await;
    let lines = s.stdout_lines();
    assert_eq!(v(&lines[8]), v(r#"{"jsonrpc":"2.0","id":"abc","result":{}}"#));
    assert!(lines[9].contains(r#""id":6.0"#), "{}", lines[9]);
    assert!(s.close().await.success());
    assert_eq!(s.stdout_lines().len(), 10, "one line per request, nothing else: {:#?}", s.stdout_lines());
}

/// The reference's `tools/list` answer (wire report §1); ours is equal as parsed JSON.
const REFERENCE_TOOLS_LIST_RESULT: &str = r#"{"ttlMs":0,"cacheScope":"public","tools":[{"annotations":{"destructiveHint":false,"idempotentHint":true,"openWorldHint":true,"readOnlyHint":true},"description":"Search indexed GitHub repository content by meaning. Use this when you need implementation details, documentation, configuration, symbols, or examples from the indexed codebases. Write one specific natural-language query with the relevant names or error text. Omit source when you do not know which repository contains the answer; set it when the user identifies a repository or branch.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"A focused natural-language search query. Include exact identifiers, filenames, or error text when known; semantic matching also finds related wording."},"source":{"type":"string","description":"Optional repository scope in owner/repository or owner/repository@branch form. Omit it to search every indexed repository."},"path":{"type":"string","description":"Optional repository-relative path pattern. * and ** match across folders and ? matches one character; examples: docs/*, **/*.go, README.md."},"limit":{"type":"integer","description":"Maximum excerpts to return, from 1 through 20. Use the default for most questions; increase only when broader evidence is needed."}},"required":["query"],"additionalProperties":false},"name":"search","title":"Search Repository Content"}]}"#;

#[tokio::test]
async fn tools_list_bytes_match_the_reference() {
    let mut s = Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9").stdio().await;
    let (id, answer) = s.send(ClientRequest::ListToolsRequest(Default::default())).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(
        s.frame(&id),
        v(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{REFERENCE_TOOLS_LIST_RESULT}}}"))
    );
    assert!(s.close().await.success());
}

// -------------------------------------------------------------------------------------------
// Validation (CONTRACT §2) and argument-schema failures (wire report §4)
// -------------------------------------------------------------------------------------------

/// Each failure is a tool result with `isError: true` whose only text is the message. The
/// backends point at nothing: a check that let a bad call through would show a backend error.
#[tokio::test]
async fn every_validation_message_is_exact() {
    let mut s = Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9")
        .arg("--retry-attempts")
        .arg("1")
        .stdio()
        .await;
    const Q: &str = "query must be non-empty";
    const L: &str = "limit must be between 1 and 20";
    const B: &str = "source branch must be non-empty after @";
    const S: &str = "source must use owner/repository or owner/repository@branch";
    const P: &str = "path must not contain line breaks";
    let cases: Vec<(Value, &str)> = vec![
        (json!({"query": ""}), Q),
        (json!({"query": "   \t\n "}), Q),
        // The order of the checks: query, limit, source, path.
        (json!({"query": " ", "limit": 21, "source": "bad", "path": "a\nb"}), Q),
        (json!({"query": "q", "limit": 21}), L),
        (json!({"query": "q", "limit": -1}), L),
        (json!({"query": "q", "limit": 100, "source": "bad", "path": "a\nb"}), L),
        (json!({"query": "q", "source": "acme/widgets@"}), B),
        (json!({"query": "q", "source": "acme/widgets@   "}), B),
        (json!({"query": "q", "source": "bad@", "path": "a\nb"}), B),
        (json!({"query": "q", "source": "acme"}), S),
        (json!({"query": "q", "source": "acme/widgets/extra"}), S),
        (json!({"query": "q", "source": "/widgets"}), S),
        (json!({"query": "q", "source": "acme/"}), S),
        (json!({"query": "q", "source": " / "}), S),
        (json!({"query": "q", "source": "@main"}), S),
        (json!({"query": "q", "source": "acme/widgets/x@main"}), S),
        (json!({"query": "q", "source": "acme", "path": "a\nb"}), S),
        (json!({"query": "q", "path": "docs/\n*"}), P),
        (json!({"query": "q", "path": "a\rb"}), P),
        (json!({"query": "q", "source": "acme/widgets@main", "path": "/docs\r\n/x"}), P),
    ];
    for (args, message) in cases {
        let (frame, result) = call_raw(&s, args.clone()).await;
        assert!(is_error(&result), "{args}: {result}");
        assert_eq!(tool_text(&result), message, "{args}");
        assert_eq!(
            frame,
            json!({"jsonrpc": "2.0", "id": frame["id"], "result": {"content": [{"type": "text", "text": message}], "isError": true}}),
            "{args}"
        );
    }
    assert!(s.close().await.success());
    assert_eq!(s.stderr(), "");
}

#[tokio::test]
async fn argument_schema_failures_are_tool_errors() {
    let mut s = Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9")
        .args(["--retry-attempts", "1"])
        .stdio()
        .await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"query": "x", "limit": "5"}),
            r#"validating "arguments": validating root: validating /properties/limit: type: 5 has type "string", want "integer""#,
        ),
        (
            json!({"query": "x", "limit": 2.5}),
            r#"validating "arguments": validating root: validating /properties/limit: type: 2.5 has type "number", want "integer""#,
        ),
        (
            json!({"query": "x", "limit": null}),
            r#"validating "arguments": validating root: validating /properties/limit: type: null has type "null", want "integer""#,
        ),
        (
            json!({"query": 5}),
            r#"validating "arguments": validating root: validating /properties/query: type: 5 has type "integer", want "string""#,
        ),
        (
            json!({"query": "x", "foo": 1}),
            r#"validating "arguments": validating root: unexpected additional properties ["foo"]"#,
        ),
        (json!({"foo": 1}), r#"validating "arguments": validating root: unexpected additional properties ["foo"]"#),
        (json!({}), r#"validating "arguments": validating root: required: missing properties: ["query"]"#),
        (
            json!({"source": "acme/widgets"}),
            r#"validating "arguments": validating root: required: missing properties: ["query"]"#,
        ),
        (json!(null), r#"validating "arguments": validating root: required: missing properties: ["query"]"#),
    ];
    for (args, message) in cases {
        let (frame, result) = call_raw(&s, args.clone()).await;
        assert!(is_error(&result), "{args}: {result}");
        assert_eq!(tool_text(&result), message, "{args}");
        assert_eq!(frame["result"], json!({"content": [{"type": "text", "text": message}], "isError": true}));
    }
    // A whole number written as a float is an integer; validation passes and the (unreachable)
    // backend is asked.
    let result = s.call_tool("search", json!({"query": "x", "limit": 3.0})).await;
    assert!(tool_text(&result).starts_with("repository content search failed: embedding request failed: "), "{result}");
    // `arguments` absent altogether.
    let result = s.call_tool("search", Value::Null).await;
    assert_eq!(
        tool_text(&result),
        r#"validating "arguments": validating root: required: missing properties: ["query"]"#
    );
    assert!(s.close().await.success());
}

#[tokio::test]
async fn unknown_tool_is_a_json_rpc_invalid_params_error() {
    let mut s = Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9").stdio().await;
    let frame = s.request_frame("tools/call", json!({"name": "nope", "arguments": {"query": "x"}})).await;
    let id = &frame["id"];
    assert_eq!(
        frame,
        v(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"unknown tool \"nope\""}}}}"#))
    );
    let frame = s.request_frame("tools/call", json!({"arguments": {"query": "x"}})).await;
    let id = &frame["id"];
    assert_eq!(
        frame,
        v(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"unknown tool \"\""}}}}"#))
    );
    assert!(s.close().await.success());
}

// -------------------------------------------------------------------------------------------
// Every argument combination of seed 000, checked against Chroma's own answer
// -------------------------------------------------------------------------------------------

struct Case {
    args: Value,
    /// The `where` clause the contract builds from `source`.
    where_: Option<Value>,
    /// The `$regex` of `where_document` the contract builds from `path`.
    regex: Option<&'static str>,
}

fn eq(field: &str, value: &str) -> Value {
    json!({ field: {"$eq": value} })
}

fn cases() -> Vec<Case> {
    let org_repo = Some(json!({"$and": [eq("organization", "acme"), eq("repository", "widgets")]}));
    let org_repo_branch =
        Some(json!({"$and": [eq("organization", "acme"), eq("repository", "widgets"), eq("branch", "main")]}));
    vec![
        // No filter, default limit.
        Case { args: json!({"query": "where is the configuration loaded and validated"}), where_: None, regex: None },
        // source without branch.
        Case {
            args: json!({"query": "where is the configuration loaded and validated", "source": "acme/widgets"}),
            where_: org_repo.clone(),
            regex: None,
        },
        // source with branch, limit 20 (60 candidates).
        Case {
            args: json!({"query": "widget database retry", "source": "acme/widgets@main", "limit": 20}),
            where_: org_repo_branch.clone(),
            regex: None,
        },
        // limit 1.
        Case { args: json!({"query": "retry with exponential backoff", "limit": 1}), where_: None, regex: None },
        // limit 0 means the default, 5.
        Case { args: json!({"query": "release notes fixes", "limit": 0}), where_: None, regex: None },
        // `docs/*`: `*` crosses folders.
        Case {
            args: json!({"query": "retry with exponential backoff", "path": "docs/*", "limit": 20}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:docs/.*(?:\n|$)"),
        },
        // `**/*.go`.
        Case {
            args: json!({"query": "open the widget database", "path": "**/*.go", "limit": 20}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:(?:.*/)?.*\.go(?:\n|$)"),
        },
        // `**/` matches zero folders too.
        Case {
            args: json!({"query": "quick start build the daemon", "path": "**/README.md"}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:(?:.*/)?README\.md(?:\n|$)"),
        },
        // `?` matches one character.
        Case {
            args: json!({"query": "listen address data folder", "path": "config?example.yaml"}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:config.example\.yaml(?:\n|$)"),
        },
        // `?` matches one (non-ASCII) character.
        Case {
            args: json!({"query": "kiosk snapshot", "path": "docs/caf?.md"}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:docs/caf.\.md(?:\n|$)"),
        },
        // A leading `/` is dropped.
        Case {
            args: json!({"query": "precedence of settings", "path": "/docs/guides/*", "limit": 3}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:docs/guides/.*(?:\n|$)"),
        },
        // The non-ASCII path, literally.
        Case {
            args: json!({"query": "café mode", "path": "docs/café.md"}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:docs/café\.md(?:\n|$)"),
        },
        // `*` alone crosses folders: `*.go` finds internal/config/config.go.
        Case {
            args: json!({"query": "load configuration", "path": "*config.go", "limit": 20}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:.*config\.go(?:\n|$)"),
        },
        // One file only: two at first, then the deferred ones fill in Chroma's order.
        Case {
            args: json!({"query": "release notes fixes", "path": "CHANGELOG.md", "limit": 7}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:CHANGELOG\.md(?:\n|$)"),
        },
        // Markdown files: CHANGELOG chunks compete with other files.
        Case {
            args: json!({"query": "changelog release version fixes added", "path": "**/*.md", "limit": 10}),
            where_: None,
            regex: Some(r"^Source: [^\n]+:(?:.*/)?.*\.md(?:\n|$)"),
        },
        // Everything together, with whitespace to trim.
        Case {
            args: json!({"query": "  widget client color  ", "source": " acme/widgets@main ", "path": " **/*.py ", "limit": 4}),
            where_: org_repo_branch,
            regex: Some(r"^Source: [^\n]+:(?:.*/)?.*\.py(?:\n|$)"),
        },
        Case {
            args: json!({"query": "store list widgets", "source": "acme/widgets", "path": "internal/*", "limit": 20}),
            where_: org_repo,
            regex: Some(r"^Source: [^\n]+:internal/.*(?:\n|$)"),
        },
    ]
}

/// What the contract says a call must show, computed from Chroma's raw answer for the same
/// embedding, filters and candidate count; also returns that raw answer.
async fn expected_for(
    args: &Value,
    where_: Option<Value>,
    regex: Option<&str>,
) -> (support::Expected, Vec<support::RawCandidate>) {
    let f = support::fixture();
    let query = args["query"].as_str().unwrap().trim();
    let limit = match args["limit"].as_i64() {
        None | Some(0) => 5,
        Some(n) => n as usize,
    };
    let embedding = support::embed_query(&f.embed_url, query).await;
    let raw = support::chroma_query_filtered(
        &f.chroma_url,
        &f.collection_id,
        &embedding,
        (limit * 3).min(60),
        where_,
        regex.map(|r| json!({"$regex": r})),
    )
    .await;
    let candidates = raw_candidates(&raw);
    (contract_select(&candidates, limit), candidates)
}

#[tokio::test]
async fn every_argument_combination_matches_chroma_and_the_selection_rules() {
    let mut s = fixture_session().await;
    let mut per_file_rule_mattered = false;
    let mut fill_used = false;
    for case in cases() {
        let (expected, candidates) = expected_for(&case.args, case.where_.clone(), case.regex).await;
        let result = s.call_tool("search", case.args.clone()).await;
        assert!(!is_error(&result), "{}: {result}", case.args);
        let text = tool_text(&result);
        assert!(!expected.selected.is_empty(), "each case finds something: {}", case.args);
        assert!(text.starts_with(&format!("{}\n\n---\n\n### 1\n\n", found_line(expected.selected.len()))), "{text}");
        assert_eq!(shown_results(text), expected.shown(), "results of {}", case.args);
        for n in 1..=expected.selected.len() {
            assert!(text.contains(&format!("\n\n---\n\n### {n}\n\n**Repo:** `")), "heading {n} of {}", case.args);
        }
        // Nothing internal leaks: ids, hashes, the stored prefix.
        for c in &expected.selected {
            assert!(!text.contains(&c.id), "record id shown");
            assert!(!text.contains(c.metadata["chunk_hash"].as_str().unwrap()), "chunk hash shown");
        }
        assert!(!text.contains("\nSource: acme/"), "the stored `Source:` prefix is shown: {text}");
        assert!(!text.contains("Type: "), "the stored `Type:` prefix is shown");
        // Would plain relevance order (duplicates dropped) have shown something else?
        let mut seen = std::collections::HashSet::new();
        let plain: Vec<String> = candidates
            .iter()
            .filter(|c| seen.insert(c.body()))
            .take(expected.selected.len())
            .map(|c| c.id.clone())
            .collect();
        per_file_rule_mattered |= plain != expected.ids();
        fill_used |= expected.filled_from_deferred > 0;
    }
    assert!(fill_used, "no case exercised filling from deferred same-file results");
    assert!(per_file_rule_mattered, "no case where the two-per-file rule changed the answer");
    assert!(s.close().await.success());
    assert_eq!(s.stderr(), "");
}

#[tokio::test]
async fn no_match_texts_with_and_without_source() {
    let mut s = fixture_session().await;
    let cases = [
        (json!({"query": "configuration", "path": "nothing/here/*"}), NO_MATCH),
        (json!({"query": "configuration", "source": "acme/other"}), NO_MATCH_WITH_SOURCE),
        (json!({"query": "configuration", "source": "acme/widgets@dev"}), NO_MATCH_WITH_SOURCE),
        // Case-sensitive, exact metadata match.
        (json!({"query": "configuration", "source": "Acme/Widgets"}), NO_MATCH_WITH_SOURCE),
        (json!({"query": "configuration", "source": "acme/widgets", "path": "*.java"}), NO_MATCH_WITH_SOURCE),
        // `?` is exactly one character: `config?.yaml` does not match `config.example.yaml`.
        (json!({"query": "listen address", "path": "config?.yaml"}), NO_MATCH),
        // Without `**/`, a pattern is anchored at the repository root.
        (json!({"query": "client", "path": "client.py"}), NO_MATCH),
        // Only one leading `/` is removed, so `//README.md` asks for `/README.md`,
        // which no indexed path is (`/README.md` alone finds the root README).
        (json!({"query": "quick start", "path": "//README.md"}), NO_MATCH),
    ];
    for (args, text) in cases {
        let (frame, result) = call_raw(&s, args.clone()).await;
        assert!(!is_error(&result), "no match is a success: {args}");
        assert_eq!(tool_text(&result), text, "{args}");
        assert_eq!(frame["result"], json!({"content": [{"type": "text", "text": text}]}), "{args}");
    }
    assert!(s.close().await.success());
}

// -------------------------------------------------------------------------------------------
// Rendering rules on real records
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn cafe_link_is_percent_encoded_and_whole_result_is_exact() {
    let mut s = fixture_session().await;
    let result = s.call_tool("search", json!({"query": "kiosk", "path": "docs/café.md", "limit": 1})).await;
    assert_eq!(
        tool_text(&result),
        format!(
            "Found 1 relevant repository excerpt, ranked by semantic relevance.\n\n---\n\n### 1\n\n\
             **Repo:** `acme/widgets@main`\n**File:** `docs/café.md#L1-L5`\n\n\
             Source: [docs/café.md](https://github.com/acme/widgets/blob/{COMMIT}/docs/caf%C3%A9.md#L1-L5)\n\
             Context: section `Café mode`\n\n\
             ```markdown\n# Café mode\n\nCafé mode serves widgets read-only from a snapshot, for kiosks and demos.\n\n\
             Enable it with `--cafe`. Writes are refused with HTTP 405.\n```\n"
        )
    );
    assert!(s.close().await.success());
}

#[tokio::test]
async fn four_backtick_fence_in_markdown_gets_a_five_backtick_fence() {
    let mut s = fixture_session().await;
    let result = s
        .call_tool("search", json!({"query": "retry policy", "path": "docs/guides/configuration.md", "limit": 5}))
        .await;
    let text = tool_text(&result);
    let block = format!(
        "**File:** `docs/guides/configuration.md#L12-L23`\n\n\
         Source: [docs/guides/configuration.md](https://github.com/acme/widgets/blob/{COMMIT}/docs/guides/configuration.md#L12-L23)\n\
         Context: section `Configuration guide > Retry policy`\n\n\
         `````markdown\n## Retry policy\n\n\
         Transient storage failures are retried with exponential backoff. The first delay is 250 ms and each\n\
         later delay doubles, up to a ceiling of four seconds.\n\n\
         ````markdown\n```yaml\nretry:\n  attempts: 5\n```\n````\n`````\n"
    );
    assert!(text.contains(&block), "missing the five-backtick block in:\n{text}");
    // A chunk whose body has a three-backtick run inside a line only still gets three.
    assert!(
        text.contains("Context: section `Configuration guide > Precedence`\n\n```markdown\n## Precedence\n"),
        "{text}"
    );
    assert!(s.close().await.success());
}

#[tokio::test]
async fn go_symbol_context_and_files_without_symbol() {
    let mut s = fixture_session().await;
    let result =
        s.call_tool("search", json!({"query": "Load config", "path": "internal/config/config.go", "limit": 5})).await;
    let text = tool_text(&result);
    assert!(text.starts_with(&format!("{}\n", found_line(5))), "{text}");
    let link = |lines: &str| {
        format!(
            "Source: [internal/config/config.go](https://github.com/acme/widgets/blob/{COMMIT}/internal/config/config.go#{lines})\n"
        )
    };
    // A named symbol.
    assert!(
        text.contains(&format!(
            "**File:** `internal/config/config.go#L33-L51`\n\n{}Context: symbol `function_declaration:Load`\n\n```go\nfunc Load(flags *Flags) (Config, error) {{\n",
            link("L33-L51")
        )),
        "{text}"
    );
    // A symbol without a name.
    assert!(
        text.contains(&format!(
            "**File:** `internal/config/config.go#L12-L18`\n\n{}Context: symbol `type_declaration`\n\n```go\ntype Config struct {{\n",
            link("L12-L18")
        )),
        "{text}"
    );
    // No symbol and no section: no Context line at all.
    assert!(
        text.contains(&format!(
            "**File:** `internal/config/config.go#L1-L11`\n\n{}\n```go\n// Package config loads the daemon settings",
            link("L1-L11")
        )),
        "{text}"
    );
    assert_eq!(text.matches("Context: ").count(), 4, "{text}");
    assert!(s.close().await.success());
}

#[tokio::test]
async fn plain_text_single_line_and_leading_blank_lines() {
    let mut s = fixture_session().await;
    // docs/notes.txt chunk 4: type text, no language (a bare fence), no context, and a body that
    // starts with blank lines after the prefix (trimmed away).
    let result = s
        .call_tool(
            "search",
            json!({"query": "config store retry store value value backoff layout flag", "path": "docs/notes.txt", "limit": 5}),
        )
        .await;
    let text = tool_text(&result);
    assert!(
        text.contains(&format!(
            "**File:** `docs/notes.txt#L55-L59`\n\n\
             Source: [docs/notes.txt](https://github.com/acme/widgets/blob/{COMMIT}/docs/notes.txt#L55-L59)\n\n\
             ```\nconfig store retry store value value backoff layout flag"
        )),
        "{text}"
    );
    assert!(!text.contains("Context: "), "{text}");
    // A one-line chunk: `#L5` without `-L5`, in the File line and the link.
    let result = s
        .call_tool("search", json!({"query": "__all__ WidgetClient", "path": "py/widgets/__init__.py", "limit": 3}))
        .await;
    let text = tool_text(&result);
    assert!(
        text.contains(&format!(
            "**File:** `py/widgets/__init__.py#L5`\n\n\
             Source: [py/widgets/__init__.py](https://github.com/acme/widgets/blob/{COMMIT}/py/widgets/__init__.py#L5)\n\
             Context: symbol `assignment:__all__`\n\n```python\n__all__ = [\"WidgetClient\"]\n```\n"
        )),
        "{text}"
    );
    assert!(s.close().await.success());
}

/// Tool-result text reaches the client as it was rendered: `&`, `<` and non-ASCII included
/// (how the envelope escapes them is free, CONTRACT §6).
#[tokio::test]
async fn result_text_survives_the_wire() {
    let mut s = fixture_session().await;
    let (frame, result) =
        call_raw(&s, json!({"query": "withRetry open store", "path": "internal/store/store.go", "limit": 7})).await;
    let text = tool_text(&result);
    assert!(text.contains("return &Store{db: db}, nil") && text.contains("case <-ctx.Done():"), "{text}");
    assert_eq!(frame["result"], result);
    let (frame, _) = call_raw(&s, json!({"query": "café", "path": "docs/café.md"})).await;
    let text = tool_text(&frame["result"]);
    assert!(text.contains("Café mode") && text.contains("caf%C3%A9.md"), "{text}");
    assert!(s.close().await.success());
}

// -------------------------------------------------------------------------------------------
// Reviewed snapshots of whole answers
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn snapshots_of_representative_searches() {
    let mut s = fixture_session().await;
    let searches = [
        ("config_loaded_and_validated", json!({"query": "where is the configuration loaded and validated"})),
        (
            "retry_policy_in_docs",
            json!({"query": "retry policy backoff", "path": "docs/guides/configuration.md", "limit": 3}),
        ),
        (
            "python_client_scoped",
            json!({"query": "widget client color", "source": "acme/widgets@main", "path": "**/*.py", "limit": 4}),
        ),
        ("rust_rect_area", json!({"query": "Rect area width height", "path": "src/*", "limit": 2})),
    ];
    for (name, args) in searches {
        let result = s.call_tool("search", args).await;
        assert!(!is_error(&result));
        insta::assert_snapshot!(name, tool_text(&result));
    }
    assert!(s.close().await.success());
}

// -------------------------------------------------------------------------------------------
// Collections with other branches and missing commits (records derived from the fixture)
// -------------------------------------------------------------------------------------------

/// The fixture plus copies of `docs/` and `internal/config/` on branch `release/v2` without an
/// indexed commit; the copies' vectors are nudged so Chroma's order has no ties.
async fn branch_collection(name: &str) -> String {
    let mut records: Vec<Value> = support::fixture_records().to_vec();
    for r in support::fixture_records() {
        let path = r["metadata"]["path"].as_str().unwrap();
        if !(path.starts_with("docs/") || path.starts_with("internal/config/")) {
            continue;
        }
        let mut copy = r.clone();
        copy["id"] = json!(format!("{}-release", r["id"].as_str().unwrap()));
        copy["document"] =
            json!(r["document"].as_str().unwrap().replacen("acme/widgets@main:", "acme/widgets@release/v2:", 1));
        copy["metadata"]["branch"] = json!("release/v2");
        copy["metadata"]["indexed_commit_sha"] = json!("");
        let e = copy["embedding"].as_array_mut().unwrap();
        for x in e.iter_mut() {
            *x = json!(x.as_f64().unwrap() * 0.999);
        }
        records.push(copy);
    }
    support::load_records(support::chroma().url(), name, &records).await
}

#[tokio::test]
async fn branches_duplicates_and_links_without_commit() {
    const NAME: &str = "e2e-stdio-branches";
    let id = branch_collection(NAME).await;
    let chroma = support::chroma().url();
    let embed = support::embed_server().url();
    let mut s = Server::with_backends(chroma, NAME, embed).stdio().await;

    // Only the branch: links fall back to the (escaped) branch name.
    let result = s
        .call_tool("search", json!({"query": "kiosk", "source": "acme/widgets@release/v2", "path": "docs/café.md"}))
        .await;
    assert_eq!(
        tool_text(&result),
        "Found 1 relevant repository excerpt, ranked by semantic relevance.\n\n---\n\n### 1\n\n\
         **Repo:** `acme/widgets@release/v2`\n**File:** `docs/café.md#L1-L5`\n\n\
         Source: [docs/café.md](https://github.com/acme/widgets/blob/release%2Fv2/docs/caf%C3%A9.md#L1-L5)\n\
         Context: section `Café mode`\n\n\
         ```markdown\n# Café mode\n\nCafé mode serves widgets read-only from a snapshot, for kiosks and demos.\n\n\
         Enable it with `--cafe`. Writes are refused with HTTP 405.\n```\n"
    );

    // Both branches: the copies repeat the main bodies and are dropped as duplicates.
    for (args, where_) in [
        (
            json!({"query": "how is the configuration loaded", "source": "acme/widgets", "limit": 20}),
            json!({"$and": [eq("organization", "acme"), eq("repository", "widgets")]}),
        ),
        (
            json!({"query": "retry backoff", "source": "acme/widgets@release/v2", "limit": 4}),
            json!({"$and": [eq("organization", "acme"), eq("repository", "widgets"), eq("branch", "release/v2")]}),
        ),
    ] {
        let query = args["query"].as_str().unwrap();
        let limit = args["limit"].as_u64().unwrap() as usize;
        let embedding = support::embed_query(embed, query).await;
        let raw = support::chroma_query_filtered(chroma, &id, &embedding, limit * 3, Some(where_), None).await;
        let expected = contract_select(&raw_candidates(&raw), limit);
        let result = s.call_tool("search", args.clone()).await;
        assert_eq!(shown_results(tool_text(&result)), expected.shown(), "{args}");
        if args["source"] == "acme/widgets" {
            assert!(expected.dropped_duplicates > 0, "the release copies should repeat main's bodies");
        }
    }
    assert!(s.close().await.success());
    support::delete_collection(chroma, NAME).await;
}

// -------------------------------------------------------------------------------------------
// Backend failures through the binary, and secrets
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn missing_collection_reports_chroma_404() {
    let f = support::fixture();
    let mut s = Server::with_backends(&f.chroma_url, "no-such-collection", &f.embed_url).stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(is_error(&result));
    // Chroma 1.5.9's answer, verbatim.
    assert_eq!(
        tool_text(&result),
        r#"repository content search failed: Chroma collection lookup failed with HTTP 404: {"error":"NotFoundError","message":"Collection [no-such-collection] does not exist"}"#
    );
    assert!(s.close().await.success());
}

#[tokio::test]
async fn embed_server_down_reports_the_transport_error() {
    let f = support::fixture();
    // A port that nothing listens on.
    let port = support::free_port();
    let embed = format!("http://127.0.0.1:{port}");
    let mut s =
        Server::with_backends(&f.chroma_url, &f.collection, &embed).args(["--retry-attempts", "2"]).stdio().await;
    let started = std::time::Instant::now();
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(is_error(&result));
    assert_eq!(
        tool_text(&result),
        format!(
            "repository content search failed: embedding request failed: Post \"{embed}/v1/embeddings\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    // Two attempts: one retry after 0.5 s.
    assert!(started.elapsed() >= std::time::Duration::from_millis(450), "{:?}", started.elapsed());
    assert!(s.close().await.success());
}

/// Secrets from `--bearer-token` and `--embedding-api-key` appear neither on stdout nor on stderr,
/// even with `--debug` and even when a backend echoes them back in an error body.
#[tokio::test]
async fn secrets_never_reach_stdout_or_stderr() {
    const BEARER: &str = "sekret-bearer-4f1c9e";
    const EMBED_KEY: &str = "sekret-embed-77ab01";
    let f = support::fixture();
    // Chroma fake that echoes the Authorization header it got, in a 403 body.
    let chroma = Recorder::fake(|r| {
        (
            403,
            format!(
                "{{\"error\":\"Forbidden\",\"message\":\"token {} refused\"}}",
                r.header("authorization").unwrap_or("")
            ),
        )
    })
    .await;
    // The real embed server behind a recorder.
    let embed = Recorder::forward(&f.embed_url).await;
    let mut s = Server::with_backends(chroma.url(), "secret-test", embed.url())
        .args(["--bearer-token", BEARER, "--embedding-api-key", EMBED_KEY, "--debug", "--retry-attempts", "1"])
        .stdio()
        .await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(is_error(&result));
    assert_eq!(
        tool_text(&result),
        r#"repository content search failed: Chroma collection lookup failed with HTTP 403: {"error":"Forbidden","message":"token Bearer <redacted> refused"}"#
    );
    // Each backend got its own credential.
    let lookups = chroma.requests();
    assert_eq!(lookups.len(), 1);
    assert_eq!(lookups[0].header("authorization"), Some(format!("Bearer {BEARER}").as_str()));
    assert_eq!(lookups[0].path, "/api/v2/tenants/default_tenant/databases/default_database/collections/secret-test");
    let embeds = embed.requests_to("/v1/embeddings");
    assert_eq!(embeds.len(), 1);
    assert_eq!(embeds[0].header("authorization"), Some(format!("Bearer {EMBED_KEY}").as_str()));
    assert_eq!(embeds[0].json(), json!({"model": support::EMBED_MODEL, "input": ["query: configuration"]}));
    assert_eq!(embeds[0].header("user-agent"), Some(format!("repo-retriever/{}", env!("CARGO_PKG_VERSION")).as_str()));
    assert_eq!(lookups[0].header("user-agent"), embeds[0].header("user-agent"));

    assert!(s.close().await.success());
    let stderr = s.stderr();
    assert!(!stderr.is_empty(), "--debug writes diagnostics to stderr");
    for secret in [BEARER, EMBED_KEY] {
        assert!(!stderr.contains(secret), "secret on stderr:\n{stderr}");
        for line in s.stdout_lines() {
            assert!(!line.contains(secret), "secret on stdout: {line}");
        }
    }
    // stdout carries only protocol frames, even with --debug.
    for line in s.stdout_lines() {
        let frame: Value =
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("non-protocol line on stdout: {line}"));
        assert!(frame["jsonrpc"] == "2.0" && frame.get("id").is_some(), "non-protocol line on stdout: {line}");
    }
}

// -------------------------------------------------------------------------------------------
// Transport hygiene
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn eof_after_calls_exits_cleanly_with_only_frames_on_stdout() {
    let mut s = Server::fixture().raw_stdio().await;
    s.initialize().await;
    let ids = [
        s.send_request("tools/call", json!({"name": "search", "arguments": {"query": "store"}})).await,
        s.send_request("ping", json!({})).await,
        s.send_request("tools/list", json!({})).await,
    ];
    // EOF right away: in-flight calls still get their answers before the exit.
    let status = s.close().await;
    assert!(status.success(), "{status}");
    let lines = s.stdout_lines();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    for id in &ids {
        raw_line(&lines, id);
    }
    assert_eq!(s.stderr(), "");
}

/// Without `--debug` and `RUST_LOG`, a client's whole session (initialize, tools/list, a search
/// that finds something) leaves stderr empty: the libraries underneath speak only at WARN.
#[tokio::test]
async fn default_session_writes_nothing_to_stderr() {
    let mut s = fixture_session().await;
    let tools = s.list_tools().await;
    assert_eq!(tools["tools"][0]["name"], "search", "{tools}");
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(!is_error(&result), "{result}");
    assert!(!shown_results(tool_text(&result)).is_empty(), "{result}");
    assert!(s.close().await.success());
    assert_eq!(s.stderr(), "");
}

/// A call the server answers with a JSON-RPC error (an unknown tool, arguments that do not decode)
/// is the client's mistake, answered to the client: nothing on stderr.
#[tokio::test]
async fn protocol_errors_write_nothing_to_stderr() {
    let mut s =
        Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9").raw_stdio().await;
    s.initialize().await;
    let id = s.send_request("tools/call", json!({"name": "no_such_tool", "arguments": {}})).await;
    let answer = s.wait_response(&id).await;
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(s.close().await.success());
    assert_eq!(s.stderr(), "");
}

/// `--debug` writes one line per backend request, and none of the dependencies' chatter: not
/// rmcp's session and message lines (a message line carries the whole tool result), not hyper's
/// or h2's connection lines.
#[tokio::test]
async fn debug_lists_backend_requests_without_dependency_chatter() {
    let mut s = Server::fixture().arg("--debug").stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(!is_error(&result), "{result}");
    assert!(s.close().await.success());
    let stderr = s.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines[0].ends_with(" DEBUG repo_retriever: Debug mode enabled."), "{stderr}");
    let requests: Vec<&str> = lines.iter().copied().filter(|l| l.contains(" backend request ")).collect();
    for operation in ["embedding request", "Chroma collection lookup", "Chroma query"] {
        assert!(
            requests.iter().any(|l| l.contains(&format!("operation=\"{operation}\""))),
            "no {operation:?} line in\n{stderr}"
        );
    }
    for line in &lines {
        let target = line.split_whitespace().nth(2).unwrap_or_default();
        assert!(target.starts_with("rr_") || target.starts_with("repo_retriever"), "a dependency's line: {line}");
    }
    let text = tool_text(&result);
    let excerpt = text.lines().find(|l| l.len() > 20 && !l.starts_with('#')).expect("an excerpt line");
    assert!(!stderr.contains(excerpt), "the tool result on stderr:\n{stderr}");
}

/// `RUST_LOG` has the last word over both modes: here rmcp's session lines, which neither the
/// default nor `--debug` shows.
#[tokio::test]
async fn rust_log_chooses_what_is_logged() {
    let mut s = Server::fixture().env("RUST_LOG", "rmcp=info").stdio().await;
    s.list_tools().await;
    assert!(s.close().await.success());
    let stderr = s.stderr();
    assert!(stderr.contains("rmcp::service: Service initialized as server"), "{stderr}");
    assert!(!stderr.contains("backend request"), "{stderr}");
}

/// The collection id may be cached, but a collection that was deleted and created again (a new
/// id) must still be found, as the reference finds it by looking it up on every call.
#[tokio::test]
async fn recreated_collection_is_found_again() {
    const NAME: &str = "e2e-stdio-recreate";
    let chroma = support::chroma().url();
    let first = support::load_fixture_subset(chroma, NAME, |r| r["metadata"]["path"] == "docs/café.md").await;
    let mut s = Server::with_backends(chroma, NAME, support::embed_server().url()).stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration", "limit": 20})).await;
    assert_eq!(
        shown_results(tool_text(&result)),
        [("acme/widgets@main".to_string(), "docs/café.md#L1-L5".to_string())]
    );

    let second = support::load_fixture_subset(chroma, NAME, |r| r["metadata"]["path"] == "config.example.yaml").await;
    assert_ne!(first, second);
    let result = s.call_tool("search", json!({"query": "configuration", "limit": 20})).await;
    assert!(!is_error(&result), "{result}");
    assert_eq!(
        shown_results(tool_text(&result)),
        [("acme/widgets@main".to_string(), "config.example.yaml#L1-L5".to_string())]
    );

    support::delete_collection(chroma, NAME).await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert_eq!(
        tool_text(&result),
        format!(
            r#"repository content search failed: Chroma collection lookup failed with HTTP 404: {{"error":"NotFoundError","message":"Collection [{NAME}] does not exist"}}"#
        )
    );
    assert!(s.close().await.success());
}
