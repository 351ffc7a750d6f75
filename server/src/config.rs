//! Start-up configuration, read exactly as `mcp-chromadb-repo-search` reads it.
//!
//! An operator swaps the reference server for this one without touching the command line, the
//! environment or the YAML file, so everything here reproduces the Go implementation
//! (`internal/content/config.go` and `main.go`) rule by rule, including every message:
//!
//! - Flags follow Go's `flag` package ([`crate::goflag`]); a flag counts only when it was given,
//!   so `--tenant ""` overrides the environment while an absent flag does not.
//! - An environment variable set to the empty string counts as unset, as Go's
//!   `if value := env[name]; value != ""` has it.
//! - The YAML file is read only when `--config` or `CHROMA_REPO_SEARCH_CONFIG_FILE` names it. It is
//!   the reference indexer's file ([`crate::index_config`]): unknown keys, duplicate keys and wrong
//!   types are refused, with serde-saphyr's message naming the line and column. The schema has no
//!   bearer-token key, so a token in YAML fails as an unknown key; that is the reference server's
//!   only "no token in YAML" rule.
//! - Precedence is applied in Go's order (defaults, YAML, environment, flags), and so are the
//!   errors: flag syntax first, then the file, then each environment variable, then validation.

use std::fmt;
use std::io::Read as _;
use std::time::Duration;

use crate::goflag::{self, FlagDef, FlagError, FlagKind, ParsedFlags};

/// The program name Go's usage text falls back to when `argv[0]` is missing.
pub const PROGRAM: &str = "repo-retriever";

/// The validated configuration of a server run.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// Chroma origin, without trailing `/`.
    pub server_url: String,
    pub collection_name: String,
    /// Chroma bearer token; empty means none (HTTP mode then forwards the client's header).
    pub bearer_token: String,
    pub tenant: String,
    pub database: String,
    /// The YAML file that was read (from `--config` or `CHROMA_REPO_SEARCH_CONFIG_FILE`), or empty.
    pub config_file: String,
    /// Attempts per backend call, at least 1.
    pub retry_attempts: i64,
    /// Embedding API origin, without trailing `/`.
    pub embedding_api_url: String,
    pub embedding_model: String,
    pub embedding_api_key: String,
    /// Reranking API origin, without trailing `/`; empty when reranking is off.
    pub rerank_api_url: String,
    pub rerank_model: String,
    pub rerank_api_key: String,
    /// Candidates retrieved per requested result when reranking (at least 2 when enabled).
    pub rerank_candidate_multiplier: i64,
    /// Ceiling on candidates sent to the reranker (at least 2 when enabled).
    pub rerank_max_candidates: i64,
    /// Byte cap for one reranking document including its header; 0 = unlimited.
    pub rerank_max_document_bytes: i64,
    /// Byte cap for all reranking documents of one request; 0 = unlimited.
    pub rerank_max_request_bytes: i64,
    /// Streamable HTTP listen address or bare port; empty = stdio.
    pub http_addr: String,
    pub debug: bool,
    /// Timeout of each backend attempt; always positive.
    pub request_timeout: Duration,
}

impl Config {
    /// Reranking runs when both its URL and model are configured (validation rejects one alone).
    pub fn reranking_enabled(&self) -> bool {
        !self.rerank_api_url.is_empty() && !self.rerank_model.is_empty()
    }

    /// The configured secrets, for redacting backend error bodies and logs.
    pub fn secrets(&self) -> Vec<String> {
        [&self.bearer_token, &self.embedding_api_key, &self.rerank_api_key]
            .into_iter()
            .filter(|secret| !secret.is_empty())
            .cloned()
            .collect()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn secret(value: &str) -> &str {
            if value.is_empty() { "" } else { "<redacted>" }
        }
        f.debug_struct("Config")
            .field("server_url", &self.server_url)
            .field("collection_name", &self.collection_name)
            .field("bearer_token", &secret(&self.bearer_token))
            .field("tenant", &self.tenant)
            .field("database", &self.database)
            .field("config_file", &self.config_file)
            .field("retry_attempts", &self.retry_attempts)
            .field("embedding_api_url", &self.embedding_api_url)
            .field("embedding_model", &self.embedding_model)
            .field("embedding_api_key", &secret(&self.embedding_api_key))
            .field("rerank_api_url", &self.rerank_api_url)
            .field("rerank_model", &self.rerank_model)
            .field("rerank_api_key", &secret(&self.rerank_api_key))
            .field("rerank_candidate_multiplier", &self.rerank_candidate_multiplier)
            .field("rerank_max_candidates", &self.rerank_max_candidates)
            .field("rerank_max_document_bytes", &self.rerank_max_document_bytes)
            .field("rerank_max_request_bytes", &self.rerank_max_request_bytes)
            .field("http_addr", &self.http_addr)
            .field("debug", &self.debug)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

/// What the command line asks for.
// Built once at start-up and matched at once: boxing the configuration would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Run the server.
    Serve(Config),
    /// `--version`: print the version line to stdout and exit 0. Checked before any configuration
    /// is read, so it succeeds even when the rest would not.
    Version,
    /// `-h`/`-help`: the usage has been written to stderr by [`load`]; exit 0.
    Help,
}

/// A start-up failure. `Display` is the text Go's error carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// Go's `flag` package rejected the command line. Go prints `message`, a newline and the usage
    /// to stderr and exits with status 2 — see [`ConfigError::stderr_output`]. Nothing has been
    /// printed yet.
    Flag { message: String, usage: String },
    /// Reading, decoding or validating the configuration failed. `main` prints
    /// `Error: <message>` to stderr and exits with status 1.
    Invalid(String),
}

impl ConfigError {
    /// The process exit status Go uses for this failure: 2 for flag errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ConfigError::Flag { .. } => 2,
            ConfigError::Invalid(_) => 1,
        }
    }

    /// Everything the reference server writes to stderr for this failure, byte for byte.
    pub fn stderr_output(&self) -> String {
        match self {
            ConfigError::Flag { message, usage } => format!("{message}\n{usage}"),
            ConfigError::Invalid(message) => format!("Error: {message}\n"),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        ConfigError::Invalid(message.into())
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Flag { message, .. } | ConfigError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The flags of the reference server, with its descriptions (they make up the usage text).
pub const FLAGS: &[FlagDef] = &[
    FlagDef { name: "server-url", kind: FlagKind::String, usage: "full HTTP(S) Chroma server origin" },
    FlagDef {
        name: "collection-name",
        kind: FlagKind::String,
        usage: "Chroma collection containing indexed repository content",
    },
    FlagDef { name: "bearer-token", kind: FlagKind::String, usage: "optional Chroma bearer token" },
    FlagDef { name: "tenant", kind: FlagKind::String, usage: "Chroma tenant" },
    FlagDef { name: "database", kind: FlagKind::String, usage: "Chroma database" },
    FlagDef {
        name: "config",
        kind: FlagKind::String,
        usage: "path to a chromadb-repo-indexer-compatible YAML configuration",
    },
    FlagDef {
        name: "retry-attempts",
        kind: FlagKind::Int,
        usage: "attempts for transient Chroma and embedding failures",
    },
    FlagDef { name: "embedding-api-url", kind: FlagKind::String, usage: "OpenAI-compatible embeddings API origin" },
    FlagDef { name: "embedding-model", kind: FlagKind::String, usage: "embeddings model name" },
    FlagDef { name: "embedding-api-key", kind: FlagKind::String, usage: "optional embeddings API key" },
    FlagDef {
        name: "rerank-api-url",
        kind: FlagKind::String,
        usage: "OpenAI-compatible reranking API origin; enables reranking with --rerank-model",
    },
    FlagDef {
        name: "rerank-model",
        kind: FlagKind::String,
        usage: "reranking model name; enables reranking with --rerank-api-url",
    },
    FlagDef { name: "rerank-api-key", kind: FlagKind::String, usage: "optional reranking API key" },
    FlagDef {
        name: "rerank-candidate-multiplier",
        kind: FlagKind::Int,
        usage: "number of Chroma candidates per requested result when reranking (minimum 2)",
    },
    FlagDef { name: "rerank-max-candidates", kind: FlagKind::Int, usage: "maximum candidates sent to the reranker" },
    FlagDef {
        name: "rerank-max-document-bytes",
        kind: FlagKind::Int,
        usage: "maximum UTF-8 bytes sent for one reranking document, including its source header",
    },
    FlagDef {
        name: "rerank-max-request-bytes",
        kind: FlagKind::Int,
        usage: "maximum UTF-8 bytes in the reranking request documents",
    },
    FlagDef {
        name: "http",
        kind: FlagKind::String,
        usage: "run Streamable HTTP on an address or port (defaults to stdio)",
    },
    FlagDef { name: "debug", kind: FlagKind::Bool, usage: "enable debug logging to stderr" },
    FlagDef { name: "request-timeout", kind: FlagKind::Duration, usage: "timeout for each backend request" },
    FlagDef { name: "version", kind: FlagKind::Bool, usage: "print version information" },
];

/// Go's usage text for `program` (its `os.Args[0]`), ending with a newline.
pub fn usage(program: &str) -> String {
    goflag::usage(program, FLAGS)
}

/// The name the usage text shows: `argv[0]` as given, like Go's `os.Args[0]`.
pub fn program_name() -> String {
    std::env::args_os().next().map(|arg| arg.to_string_lossy().into_owned()).unwrap_or_else(|| PROGRAM.to_owned())
}

/// Reads the configuration from the command line (`args` without `argv[0]`) and the environment
/// as the reference server does. For `-h`/`-help` it writes the usage to stderr and returns
/// [`Invocation::Help`]; it writes nothing else.
pub fn load(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Invocation, ConfigError> {
    let program = program_name();
    let invocation = resolve(&program, args, env)?;
    if invocation == Invocation::Help {
        eprint!("{}", usage(&program));
    }
    Ok(invocation)
}

/// [`load`] without touching stderr, with the program name given.
pub fn resolve(
    program: &str,
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Invocation, ConfigError> {
    let flags = match goflag::parse(FLAGS, args) {
        Ok(flags) => flags,
        Err(FlagError::Help) => return Ok(Invocation::Help),
        Err(FlagError::Invalid(message)) => return Err(ConfigError::Flag { message, usage: usage(program) }),
    };
    if flags.bool("version") == Some(true) {
        return Ok(Invocation::Version);
    }
    load_config(&flags, env).map(Invocation::Serve)
}

/// The `std::env` lookup to pass to [`load`]. A value that is not valid UTF-8 is passed on with
/// its invalid bytes replaced, where Go would keep the raw bytes.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

const ENV_CONFIG_FILE: &str = "CHROMA_REPO_SEARCH_CONFIG_FILE";

fn load_config(flags: &ParsedFlags, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    // Go reads a missing variable and an empty one alike.
    let env = |name: &str| env(name).filter(|value| !value.is_empty());
    let mut cfg = Config {
        server_url: String::new(),
        collection_name: String::new(),
        bearer_token: String::new(),
        tenant: "default_tenant".to_owned(),
        database: "default_database".to_owned(),
        config_file: String::new(),
        retry_attempts: 3,
        embedding_api_url: String::new(),
        embedding_model: String::new(),
        embedding_api_key: String::new(),
        rerank_api_url: String::new(),
        rerank_model: String::new(),
        rerank_api_key: String::new(),
        rerank_candidate_multiplier: 3,
        rerank_max_candidates: 100,
        rerank_max_document_bytes: 0,
        rerank_max_request_bytes: 0,
        http_addr: String::new(),
        debug: false,
        request_timeout: Duration::ZERO,
    };
    let mut timeout_nanos: i64 = 120_000_000_000;

    // `--config ""` is the same as no flag: the variable is consulted.
    let config_path = match flags.string("config") {
        Some(path) if !path.is_empty() => Some(path.to_owned()),
        _ => env(ENV_CONFIG_FILE),
    };
    if let Some(path) = config_path {
        let text = read_file(&path).map_err(|err| ConfigError::invalid(format!("read config file: {err}")))?;
        let file = crate::index_config::parse(&text)
            .map_err(|err| ConfigError::invalid(format!("parse config file: {err}")))?;
        if file.version != Some(1) {
            return Err(ConfigError::invalid("config version must be 1"));
        }
        let (chroma, embedding) = (file.chroma, file.embedding);
        for (target, value) in [
            (&mut cfg.server_url, chroma.server_url),
            (&mut cfg.collection_name, chroma.collection_name),
            (&mut cfg.tenant, chroma.tenant),
            (&mut cfg.database, chroma.database),
            (&mut cfg.embedding_api_url, embedding.api_url),
            (&mut cfg.embedding_model, embedding.model),
            (&mut cfg.embedding_api_key, embedding.api_key),
        ] {
            // An empty value leaves the default, as in the reference.
            if let Some(value) = value.filter(|value| !value.is_empty()) {
                *target = value;
            }
        }
        if let Some(attempts) = file.sync.retry_attempts.filter(|attempts| *attempts != 0) {
            cfg.retry_attempts = attempts;
        }
        cfg.config_file = path;
    }

    for (target, name) in [
        (&mut cfg.server_url, "CHROMA_REPO_SEARCH_SERVER_URL"),
        (&mut cfg.collection_name, "CHROMA_REPO_SEARCH_COLLECTION_NAME"),
        (&mut cfg.bearer_token, "CHROMA_REPO_SEARCH_BEARER_TOKEN"),
        (&mut cfg.tenant, "CHROMA_REPO_SEARCH_TENANT"),
        (&mut cfg.database, "CHROMA_REPO_SEARCH_DATABASE"),
        (&mut cfg.embedding_api_url, "CHROMA_REPO_SEARCH_EMBEDDING_API_URL"),
        (&mut cfg.embedding_model, "CHROMA_REPO_SEARCH_EMBEDDING_MODEL"),
        (&mut cfg.embedding_api_key, "CHROMA_REPO_SEARCH_EMBEDDING_API_KEY"),
        (&mut cfg.rerank_api_url, "CHROMA_REPO_SEARCH_RERANK_API_URL"),
        (&mut cfg.rerank_model, "CHROMA_REPO_SEARCH_RERANK_MODEL"),
        (&mut cfg.rerank_api_key, "CHROMA_REPO_SEARCH_RERANK_API_KEY"),
        (&mut cfg.http_addr, "MCP_CHROMADB_REPO_SEARCH_HTTP"),
    ] {
        if let Some(value) = env(name) {
            *target = value;
        }
    }
    for (target, name) in [
        (&mut cfg.retry_attempts, "CHROMA_REPO_SEARCH_RETRY_ATTEMPTS"),
        (&mut cfg.rerank_candidate_multiplier, "CHROMA_REPO_SEARCH_RERANK_CANDIDATE_MULTIPLIER"),
        (&mut cfg.rerank_max_candidates, "CHROMA_REPO_SEARCH_RERANK_MAX_CANDIDATES"),
        (&mut cfg.rerank_max_document_bytes, "CHROMA_REPO_SEARCH_RERANK_MAX_DOCUMENT_BYTES"),
        (&mut cfg.rerank_max_request_bytes, "CHROMA_REPO_SEARCH_RERANK_MAX_REQUEST_BYTES"),
    ] {
        if let Some(value) = env(name) {
            *target = goflag::atoi(&value).map_err(|_| ConfigError::invalid(format!("{name} must be an integer")))?;
        }
    }
    if let Some(value) = env("MCP_CHROMADB_REPO_SEARCH_DEBUG") {
        cfg.debug = goflag::parse_bool(&value)
            .ok_or_else(|| ConfigError::invalid("MCP_CHROMADB_REPO_SEARCH_DEBUG must be true or false"))?;
    }
    if let Some(value) = env("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT") {
        timeout_nanos = goflag::parse_duration(&value)
            .ok_or_else(|| ConfigError::invalid("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT must be a duration"))?;
    }

    for (target, name) in [
        (&mut cfg.server_url, "server-url"),
        (&mut cfg.collection_name, "collection-name"),
        (&mut cfg.bearer_token, "bearer-token"),
        (&mut cfg.tenant, "tenant"),
        (&mut cfg.database, "database"),
        (&mut cfg.embedding_api_url, "embedding-api-url"),
        (&mut cfg.embedding_model, "embedding-model"),
        (&mut cfg.embedding_api_key, "embedding-api-key"),
        (&mut cfg.rerank_api_url, "rerank-api-url"),
        (&mut cfg.rerank_model, "rerank-model"),
        (&mut cfg.rerank_api_key, "rerank-api-key"),
        (&mut cfg.http_addr, "http"),
    ] {
        if let Some(value) = flags.string(name) {
            value.clone_into(target);
        }
    }
    for (target, name) in [
        (&mut cfg.retry_attempts, "retry-attempts"),
        (&mut cfg.rerank_candidate_multiplier, "rerank-candidate-multiplier"),
        (&mut cfg.rerank_max_candidates, "rerank-max-candidates"),
        (&mut cfg.rerank_max_document_bytes, "rerank-max-document-bytes"),
        (&mut cfg.rerank_max_request_bytes, "rerank-max-request-bytes"),
    ] {
        if let Some(value) = flags.int(name) {
            *target = value;
        }
    }
    if let Some(value) = flags.bool("debug") {
        cfg.debug = value;
    }
    if let Some(value) = flags.duration_nanos("request-timeout") {
        timeout_nanos = value;
    }

    for url in [&mut cfg.server_url, &mut cfg.embedding_api_url, &mut cfg.rerank_api_url] {
        let trimmed = url.trim_end_matches('/').len();
        url.truncate(trimmed);
    }
    validate(&cfg, timeout_nanos)?;
    cfg.request_timeout = Duration::from_nanos(timeout_nanos.unsigned_abs());
    Ok(cfg)
}

/// The file's text; the error names the step (`open` or `read`) and the path.
fn read_file(path: &str) -> Result<String, String> {
    let mut file = std::fs::File::open(path).map_err(|err| format!("open {path}: {err}"))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|err| format!("read {path}: {err}"))?;
    Ok(text)
}

fn validate(cfg: &Config, timeout_nanos: i64) -> Result<(), ConfigError> {
    let fail = |message: &str| Err(ConfigError::invalid(message));
    if cfg.server_url.trim().is_empty() {
        return fail("server-url is required");
    }
    check_origin("server-url", &cfg.server_url)?;
    if cfg.collection_name.trim().is_empty() {
        return fail("collection-name is required");
    }
    if !valid_collection_name(&cfg.collection_name) {
        return fail("collection-name must be 3-512 characters and use letters, numbers, '.', '_' or '-'");
    }
    if cfg.tenant.trim().is_empty() {
        return fail("tenant must be non-empty");
    }
    if cfg.database.trim().is_empty() {
        return fail("database must be non-empty");
    }
    if cfg.retry_attempts < 1 {
        return fail("retry-attempts must be positive");
    }
    if cfg.embedding_api_url.trim().is_empty() {
        return fail("embedding-api-url is required");
    }
    check_origin("embedding-api-url", &cfg.embedding_api_url)?;
    if cfg.embedding_model.trim().is_empty() {
        return fail("embedding-model is required");
    }
    if cfg.rerank_api_url.is_empty() != cfg.rerank_model.is_empty() {
        return fail("rerank-api-url and rerank-model must be configured together");
    }
    if !cfg.rerank_api_url.is_empty() {
        check_origin("rerank-api-url", &cfg.rerank_api_url)?;
        if cfg.rerank_candidate_multiplier < 2 {
            return fail("rerank-candidate-multiplier must be at least 2 when reranking is enabled");
        }
        if cfg.rerank_max_candidates < 2 {
            return fail("rerank-max-candidates must be at least 2 when reranking is enabled");
        }
        if cfg.rerank_max_document_bytes < 0 {
            return fail("rerank-max-document-bytes must be zero or positive");
        }
        if cfg.rerank_max_request_bytes < 0 {
            return fail("rerank-max-request-bytes must be zero or positive");
        }
    }
    if timeout_nanos <= 0 {
        return fail("request-timeout must be positive");
    }
    Ok(())
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$`
fn valid_collection_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=512).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

fn check_origin(name: &str, value: &str) -> Result<(), ConfigError> {
    if is_http_origin(value) {
        Ok(())
    } else {
        Err(ConfigError::invalid(format!(
            "{name} must be a full HTTP(S) origin without credentials, path, query, or fragment"
        )))
    }
}

/// Whether Go 1.26's `url.Parse(value)` succeeds with scheme `http` or `https` (any case), a
/// non-empty host, a path of `""` or `/`, no user info, an empty query and an empty fragment.
///
/// Spelled out for exactly that question: a trailing lone `?` or `#` leaves the query or
/// fragment empty and passes; a host may be a bracketed IPv6 literal (zones allowed, IPv4 not)
/// or a name of the bytes Go allows, `%`-escapes only for non-ASCII bytes or `%25`, with at most
/// one `:` followed by digits (possibly none: `http://host:` and even `http://:80` pass, as in Go).
fn is_http_origin(value: &str) -> bool {
    let (before_fragment, fragment) = value.split_once('#').unwrap_or((value, ""));
    // A non-empty fragment either fails to unescape or unescapes to something non-empty.
    if !fragment.is_empty() {
        return false;
    }
    if before_fragment.bytes().any(|byte| byte < 0x20 || byte == 0x7f) {
        return false;
    }
    let Some((scheme, rest)) = before_fragment.split_once(':') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    // The query is what follows the first '?', unless the only '?' ends the string.
    let rest = match rest.matches('?').count() {
        0 => rest,
        1 if rest.ends_with('?') => &rest[..rest.len() - 1],
        _ => return false,
    };
    let Some(after_slashes) = rest.strip_prefix("//") else {
        return false;
    };
    let (authority, path) = match after_slashes.find('/') {
        Some(at) => after_slashes.split_at(at),
        None => (after_slashes, ""),
    };
    if !(path.is_empty() || path == "/") || authority.contains('@') {
        return false;
    }
    valid_host(authority.as_bytes())
}

/// Go's `parseHost` for an http(s) URL succeeding with a non-empty host.
fn valid_host(host: &[u8]) -> bool {
    match host.iter().rposition(|byte| *byte == b'[') {
        Some(0) => {
            let Some(close) = host.iter().rposition(|byte| *byte == b']') else {
                return false;
            };
            if !valid_optional_port(&host[close + 1..]) {
                return false;
            }
            let literal = &host[1..close];
            let unescaped = match find(literal, b"%25") {
                Some(zone) => match (unescape_host(&literal[..zone], false), unescape_host(&literal[zone..], true)) {
                    (Some(mut address), Some(zone)) => {
                        address.extend_from_slice(&zone);
                        address
                    }
                    _ => return false,
                },
                None => match unescape_host(literal, false) {
                    Some(address) => address,
                    None => return false,
                },
            };
            std::str::from_utf8(&unescaped).is_ok_and(is_ipv6_literal)
        }
        Some(_) => false,
        None => {
            // Strict colons: everything from the first ':' must be a port.
            if let Some(colon) = host.iter().position(|byte| *byte == b':')
                && !valid_optional_port(&host[colon..])
            {
                return false;
            }
            !host.is_empty() && unescape_host(host, false).is_some()
        }
    }
}

/// `""` or `:` followed by ASCII digits.
fn valid_optional_port(port: &[u8]) -> bool {
    match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Go's `unescape` in `encodeHost` (or, for an IPv6 zone, `encodeZone`) mode.
fn unescape_host(text: &[u8], zone: bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut index = 0;
    while index < text.len() {
        let byte = text[index];
        if byte == b'%' {
            if index + 2 >= text.len() {
                return None;
            }
            let (high, low) = (hex_value(text[index + 1])?, hex_value(text[index + 2])?);
            let escaped = &text[index..index + 3];
            let value = high << 4 | low;
            if zone {
                if escaped != b"%25" && value != b' ' && host_byte_needs_escape(value) {
                    return None;
                }
            } else if high < 8 && escaped != b"%25" {
                return None;
            }
            out.push(value);
            index += 3;
        } else {
            if byte < 0x80 && host_byte_needs_escape(byte) {
                return None;
            }
            out.push(byte);
            index += 1;
        }
    }
    Some(out)
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte).to_digit(16).map(|digit| digit as u8)
}

/// Go's `shouldEscape(c, encodeHost)`: what may not appear literally in a host.
fn host_byte_needs_escape(byte: u8) -> bool {
    !(byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'-' | b'_'
                | b'.'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        ))
}

/// Go's `netip.ParseAddr` yielding an IPv6 address (with an optional non-empty zone).
fn is_ipv6_literal(text: &str) -> bool {
    // ParseAddr picks the family from the first '.', ':' or '%'; only ':' leads to IPv6.
    if text.bytes().find(|byte| matches!(byte, b'.' | b':' | b'%')) != Some(b':') {
        return false;
    }
    let address = match text.split_once('%') {
        Some((_, "")) => return false,
        Some((address, _zone)) => address,
        None => text,
    };
    address.parse::<std::net::Ipv6Addr>().is_ok()
}

#[cfg(test)]
mod tests;
