//! Start-up configuration, read as `mcp-chromadb-repo-search` reads it.
//!
//! An operator swaps the reference server for this one without touching the command line, the
//! environment or the YAML file: the same names, precedence, defaults and validation messages as
//! the Go implementation (`internal/content/config.go` and `main.go`). Syntax errors of flags and
//! YAML are the libraries' wording, naming the same flag, key and line.
//!
//! - Flags are parsed by clap ([`flags`]), which also takes the Go spellings scripts use; a flag
//!   counts only when it was given, so `--tenant ""` overrides the environment while an absent
//!   flag does not.
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

mod flags;

pub use flags::{DropInFlags, help};

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
    /// `-h`/`-help`/`--help`: the caller writes the help to stdout; exit 0.
    Help,
}

/// A start-up failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// clap refused the command line; `message` is its text (the problem, the flag, a usage
    /// line). Printed to stderr as it is, with exit status 2 as the reference. Nothing has been
    /// printed yet.
    Flag { message: String },
    /// Reading, decoding or validating the configuration failed. `main` prints
    /// `Error: <message>` to stderr and exits with status 1.
    Invalid(String),
}

impl ConfigError {
    /// The process exit status the reference uses for this failure: 2 for flag errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ConfigError::Flag { .. } => 2,
            ConfigError::Invalid(_) => 1,
        }
    }

    /// Everything to write to stderr for this failure.
    pub fn stderr_output(&self) -> String {
        match self {
            ConfigError::Flag { message } => message.clone(),
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
            ConfigError::Flag { message } => f.write_str(message.trim_end()),
            ConfigError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads the configuration from the command line (`args` without `argv[0]`) and the environment
/// as the reference server does; it writes nothing (for `-h`/`-help` the caller prints the help,
/// which lists the subcommands the CLI defines).
pub fn resolve(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Invocation, ConfigError> {
    match flags::parse(args) {
        Ok(flags::Parsed::Help) => Ok(Invocation::Help),
        Ok(flags::Parsed::Flags(flags)) if flags.version == Some(true) => Ok(Invocation::Version),
        Ok(flags::Parsed::Flags(flags)) => from_flags(&flags, env).map(Invocation::Serve),
        Err(message) => Err(ConfigError::Flag { message }),
    }
}

/// The `std::env` lookup to pass to [`resolve`]. A value that is not valid UTF-8 is passed on with
/// its invalid bytes replaced, where Go would keep the raw bytes.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

const ENV_CONFIG_FILE: &str = "CHROMA_REPO_SEARCH_CONFIG_FILE";

/// The configuration that `flags`, the environment and the YAML file they name describe, in the
/// reference's order: defaults, YAML, environment, flags; then validation.
pub fn from_flags(flags: &DropInFlags, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
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
    let config_path = match &flags.config {
        Some(path) if !path.is_empty() => Some(path.clone()),
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
            *target = value.parse().map_err(|_| ConfigError::invalid(format!("{name} must be an integer")))?;
        }
    }
    if let Some(value) = env("MCP_CHROMADB_REPO_SEARCH_DEBUG") {
        cfg.debug = flags::parse_bool(&value)
            .map_err(|_| ConfigError::invalid("MCP_CHROMADB_REPO_SEARCH_DEBUG must be true or false"))?;
    }
    if let Some(value) = env("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT") {
        timeout_nanos = flags::parse_duration_nanos(&value)
            .map_err(|_| ConfigError::invalid("MCP_CHROMADB_REPO_SEARCH_REQUEST_TIMEOUT must be a duration"))?;
    }

    for (target, flag) in [
        (&mut cfg.server_url, &flags.server_url),
        (&mut cfg.collection_name, &flags.collection_name),
        (&mut cfg.bearer_token, &flags.bearer_token),
        (&mut cfg.tenant, &flags.tenant),
        (&mut cfg.database, &flags.database),
        (&mut cfg.embedding_api_url, &flags.embedding_api_url),
        (&mut cfg.embedding_model, &flags.embedding_model),
        (&mut cfg.embedding_api_key, &flags.embedding_api_key),
        (&mut cfg.rerank_api_url, &flags.rerank_api_url),
        (&mut cfg.rerank_model, &flags.rerank_model),
        (&mut cfg.rerank_api_key, &flags.rerank_api_key),
        (&mut cfg.http_addr, &flags.http),
    ] {
        if let Some(value) = flag {
            value.clone_into(target);
        }
    }
    for (target, flag) in [
        (&mut cfg.retry_attempts, flags.retry_attempts),
        (&mut cfg.rerank_candidate_multiplier, flags.rerank_candidate_multiplier),
        (&mut cfg.rerank_max_candidates, flags.rerank_max_candidates),
        (&mut cfg.rerank_max_document_bytes, flags.rerank_max_document_bytes),
        (&mut cfg.rerank_max_request_bytes, flags.rerank_max_request_bytes),
    ] {
        if let Some(value) = flag {
            *target = value;
        }
    }
    if let Some(value) = flags.debug {
        cfg.debug = value;
    }
    if let Some(value) = flags.request_timeout {
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
pub fn valid_collection_name(name: &str) -> bool {
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

/// Whether `value` is written as an http(s) origin: `scheme://host[:port]`, a path of `/` at
/// most, no credentials, and an empty query and fragment (a lone trailing `?` or `#`).
///
/// The `url` crate (the WHATWG URL parser `reqwest` uses too) parses the host, port and path.
/// What that parser would repair silently is refused first, because such a value is not an
/// origin as written: spaces and control characters (it strips them), a missing or empty
/// authority after `scheme://` (it accepts `https:host` and `https:///host`), and any `@`.
/// Where Go's `url.Parse` answered otherwise for odd hosts (an empty host before a port, an
/// IPv6 zone, `%`-escaped ASCII in a name), the library's answer stands.
pub fn is_http_origin(value: &str) -> bool {
    if value.bytes().any(|byte| byte.is_ascii_whitespace() || byte.is_ascii_control()) {
        return false;
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return false;
    }
    url::Url::parse(value).is_ok_and(|url| {
        url.has_host()
            && url.path() == "/"
            && url.query().is_none_or(str::is_empty)
            && url.fragment().is_none_or(str::is_empty)
    })
}
