//! The drop-in configuration contract, checked message by message against the reference server.

use std::collections::HashMap;
use std::io::Write as _;
use std::time::Duration;

use repo_retriever::config::*;

const REQUIRED: &[&str] = &[
    "--server-url",
    "https://chroma.example.com",
    "--collection-name",
    "repository-content",
    "--embedding-api-url",
    "https://embeddings.example.com",
    "--embedding-model",
    "embedding-model",
];

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|arg| (*arg).to_owned()).collect()
}

fn with_required(extra: &[&str]) -> Vec<String> {
    let mut all = args(REQUIRED);
    all.extend(args(extra));
    all
}

fn run(arguments: &[String], env: &[(&str, &str)]) -> Result<Invocation, ConfigError> {
    let env: HashMap<String, String> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    resolve(arguments, &|name| env.get(name).cloned())
}

fn serve(arguments: &[String], env: &[(&str, &str)]) -> Config {
    match run(arguments, env) {
        Ok(Invocation::Serve(config)) => config,
        other => panic!("expected a configuration, got {other:?}"),
    }
}

fn error(arguments: &[String], env: &[(&str, &str)]) -> String {
    match run(arguments, env) {
        Err(ConfigError::Invalid(message)) => message,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

fn yaml_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

#[test]
fn defaults() {
    let config = serve(&with_required(&[]), &[]);
    assert_eq!(config.server_url, "https://chroma.example.com");
    assert_eq!(config.collection_name, "repository-content");
    assert_eq!(config.tenant, "default_tenant");
    assert_eq!(config.database, "default_database");
    assert_eq!(config.retry_attempts, 3);
    assert_eq!(config.rerank_candidate_multiplier, 3);
    assert_eq!(config.rerank_max_candidates, 100);
    assert_eq!(config.rerank_max_document_bytes, 0);
    assert_eq!(config.rerank_max_request_bytes, 0);
    assert_eq!(config.request_timeout, Duration::from_secs(120));
    assert_eq!(config.http_addr, "");
    assert!(!config.debug);
    assert!(!config.reranking_enabled());
    assert!(config.secrets().is_empty());
    assert_eq!(config.config_file, "");
}

/// The reference server's own precedence test (`TestLoadConfigPrecedence`).
#[test]
fn flag_beats_environment_beats_yaml_beats_default() {
    let file = yaml_file(
        "version: 1\nchroma:\n  server_url: https://config.example.com\n  collection_name: config-collection\n  \
         tenant: config-tenant\n  database: config-database\nsync:\n  retry_attempts: 4\nembedding:\n  api_url: \
         https://config-embed.example.com\n  model: config-model\n",
    );
    let path = file.path().to_str().unwrap();
    let config = serve(
        &args(&["--config", path, "--collection-name", "flag-collection", "--tenant", "flag-tenant"]),
        &[
            ("CHROMA_REPO_SEARCH_SERVER_URL", "https://env.example.com"),
            ("CHROMA_REPO_SEARCH_COLLECTION_NAME", "env-collection"),
            ("CHROMA_REPO_SEARCH_DATABASE", "env-database"),
            ("MCP_CHROMADB_REPO_SEARCH_HTTP", "127.0.0.1:9000"),
        ],
    );
    assert_eq!(config.server_url, "https://env.example.com");
    assert_eq!(config.collection_name, "flag-collection");
    assert_eq!(config.tenant, "flag-tenant");
    assert_eq!(config.database, "env-database");
    assert_eq!(config.embedding_api_url, "https://config-embed.example.com");
    assert_eq!(config.embedding_model, "config-model");
    assert_eq!(config.http_addr, "127.0.0.1:9000");
    assert_eq!(config.retry_attempts, 4);
    assert_eq!(config.config_file, path);
}

#[test]
fn empty_environment_values_count_as_unset() {
    let config = serve(
        &with_required(&[]),
        &[
            ("CHROMA_REPO_SEARCH_TENANT", ""),
            ("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", ""),
            ("MCP_CHROMADB_REPO_SEARCH_DEBUG", ""),
        ],
    );
    assert_eq!(config.tenant, "default_tenant");
    assert_eq!(config.retry_attempts, 3);
}

#[test]
fn an_explicit_empty_flag_overrides_the_environment() {
    let message = error(&with_required(&["--tenant", ""]), &[("CHROMA_REPO_SEARCH_TENANT", "env-tenant")]);
    assert_eq!(message, "tenant must be non-empty");
    let message = error(&with_required(&["--tenant="]), &[]);
    assert_eq!(message, "tenant must be non-empty");
}

#[test]
fn an_empty_config_flag_falls_back_to_the_environment() {
    let file = yaml_file("version: 2\n");
    let path = file.path().to_str().unwrap();
    let message = error(&with_required(&["--config", ""]), &[("CHROMA_REPO_SEARCH_CONFIG_FILE", path)]);
    assert_eq!(message, "config version must be 1");
}

#[test]
fn flags_in_every_go_spelling() {
    let config = serve(
        &with_required(&[
            "-retry-attempts=5",
            "--debug",
            "-request-timeout",
            "1h30m",
            "--rerank-api-url=https://rerank.example.com/",
            "-rerank-model",
            "reranker",
            "--rerank-max-candidates",
            "0x40",
        ]),
        &[],
    );
    assert_eq!(config.retry_attempts, 5);
    assert!(config.debug);
    assert_eq!(config.request_timeout, Duration::from_secs(5400));
    assert_eq!(config.rerank_api_url, "https://rerank.example.com");
    assert_eq!(config.rerank_max_candidates, 64);
    assert!(config.reranking_enabled());

    let config = serve(&with_required(&["-debug=false"]), &[("MCP_CHROMADB_REPO_SEARCH_DEBUG", "true")]);
    assert!(!config.debug);
    // A boolean flag does not take the next argument, and parsing stops at the first non-flag.
    let config = serve(&with_required(&["-debug", "false", "--retry-attempts", "9"]), &[]);
    assert!(config.debug);
    assert_eq!(config.retry_attempts, 3);
    let config = serve(&with_required(&["--", "--retry-attempts", "9"]), &[]);
    assert_eq!(config.retry_attempts, 3);
}

/// clap's wording, naming the flag and the problem Go's `flag` package names; exit status 2.
#[test]
fn flag_errors_name_the_flag_and_exit_2() {
    let expect = |list: &[&str], parts: &[&str]| match run(&args(list), &[]) {
        Err(err @ ConfigError::Flag { .. }) => {
            let text = err.to_string();
            for part in parts {
                assert!(text.contains(part), "{list:?}: {part:?} not in {text}");
            }
            assert_eq!(err.exit_code(), 2);
            assert_eq!(err.stderr_output().trim_end(), text);
            assert!(text.contains("try '--help'"), "{text}");
        }
        other => panic!("expected a flag error, got {other:?}"),
    };
    expect(&["-x"], &["unexpected argument '--x'"]);
    expect(&["--bearer_token", "t"], &["unexpected argument '--bearer_token'"]);
    expect(&["--retry-attempts", "abc"], &["invalid value 'abc' for '--retry-attempts <INT>'"]);
    expect(&["--retry-attempts", "1e3"], &["invalid value '1e3' for '--retry-attempts <INT>'"]);
    expect(
        &["--rerank-max-candidates=18446744073709551616"],
        &["invalid value '18446744073709551616' for '--rerank-max-candidates <INT>'", "too large"],
    );
    expect(&["--request-timeout", "90"], &["invalid value '90' for '--request-timeout <DURATION>'"]);
    expect(&["--debug=maybe"], &["invalid value 'maybe' for '--debug[=<BOOL>]'"]);
    expect(&["--server-url"], &["a value is required for '--server-url <URL>'"]);
    expect(&["---server-url", "x"], &["unexpected argument '---server-url'"]);
}

#[test]
fn flag_errors_come_before_configuration_errors() {
    // No required setting is present, yet the flag error is what is reported.
    assert!(matches!(run(&args(&["--nope"]), &[]), Err(ConfigError::Flag { .. })));
}

#[test]
fn help_and_version() {
    for form in ["-h", "-help", "--help", "--h"] {
        assert_eq!(run(&args(&[form]), &[]), Ok(Invocation::Help), "{form}");
    }
    assert_eq!(run(&args(&["--version"]), &[]), Ok(Invocation::Version));
    assert_eq!(run(&args(&["-version=true", "--bogus-later"]), &[]).unwrap_err().exit_code(), 2);
    // --version wins over configuration errors, but a later -version=false turns it off.
    assert_eq!(run(&args(&["--version", "--retry-attempts", "0"]), &[]), Ok(Invocation::Version));
    assert_eq!(run(&args(&["--version", "--version=false"]), &[]).unwrap_err().to_string(), "server-url is required");
}

/// `--help` lists the subcommands, one line each, and then the drop-in flags.
#[test]
fn help_lists_the_subcommands_and_the_drop_in_flags() {
    let text = repo_retriever::cli::help();
    assert!(text.starts_with("Repository search for AI agents over MCP.\n"), "{text}");
    for command in ["index", "search", "serve", "eval", "plugins"] {
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("  {command} ")))
            .unwrap_or_else(|| panic!("no line for {command}:\n{text}"));
        assert!(line.len() > 12, "{line}");
    }
    assert!(text.contains("Drop-in flags (mcp-chromadb-repo-search):"), "{text}");
    assert!(text.contains("--server-url <URL>") && text.contains("full HTTP(S) Chroma server origin"), "{text}");
    assert!(text.contains("--request-timeout <DURATION>"), "{text}");
    assert!(text.contains("-flag value, -flag=value"), "{text}");
    assert!(!text.contains("rest"), "{text}");
}

#[test]
fn environment_integers_bools_and_durations() {
    for name in [
        "CHROMA_REPO_SEARCH_RETRY_ATTEMPTS",
        "CHROMA_REPO_SEARCH_RERANK_CANDIDATE_MULTIPLIER",
        "CHROMA_REPO_SEARCH_RERANK_MAX_CANDIDATES",
        "CHROMA_REPO_SEARCH_RERANK_MAX_DOCUMENT_BYTES",
        "CHROMA_REPO_SEARCH_RERANK_MAX_REQUEST_BYTES",
    ] {
        for bad in ["abc", "0x10", "1_000", "1.5", " 1", "99999999999999999999"] {
            assert_eq!(
                error(&with_required(&[]), &[(name, bad)]),
                format!("{name} must be an integer"),
                "{name}={bad}"
            );
        }
    }
    let config = serve(&with_required(&[]), &[("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", "+7")]);
    assert_eq!(config.retry_attempts, 7);

    for good in ["1", "t", "T", "TRUE", "true", "True"] {
        assert!(serve(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_DEBUG", good)]).debug);
    }
    for good in ["0", "f", "F", "FALSE", "false", "False"] {
        assert!(!serve(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_DEBUG", good)]).debug);
    }
    for bad in ["yes", "on", "2", "tRuE"] {
        assert_eq!(
            error(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_DEBUG", bad)]),
            "MCP_CHROMADB_REPO_SEARCH_DEBUG must be true or false"
        );
    }

    for (text, want) in [("90s", 90_000), ("2m", 120_000), ("1h30m", 5_400_000), ("1.5s", 1_500), ("300ms", 300)] {
        let config = serve(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", text)]);
        assert_eq!(config.request_timeout, Duration::from_millis(want), "{text}");
    }
    let config = serve(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", "1µs")]);
    assert_eq!(config.request_timeout, Duration::from_micros(1));
    // humantime also reads days (`1d`) and spaced forms (`1h 30m`), which the reference refuses.
    let config = serve(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", "1d")]);
    assert_eq!(config.request_timeout, Duration::from_secs(86_400));
    for bad in ["90", "abc", "1.5", "1x"] {
        assert_eq!(
            error(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", bad)]),
            "MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT must be a duration"
        );
    }
    for not_positive in ["0", "-1s", "0s"] {
        assert_eq!(
            error(&with_required(&[]), &[("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", not_positive)]),
            "request-timeout must be positive"
        );
    }
    assert_eq!(error(&with_required(&["--request-timeout", "-5m"]), &[]), "request-timeout must be positive");
}

#[test]
fn environment_errors_come_in_go_order() {
    let message = error(
        &args(&[]),
        &[
            ("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT", "x"),
            ("MCP_CHROMADB_REPO_SEARCH_DEBUG", "x"),
            ("CHROMA_REPO_SEARCH_RERANK_MAX_REQUEST_BYTES", "x"),
            ("CHROMA_REPO_SEARCH_RERANK_CANDIDATE_MULTIPLIER", "x"),
        ],
    );
    assert_eq!(message, "CHROMA_REPO_SEARCH_RERANK_CANDIDATE_MULTIPLIER must be an integer");
    // A bad environment value is reported even when a flag would override it.
    let message = error(&with_required(&["--retry-attempts", "2"]), &[("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", "x")]);
    assert_eq!(message, "CHROMA_REPO_SEARCH_RETRY_ATTEMPTS must be an integer");
}

#[test]
fn every_validation_message_in_order() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "server-url is required"),
        (&["--server-url", "  "], "server-url is required"),
        (
            &["--server-url", "chroma.example.com"],
            "server-url must be a full HTTP(S) origin without credentials, path, query, or fragment",
        ),
        (&["--server-url", "https://chroma.example.com"], "collection-name is required"),
        (
            &["--server-url", "https://c.example.com", "--collection-name", "ab"],
            "collection-name must be 3-512 characters and use letters, numbers, '.', '_' or '-'",
        ),
        (
            &["--server-url", "https://c.example.com", "--collection-name", "abc", "--tenant", " "],
            "tenant must be non-empty",
        ),
        (
            &["--server-url", "https://c.example.com", "--collection-name", "abc", "--database", "\t"],
            "database must be non-empty",
        ),
        (
            &["--server-url", "https://c.example.com", "--collection-name", "abc", "--retry-attempts", "0"],
            "retry-attempts must be positive",
        ),
        (&["--server-url", "https://c.example.com", "--collection-name", "abc"], "embedding-api-url is required"),
        (
            &[
                "--server-url",
                "https://c.example.com",
                "--collection-name",
                "abc",
                "--embedding-api-url",
                "https://e/v1",
            ],
            "embedding-api-url must be a full HTTP(S) origin without credentials, path, query, or fragment",
        ),
        (
            &["--server-url", "https://c.example.com", "--collection-name", "abc", "--embedding-api-url", "https://e"],
            "embedding-model is required",
        ),
    ];
    for (list, message) in cases {
        assert_eq!(error(&args(list), &[]), *message, "{list:?}");
    }
    let rerank_cases: &[(&[&str], &str)] = &[
        (&["--rerank-model", "r"], "rerank-api-url and rerank-model must be configured together"),
        (&["--rerank-api-url", "https://r"], "rerank-api-url and rerank-model must be configured together"),
        (
            &["--rerank-api-url", "ftp://r", "--rerank-model", "r"],
            "rerank-api-url must be a full HTTP(S) origin without credentials, path, query, or fragment",
        ),
        (
            &["--rerank-api-url", "https://r", "--rerank-model", "r", "--rerank-candidate-multiplier", "1"],
            "rerank-candidate-multiplier must be at least 2 when reranking is enabled",
        ),
        (
            &["--rerank-api-url", "https://r", "--rerank-model", "r", "--rerank-max-candidates", "1"],
            "rerank-max-candidates must be at least 2 when reranking is enabled",
        ),
        (
            &["--rerank-api-url", "https://r", "--rerank-model", "r", "--rerank-max-document-bytes", "-1"],
            "rerank-max-document-bytes must be zero or positive",
        ),
        (
            &["--rerank-api-url", "https://r", "--rerank-model", "r", "--rerank-max-request-bytes", "-1"],
            "rerank-max-request-bytes must be zero or positive",
        ),
        (&["--request-timeout", "0s"], "request-timeout must be positive"),
    ];
    for (list, message) in rerank_cases {
        assert_eq!(error(&with_required(list), &[]), *message, "{list:?}");
    }
    // Limits that only matter with reranking are not checked without it.
    serve(&with_required(&["--rerank-candidate-multiplier", "0", "--rerank-max-document-bytes", "-1"]), &[]);
}

#[test]
fn origin_rules() {
    let ok = [
        "http://c.example.com",
        "https://c.example.com/",
        "HTTPS://C.example.com",
        "https://c.example.com:8000",
        "http://localhost:",
        "http://127.0.0.1:8000//",
        "http://[::1]:8000",
        "http://[::ffff:1.2.3.4]",
        "https://c.example.com/?",
        "https://c.example.com?",
        "https://c.example.com#",
        "https://c.example.com/#",
        "http://bücher.example",
        "http://b%C3%BCcher.example",
        "http://a_b~c!$&'()*+,;=.example",
    ];
    for url in ok {
        assert!(is_http_origin(url.trim_end_matches('/')), "{url} should pass");
    }
    let bad = [
        "",
        "c.example.com",
        "ftp://c.example.com",
        "https:c.example.com",
        "https:/c.example.com",
        "https://",
        "https:///path",
        "https://c.example.com/api",
        "https://c.example.com/%2F",
        "https://user@c.example.com",
        "https://user:pass@c.example.com",
        "https://c.example.com?x=1",
        "https://c.example.com??",
        "https://c.example.com#frag",
        "https://c.example.com:80:80",
        "http://::1:8000",
        "https://c.example.com:https",
        "http://[::1",
        "http://[1.2.3.4]",
        "http://[::1]x",
        "http://a[::1]",
        "http://[fe80::1%25]",
        "http://c.exa mple.com",
        "http://c.example.com\\x",
        "http://c.example.com%",
        "https://c.example.com\n",
        " https://c.example.com",
        "https://c.example.com/ ",
    ];
    for url in bad {
        assert!(!is_http_origin(url), "{url:?} should fail");
    }
    // Where Go's url.Parse answers otherwise (not part of the contract): an empty host before a
    // port and an IPv6 zone are refused, `%`-escaped ASCII in a name is the name it spells.
    for url in ["http://:80", "http://[fe80::1%25en0]"] {
        assert!(!is_http_origin(url), "{url:?} should fail");
    }
    assert!(is_http_origin("http://c%41.example.com"));
}

#[test]
fn urls_lose_trailing_slashes() {
    let config = serve(
        &args(&[
            "--server-url",
            "https://chroma.example.com///",
            "--collection-name",
            "abc",
            "--embedding-api-url",
            "https://e.example.com/",
            "--embedding-model",
            "m",
            "--rerank-api-url",
            "https://r.example.com/",
            "--rerank-model",
            "r",
        ]),
        &[],
    );
    assert_eq!(config.server_url, "https://chroma.example.com");
    assert_eq!(config.embedding_api_url, "https://e.example.com");
    assert_eq!(config.rerank_api_url, "https://r.example.com");
}

#[test]
fn collection_names() {
    for name in ["abc", "a.b", "a-b_c.d", "A1", &"x".repeat(512)] {
        let expected = name.len() >= 3;
        assert_eq!(valid_collection_name(name), expected, "{name}");
    }
    for name in ["-ab", "ab-", "a b", "ab\u{e9}", "a/b", &"x".repeat(513)] {
        assert!(!valid_collection_name(name), "{name}");
    }
}

#[test]
fn yaml_file_errors() {
    let run_file = |text: &str| {
        let file = yaml_file(text);
        error(&args(&["--config", file.path().to_str().unwrap()]), &[])
    };
    assert_eq!(run_file("version: 2\n"), "config version must be 1");
    assert_eq!(run_file("chroma:\n  tenant: t\n"), "config version must be 1");
    // Syntax and type errors: serde-saphyr's wording, naming the problem, the key and the line
    // the reference names.
    assert_eq!(run_file(""), "parse config file: EOF: the file holds no YAML document");
    assert_eq!(run_file("# nothing else\n"), "parse config file: EOF: the file holds no YAML document");
    assert_eq!(
        run_file("version: 1\nchroma:\n  bearer_token: secret\n"),
        "parse config file: unknown field `bearer_token`, expected one of server_url, collection_name, tenant, \
         database at line 3, column 3"
    );
    assert_eq!(
        run_file("version: 1\nbearer_token: secret\n"),
        "parse config file: unknown field `bearer_token`, expected one of version, chroma, files, chunking, sync, \
         embedding at line 2, column 1"
    );
    assert_eq!(
        run_file("version: 1\nsync:\n  retry_attempts: many\n"),
        "parse config file: invalid i64 at line 3, column 19"
    );
    assert_eq!(
        run_file("version: 1\n  x: y\n"),
        "parse config file: mapping values are not allowed in this context at line 2, column 4"
    );
    let message = run_file("version: 1\nversion: 1\n");
    assert!(message.contains("duplicate mapping key: version") && message.contains("line 2"), "{message}");
    // What the lines around a mistake hold (an API key, say) is not quoted.
    let message = run_file("version: 1\nembedding:\n  api_key: sk-secret-1\n  bogus: x\n");
    assert!(message.contains("unknown field `bogus`") && message.contains("line 4"), "{message}");
    assert!(!message.contains("sk-secret-1"), "{message}");
    // The file is read only after flags, and its errors precede the environment's.
    let file = yaml_file("version: 3\n");
    let message =
        error(&args(&["--config", file.path().to_str().unwrap()]), &[("CHROMA_REPO_SEARCH_RETRY_ATTEMPTS", "x")]);
    assert_eq!(message, "config version must be 1");
}

#[test]
fn yaml_values_apply_only_when_set() {
    let file = yaml_file(
        "version: 1\nchroma:\n  tenant: \"\"\n  database: ~\nsync:\n  retry_attempts: 0\nembedding:\nfiles: ~\n",
    );
    let config = serve(&with_required(&["--config", file.path().to_str().unwrap()]), &[]);
    assert_eq!(config.tenant, "default_tenant");
    assert_eq!(config.database, "default_database");
    assert_eq!(config.retry_attempts, 3);
    let file = yaml_file("version: 1\nsync:\n  retry_attempts: -2\n");
    assert_eq!(
        error(&with_required(&["--config", file.path().to_str().unwrap()]), &[]),
        "retry-attempts must be positive"
    );
}

#[test]
fn unreadable_config_files() {
    assert_eq!(
        error(&args(&["--config", "/nonexistent/repo-retriever.yaml"]), &[]),
        "read config file: open /nonexistent/repo-retriever.yaml: No such file or directory (os error 2)"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    assert_eq!(
        error(&args(&["--config", path]), &[]),
        format!("read config file: read {path}: Is a directory (os error 21)")
    );
}

#[test]
fn secrets_stay_out_of_debug_output() {
    let config = serve(
        &with_required(&[
            "--bearer-token",
            "chroma-secret-1",
            "--embedding-api-key",
            "embed-secret-2",
            "--rerank-api-url",
            "https://r",
            "--rerank-model",
            "m",
            "--rerank-api-key",
            "rerank-secret-3",
        ]),
        &[],
    );
    let shown = format!("{config:?}");
    for secret in ["chroma-secret-1", "embed-secret-2", "rerank-secret-3"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    assert_eq!(shown.matches("<redacted>").count(), 3);
    assert_eq!(config.secrets(), ["chroma-secret-1", "embed-secret-2", "rerank-secret-3"]);
    let plain = format!("{:?}", serve(&with_required(&[]), &[]));
    assert!(!plain.contains("<redacted>"));
}
