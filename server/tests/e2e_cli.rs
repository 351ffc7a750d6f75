//! The command line end to end: `--version`, start-up failures and their exit codes,
//! and the precedence flag > environment > YAML, made visible through which Chroma collection a
//! search reaches.

use crate::support;

use std::process::Output;

use crate::support::{Server, is_error, tool_text};
use serde_json::json;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A start-up failure: `Error: <message>` on stderr, exit 1, nothing on stdout.
async fn assert_startup_error(server: Server, message: &str) {
    let out = server.output().await;
    assert_eq!(stderr(&out), format!("Error: {message}\n"));
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert_eq!(stdout(&out), "", "{message}");
}

#[tokio::test]
async fn version_prints_one_line_and_exits_0() {
    for flag in ["--version", "-version", "--version=true"] {
        let out = Server::new().arg(flag).output().await;
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert_eq!(stdout(&out), format!("{}\n", support::expected_version_line()), "{flag}");
        assert_eq!(stderr(&out), "", "{flag}");
    }
    // Even when the rest of the configuration is missing or wrong.
    let out = Server::new().args(["--server-url", "ftp://x", "--version"]).output().await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out).lines().count(), 1);
}

/// `-h` and `--help` list the subcommands and the drop-in flags, on stdout, exit 0.
#[tokio::test]
async fn help_lists_subcommands_and_drop_in_flags() {
    for form in ["-h", "--help", "-help"] {
        let out = Server::new().arg(form).output().await;
        assert_eq!(out.status.code(), Some(0), "{form}");
        assert_eq!(stderr(&out), "", "{form}");
        let text = stdout(&out);
        for command in ["index", "search", "serve", "eval", "plugins"] {
            assert!(
                text.lines().any(|line| line.starts_with(&format!("  {command} "))),
                "{form} lacks {command}:\n{text}"
            );
        }
        for flag in [
            "--server-url",
            "--collection-name",
            "--embedding-api-url",
            "--rerank-max-request-bytes",
            "--http",
            "--version",
        ] {
            assert!(text.contains(&format!("      {flag}")), "{form}: help lacks {flag}:\n{text}");
        }
    }
    // A subcommand's own help is clap's, and `--limit` shows one default.
    let out = Server::new().args(["search", "--help"]).output().await;
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let limit = text.lines().find(|line| line.contains("--limit")).unwrap_or_else(|| panic!("{text}"));
    assert!(limit.ends_with("[default: 5]"), "{limit}");
    assert!(!text.contains("[default: \"\"]"), "{text}");
}

#[tokio::test]
async fn missing_required_configuration_is_an_error_on_stderr() {
    assert_startup_error(Server::new(), "server-url is required").await;
    assert_startup_error(Server::new().args(["--server-url", "http://127.0.0.1:1"]), "collection-name is required")
        .await;
    assert_startup_error(
        Server::new().args(["--server-url", "http://127.0.0.1:1", "--collection-name", "abc"]),
        "embedding-api-url is required",
    )
    .await;
    assert_startup_error(
        Server::new()
            .args(["--server-url", "http://127.0.0.1:1", "--collection-name", "abc"])
            .args(["--embedding-api-url", "http://127.0.0.1:1"]),
        "embedding-model is required",
    )
    .await;
}

#[tokio::test]
async fn invalid_configuration_messages_through_the_binary() {
    let base = || Server::with_backends("http://127.0.0.1:1", "abc", "http://127.0.0.1:1");
    assert_startup_error(
        Server::with_backends("http://127.0.0.1:1/path", "abc", "http://127.0.0.1:1"),
        "server-url must be a full HTTP(S) origin without credentials, path, query, or fragment",
    )
    .await;
    assert_startup_error(
        Server::with_backends("http://127.0.0.1:1", "a", "http://127.0.0.1:1"),
        "collection-name must be 3-512 characters and use letters, numbers, '.', '_' or '-'",
    )
    .await;
    assert_startup_error(
        base().args(["--rerank-api-url", "http://127.0.0.1:1"]),
        "rerank-api-url and rerank-model must be configured together",
    )
    .await;
    assert_startup_error(
        base()
            .args(["--rerank-api-url", "http://127.0.0.1:1", "--rerank-model", "m"])
            .args(["--rerank-candidate-multiplier", "1"]),
        "rerank-candidate-multiplier must be at least 2 when reranking is enabled",
    )
    .await;
    assert_startup_error(base().args(["--retry-attempts", "0"]), "retry-attempts must be positive").await;
    assert_startup_error(
        base().env("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", "three"),
        "CHROMA_REPO_SEARCH_RETRY_ATTEMPTS must be an integer",
    )
    .await;
    assert_startup_error(
        base().env("MCP_CHROMADB_REPO_SEARCH_DEBUG", "yes"),
        "MCP_CHROMADB_REPO_SEARCH_DEBUG must be true or false",
    )
    .await;
    assert_startup_error(
        base().env("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", "90"),
        "MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT must be a duration",
    )
    .await;
}

#[tokio::test]
async fn unknown_flag_exits_2_with_usage() {
    let out = Server::fixture().arg("-bogus").output().await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(err.starts_with("error: unexpected argument '--bogus' found\n"), "{err}");
    assert!(err.contains("Usage: repo-retriever"), "{err}");
}

/// An argument that is not UTF-8 (a path on a Linux file system may be any bytes) is refused with a
/// message, never a panic; a subcommand's path argument is read as the path it is.
#[test]
fn an_argument_that_is_not_utf8_is_refused_or_read_as_a_path() {
    use std::os::unix::ffi::OsStrExt as _;
    let bad = std::ffi::OsStr::from_bytes(b"dir\xff");
    let out = std::process::Command::new(support::server_bin()).args(["--server-url".as_ref(), bad]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stderr(&out), "invalid argument \"dir\u{fffd}\": not valid UTF-8\n");

    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join(bad);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("lib.rs"), "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 { a + b }\n").unwrap();
    let store = work.path().join("store");
    let out = std::process::Command::new(support::server_bin())
        .arg("index")
        .arg(&dir)
        .arg("--store")
        .arg(&store)
        .env_remove("REPO_RETRIEVER_STORE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["files_indexed"], 1, "{summary}");
    // A value clap reads as text is refused by clap, exit 2.
    let out = std::process::Command::new(support::server_bin())
        .args(["search".as_ref(), bad, "--store".as_ref(), store.as_os_str()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("UTF-8"), "{}", stderr(&out));
}

/// The drop-in with backends it never reaches (nothing is searched).
fn unused_backends() -> Server {
    Server::with_backends("http://127.0.0.1:9", "unused-collection", "http://127.0.0.1:9")
}

/// The drop-in checks no token of its own: token settings of `serve --http` in its environment are
/// named as ignored on stderr rather than silently doing nothing.
#[tokio::test]
async fn drop_in_warns_that_it_ignores_serve_token_settings() {
    for name in ["REPO_RETRIEVER_TOKENS", "REPO_RETRIEVER_TOKEN_FILE"] {
        let out = unused_backends().env(name, "0123456789abcdef0123456789abcdef admin").output_with_stdin("").await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&format!(" WARN repo_retriever: {name} is ignored: the drop-in server")), "{err}");
        assert!(!err.contains("0123456789abcdef"), "{err}");
    }
    let out = unused_backends().env("REPO_RETRIEVER_TOKENS", "").output_with_stdin("").await;
    assert_eq!(stderr(&out), "");
}

fn write_yaml(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write YAML");
    path.display().to_string()
}

#[tokio::test]
async fn yaml_version_must_be_1() {
    let dir = tempfile::tempdir().unwrap();
    let f = support::fixture();
    let body = format!(
        "chroma:\n  server_url: {}\n  collection_name: {}\nembedding:\n  api_url: {}\n  model: {}\n",
        f.chroma_url,
        f.collection,
        f.embed_url,
        support::EMBED_MODEL
    );
    let v2 = write_yaml(&dir, "v2.yaml", &format!("version: 2\n{body}"));
    assert_startup_error(Server::new().args(["--config", &v2]), "config version must be 1").await;
    assert_startup_error(Server::new().env("CHROMA_REPO_SEARCH_CONFIG_FILE", &v2), "config version must be 1").await;
    // And a version 1 file alone is a complete configuration.
    let v1 = write_yaml(&dir, "v1.yaml", &format!("version: 1\n{body}"));
    let mut s = Server::new().args(["--config", &v1]).stdio().await;
    let result = s.call_tool("search", json!({"query": "kiosk", "path": "docs/café.md"})).await;
    assert!(!is_error(&result), "{result}");
    assert!(s.close().await.success());
    // A bearer token does not belong in YAML: an unknown key is refused.
    let token = write_yaml(&dir, "token.yaml", &format!("version: 1\n{body}  bearer_token: t0ken\n"));
    let out = Server::new().args(["--config", &token]).output().await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(err.starts_with("Error: ") && err.contains("bearer_token") && err.ends_with('\n'), "{err}");
}

/// The error text of a search names the collection the server was configured with.
async fn collection_reached(server: Server) -> String {
    let mut s = server.stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration", "limit": 1})).await;
    assert!(s.close().await.success());
    let text = tool_text(&result);
    if !is_error(&result) {
        return support::FIXTURE_COLLECTION.to_string();
    }
    let name = text
        .strip_prefix(r#"repository content search failed: Chroma collection lookup failed with HTTP 404: {"error":"NotFoundError","message":"Collection ["#)
        .and_then(|rest| rest.strip_suffix(r#"] does not exist"}"#))
        .unwrap_or_else(|| panic!("unexpected answer: {text}"));
    name.to_string()
}

#[tokio::test]
async fn precedence_flag_beats_env_beats_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let f = support::fixture();
    let yaml = |collection: &str| {
        format!(
            "version: 1\nchroma:\n  server_url: {}\n  collection_name: {collection}\nembedding:\n  api_url: {}\n  model: {}\n",
            f.chroma_url,
            f.embed_url,
            support::EMBED_MODEL
        )
    };
    let from_flag_file = write_yaml(&dir, "flag.yaml", &yaml("yaml-flag-file"));
    let from_env_file = write_yaml(&dir, "env.yaml", &yaml("yaml-env-file"));

    // YAML named by the environment.
    let server = Server::new().env("CHROMA_REPO_SEARCH_CONFIG_FILE", &from_env_file);
    assert_eq!(collection_reached(server.clone()).await, "yaml-env-file");
    // `--config` beats the variable naming another file.
    let server = server.args(["--config", &from_flag_file]);
    assert_eq!(collection_reached(server.clone()).await, "yaml-flag-file");
    // The environment beats YAML.
    let server = server.env("CHROMA_REPO_SEARCH_COLLECTION_NAME", "from-env");
    assert_eq!(collection_reached(server.clone()).await, "from-env");
    // A flag beats the environment: here, the real collection.
    let server = server.args(["--collection-name", support::FIXTURE_COLLECTION]);
    assert_eq!(collection_reached(server).await, support::FIXTURE_COLLECTION);

    // The same for the server URL: a wrong URL in YAML and the environment, the right one by flag.
    let bad_url = write_yaml(
        &dir,
        "bad-url.yaml",
        &format!(
            "version: 1\nchroma:\n  server_url: http://127.0.0.1:1\n  collection_name: {}\nembedding:\n  api_url: {}\n  model: {}\n",
            support::FIXTURE_COLLECTION,
            f.embed_url,
            support::EMBED_MODEL
        ),
    );
    let server = Server::new()
        .args(["--config", &bad_url, "--retry-attempts", "1"])
        .env("CHROMA_REPO_SEARCH_SERVER_URL", "http://127.0.0.1:2");
    let mut s = server.clone().stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(
        tool_text(&result).starts_with(
            "repository content search failed: Chroma collection lookup failed: Get \"http://127.0.0.1:2/api/v2/"
        ),
        "{result}"
    );
    assert!(s.close().await.success());
    assert_eq!(collection_reached(server.args(["--server-url", &f.chroma_url])).await, support::FIXTURE_COLLECTION);
}

#[tokio::test]
async fn eof_on_stdin_exits_0_with_nothing_on_stdout() {
    let out = Server::fixture().output().await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), "");
    // Requests and then EOF: only the answers on stdout, one per line.
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": support::initialize_params()}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"query": ""}}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let out = Server::fixture().output_with_stdin(&input).await;
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&lines[1]).unwrap(),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "query must be non-empty"}], "isError": true}})
    );
    assert!(stdout(&out).ends_with('\n'));
    assert_eq!(stderr(&out), "");
}
