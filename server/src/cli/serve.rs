//! `repo-retriever serve`: MCP over stdio or Streamable HTTP, over the
//! embedded store, a stores file or a Chroma collection, with the
//! navigation tools.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use rr_engine::local::IndexRequest;
use rr_engine::retrieval::{EngineSettings, RetrievalSettings};
use rr_nav::{NavConfig, NavService};

use super::args::{ChromaArgs, RerankArgs, RetrievalArgs, StoreArg};
use super::search::SearchFacets;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("listener").args(["http", "metrics"]).multiple(false)))]
pub struct ServeCmd {
    #[command(flatten)]
    pub store: StoreArg,
    /// Serve Streamable HTTP on this address or port instead of stdio. A bare port listens on
    /// 127.0.0.1 only; any other address (e.g. 0.0.0.0:8080) needs tokens or
    /// --allow-unauthenticated.
    #[arg(long, value_name = "ADDR|PORT")]
    pub http: Option<String>,
    /// Bearer tokens of --http, one `TOKEN ROLE` per line (ROLE: admin or read-only, read-only when
    /// absent; `#` starts a comment). Tokens in $REPO_RETRIEVER_TOKENS (same format, entries may be
    /// comma-separated) are accepted too. Only admin tokens may call add_repository. With --metrics,
    /// a scrape of /metrics needs one (any role).
    #[arg(long, value_name = "PATH", env = "REPO_RETRIEVER_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve --http (or --metrics) on a non-loopback address without tokens: anyone who reaches it
    /// may read the index and add repositories (or read the metrics).
    #[arg(long, requires = "listener")]
    pub allow_unauthenticated: bool,
    /// A browser origin allowed to call --http (scheme://host[:port]; repeatable; `*`: any). A
    /// request whose Origin header is neither loopback nor listed is refused with 403.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub allow_origins: Vec<String>,
    /// Serve /healthz, /readyz and Prometheus /metrics on this address or port (a bare port:
    /// 127.0.0.1) beside a stdio server; with --http they are on the HTTP listener. As for --http,
    /// another address than loopback needs tokens or --allow-unauthenticated.
    #[arg(long, value_name = "ADDR|PORT", conflicts_with = "http")]
    pub metrics: Option<String>,
    /// Search the named stores of this TOML/YAML file as one, instead of the embedded store.
    #[arg(long, conflicts_with = "store")]
    pub stores: Option<PathBuf>,
    /// Tools to expose: `search` alone (as the drop-in), or `all` (search plus the navigation tools and resources).
    #[arg(long, value_parser = ["search", "all"], default_value = "all")]
    pub tools: String,
    /// Tool calls per minute per client address over HTTP (0: unlimited).
    #[arg(long, default_value_t = rr_mcp::ratelimit::DEFAULT_PER_MINUTE)]
    pub rate_limit: u32,
    /// Largest `search` query in bytes (default 4 MiB, the HTTP body cap).
    #[arg(long, env = crate::limits::ENV_MAX_QUERY_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_query_bytes: Option<u64>,
    /// How long a `search` may take in all, every backend's time-outs and attempts included; past it
    /// the call answers that the search did not finish (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub search_timeout: std::time::Duration,
    /// Let add_repository fetch from loopback addresses (tests only; also REPO_RETRIEVER_ALLOW_LOOPBACK_GIT=1).
    #[arg(long)]
    pub allow_loopback_git: bool,
    /// Follow this checkout while serving: index it into the store (only what changed since the last
    /// run is chunked), then again after every burst of file changes (file-system notifications),
    /// each update in one transaction. The repository's name and branch are read as `index` reads them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["stores", "chroma_url"])]
    pub watch: Option<PathBuf>,
    /// How long the checkout must be quiet before a change is indexed, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 300, requires = "watch")]
    pub watch_debounce_ms: u64,
    /// Serve a Chroma collection (search, and with --tools all the navigation tools over its chunks).
    #[command(flatten)]
    pub chroma: ChromaArgs,
    /// With --chroma-url: the lexical index kept beside the collection (`index --chroma-url …
    /// --lexical-index DIR`). The collection is then searched as the embedded store is (hybrid
    /// retrieval, the head read again, the code ranking), queries embedded by the index's embedder
    /// (no --embedding-api-url needed for a built-in one), and the navigation tools read the index.
    /// A folder without an index gets one built from the collection's own records (paged reads): for a
    /// collection `chromadb-repo-indexer` or another indexer filled, whose vectors come from the
    /// configured embedding endpoint.
    #[arg(long, value_name = "DIR", requires = "chroma_url")]
    pub lexical_index: Option<PathBuf>,
    /// How often the lexical index is brought level with the collection while serving (records the
    /// collection gained are copied, those it lost removed); `0s`: only at start.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = humantime::parse_duration, requires = "lexical_index")]
    pub lexical_refresh: std::time::Duration,
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
    #[command(flatten)]
    pub rerank: RerankArgs,
}

/// Why `serve --rerank` is refused with --stores or --chroma-url: those keep their own reranking.
pub const REMOTE_RERANK: &str = "--rerank reranks the embedded store: a --stores file sets `reranker` and \
     `rerank_min_score` itself, and --chroma-url reranks with the CHROMA_REPO_SEARCH_RERANK_* variables";

/// Why `serve --mode` is refused with --stores or --chroma-url.
pub const REMOTE_MODE: &str = "--mode and --hybrid-* set the embedded store's retrieval: a --stores file sets \
     `retrieval` per store, and a Chroma collection is searched dense";

/// Serves MCP until the client leaves (stdio) or the process is stopped (HTTP).
pub async fn run(args: ServeCmd) -> Result<bool, String> {
    if args.search_timeout.is_zero() {
        return Err("--search-timeout must be more than 0".into());
    }
    let remote = args.stores.is_some() || args.chroma.chroma_url.is_some();
    if remote && !args.rerank.kinds.is_empty() {
        return Err(REMOTE_RERANK.into());
    }
    if remote && args.retrieval.is_set() {
        return Err(REMOTE_MODE.into());
    }
    let index = args.lexical_index.as_deref();
    let chroma = serve_config(&args.chroma, index, args.store.store.is_some() || args.stores.is_some())?;
    // The listener first: a refused address or bad token list fails before the store opens.
    let listener = match &args.http {
        Some(addr) => Some(http_listener(addr, &args).await?),
        None => None,
    };
    let nav_config = (args.tools == "all").then(|| {
        let mut config = NavConfig::default();
        config.allow_loopback_git |= args.allow_loopback_git;
        config
    });
    let served = match (&chroma, &args.stores) {
        (Some(config), _) => Served::remote(match index {
            Some(dir) => {
                crate::app::keep_lexical_index(config, dir, args.lexical_refresh).await?;
                crate::app::build_engine_beside(config, dir)?
            }
            None => crate::app::build_engine(config)?,
        }),
        (None, Some(file)) => Served::remote(rr_engine::stores::engine(file).map_err(|e| e.to_string())?),
        (None, None) => serve_store(&args, nav_config.clone())?,
    };
    // Over a stores file the flag wins over its `per_file`.
    let engine = args.retrieval.selection.apply(served.engine);
    let status = served.status.unwrap_or_else(|| Arc::new(rr_mcp::telemetry::SearchProbe(engine.clone())));
    let mut limits = rr_core::ArgLimits::default();
    if let Some(max) = args.max_query_bytes {
        limits.max_query_bytes = usize::try_from(max).unwrap_or(usize::MAX);
    }
    let mut server = rr_mcp::McpServer::builder(engine, crate::app::NAME, crate::app::version_line())
        .limits(limits)
        .error_text(rr_mcp::ErrorText::Summary)
        .search_deadline(args.search_timeout)
        .log_tool_durations(true);
    if let Some(facets) = served.facets {
        server = server.facets(Arc::new(SearchFacets(facets)));
    }
    let mut options = rr_mcp::http::HttpOptions {
        access: listener.as_ref().map(|(_, access)| access.clone()),
        telemetry: telemetry(&args, listener.is_some(), status, served.gate).await?,
        ..Default::default()
    };
    if let Some(config) = nav_config {
        let nav = match (served.nav, &chroma) {
            (Some(nav), _) => nav,
            (None, Some(_)) if let Some(dir) = index => rr_engine::nav_embedded::open_dir(dir, config)?,
            (None, Some(chroma)) => rr_engine::nav_chroma::open(chroma_source(chroma)?, config).await?,
            (None, None) => rr_engine::nav_embedded::open_dir(&args.store.dir(), config)?,
        };
        server = server.navigation(Arc::new(crate::mcp_nav::NavTools(nav)));
        options.rate_limit = Some(args.rate_limit);
    }
    serve(server.build(), listener.map(|(listener, _)| listener), options).await
}

/// Serves `server` over stdio, or Streamable HTTP on `listener`.
async fn serve(
    server: rr_mcp::McpServer,
    listener: Option<tokio::net::TcpListener>,
    options: rr_mcp::http::HttpOptions,
) -> Result<bool, String> {
    match listener {
        None => rr_mcp::stdio::serve(server).await.map_err(|e| format!("stdio MCP server terminated: {e}"))?,
        Some(listener) => rr_mcp::http::serve(listener, server, options)
            .await
            .map_err(|e| format!("Streamable HTTP server error: {e}"))?,
    }
    Ok(true)
}

/// What a server searches, and what the embedded store adds to it.
struct Served {
    engine: rr_core::SearchEngine,
    /// The navigation service over the embedded store, sharing its open store.
    nav: Option<Arc<NavService>>,
    /// The store's figures; `None` probes the engine instead.
    status: Option<Arc<dyn rr_mcp::telemetry::StoreStatus>>,
    facets: Option<rr_engine::local::StoreFacets>,
    /// What a watch says of its folder, for `/readyz`.
    gate: Option<rr_mcp::telemetry::ReadyGate>,
}

impl Served {
    fn remote(engine: rr_core::SearchEngine) -> Self {
        Served { engine, nav: None, status: None, facets: None, gate: None }
    }
}

/// The embedded store served: opened once for search and navigation, and
/// followed by a watch with `--watch`.
fn serve_store(args: &ServeCmd, nav: Option<NavConfig>) -> Result<Served, String> {
    // A new store gets its settings here, so that it opens empty while the
    // watch's first run fills it.
    let follow = args.watch.as_deref().map(|dir| watch_request(dir, &args.store.dir())).transpose()?;
    let local = local_services(&args.store.dir(), &args.retrieval.settings(), args.rerank.reranker()?, nav)?;
    let mut gate: Option<rr_mcp::telemetry::ReadyGate> = None;
    if let Some(request) = follow {
        let follower = rr_engine::watch::Follower::new(request, &local.open)
            .map_err(|e| e.to_string())?
            .identity_from_checkout(Default::default());
        let debounce = std::time::Duration::from_millis(args.watch_debounce_ms);
        let mut watch = rr_engine::watch::Watch::start(follower, debounce).map_err(|e| e.to_string())?;
        if let Some(nav) = local.nav.clone() {
            // The navigation catalogue (definitions) follows the store.
            watch = watch.after_update(move || {
                if let Err(error) = nav.refresh() {
                    tracing::warn!(%error, "watch: the navigation catalogue was not refreshed");
                }
            });
        }
        let status = watch.status();
        gate = Some(Arc::new(move || status.check()));
        tokio::spawn(watch.run());
    }
    Ok(Served { engine: local.engine, nav: local.nav, status: Some(local.status), facets: Some(local.facets), gate })
}

/// The metrics of `--http` or `--metrics` (the latter on its own listener);
/// `None` without either.
async fn telemetry(
    args: &ServeCmd,
    http: bool,
    status: Arc<dyn rr_mcp::telemetry::StoreStatus>,
    gate: Option<rr_mcp::telemetry::ReadyGate>,
) -> Result<Option<rr_mcp::telemetry::Telemetry>, String> {
    if !http && args.metrics.is_none() {
        return Ok(None);
    }
    let mut telemetry = rr_mcp::telemetry::Telemetry::install(Some(status))?;
    if let Some(gate) = gate {
        telemetry = telemetry.gate(gate);
    }
    rr_http::describe_metrics();
    if let Some(addr) = &args.metrics {
        // The rule of --http: loopback, tokens, or --allow-unauthenticated said.
        let tokens = serve_tokens(args.token_file.as_deref(), &|name| std::env::var(name).ok())?;
        let listener = rr_mcp::http::bind_local(addr).await.map_err(|e| format!("--metrics {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| format!("--metrics {addr}: {e}"))?;
        if tokens.is_none() && !local.ip().to_canonical().is_loopback() && !args.allow_unauthenticated {
            return Err(unauthenticated_refusal("--metrics", &local, "the server's metrics"));
        }
        let access = Arc::new(rr_mcp::auth::Access { tokens, origins: rr_mcp::auth::Origins::default() });
        tokio::spawn(rr_mcp::http::serve_status(listener, telemetry.clone(), Some(access)));
    }
    Ok(Some(telemetry))
}

/// The tokens of `serve --http`: the token file's and the environment's.
/// `None` when neither lists any.
pub fn serve_tokens(
    token_file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<rr_mcp::auth::Tokens>, String> {
    use rr_mcp::auth::{TOKENS_ENV, Tokens};
    let mut tokens = Tokens::default();
    if let Some(path) = token_file {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?;
        let from_file = Tokens::parse(&text, &path.display().to_string(), &[])?;
        if from_file.is_empty() {
            return Err(format!("--token-file {} lists no token", path.display()));
        }
        tokens.extend(from_file)?;
    }
    if let Some(text) = env(TOKENS_ENV).filter(|t| !t.trim().is_empty()) {
        tokens.extend(Tokens::parse(&text, TOKENS_ENV, &[','])?)?;
    }
    Ok((!tokens.is_empty()).then_some(tokens))
}

/// Why `serve --http` (or `--metrics`, `flag`) refuses an address other
/// than loopback without tokens; `exposed` is what anyone could then read.
pub fn unauthenticated_refusal(flag: &str, addr: &std::net::SocketAddr, exposed: &str) -> String {
    format!(
        "refusing to serve {flag} on {addr} without authentication: anyone who reaches it could read {exposed}. \
         Give bearer tokens (--token-file PATH or ${}), listen on loopback only ({flag} PORT listens on \
         127.0.0.1), or pass --allow-unauthenticated",
        rr_mcp::auth::TOKENS_ENV
    )
}

/// The listener of `serve --http` and its access rules: a bare port on
/// 127.0.0.1; any other interface only with tokens or
/// `--allow-unauthenticated`.
async fn http_listener(
    addr: &str,
    args: &ServeCmd,
) -> Result<(tokio::net::TcpListener, Arc<rr_mcp::auth::Access>), String> {
    let tokens = serve_tokens(args.token_file.as_deref(), &|name| std::env::var(name).ok())?;
    let origins = rr_mcp::auth::Origins::new(&args.allow_origins)?;
    let listener = rr_mcp::http::bind_local(addr).await.map_err(|e| format!("Streamable HTTP server error: {e}"))?;
    let local = listener.local_addr().map_err(|e| format!("Streamable HTTP server error: {e}"))?;
    if tokens.is_none() && !local.ip().to_canonical().is_loopback() && !args.allow_unauthenticated {
        return Err(unauthenticated_refusal(
            "--http",
            &local,
            "every indexed file and make the server clone repositories",
        ));
    }
    Ok((listener, Arc::new(rr_mcp::auth::Access { tokens, origins })))
}

/// What `serve --watch DIR` indexes: `index DIR --store STORE` as the command
/// line would run it (the store's embedder, or a new store's default).
fn watch_request(dir: &Path, store: &Path) -> Result<IndexRequest, String> {
    let args = super::index::for_store(dir, store, None)?;
    rr_engine::local::choose_settings(store, None, None, None, None, false).map_err(|e| e.to_string())?;
    super::index::request(&args)
}

/// What `serve --store DIR` serves: the search engine and, with `--tools
/// all`, the navigation service.
pub struct LocalServices {
    pub engine: rr_core::SearchEngine,
    pub nav: Option<Arc<rr_nav::NavService>>,
    /// What the navigation service reads: the same open store as `engine`.
    pub nav_source: Option<Arc<rr_engine::nav_embedded::EmbeddedSource>>,
    /// The store's figures for `/metrics` and `/readyz`.
    pub status: Arc<dyn rr_mcp::telemetry::StoreStatus>,
    /// The store they share, for a watch to write into.
    pub open: rr_engine::local::OpenStore,
    /// The languages and kinds of file `search` can be narrowed to.
    pub facets: rr_engine::local::StoreFacets,
}

/// The search engine over the embedded store in `dir` and, given `nav`'s
/// settings, the navigation service over the same store. The store is
/// opened once and shared: each open builds its own in-memory vector index
/// and lexical cache, which a second open would hold twice.
pub fn local_services(
    dir: &Path,
    retrieval: &RetrievalSettings,
    reranker: Option<Arc<dyn rr_core::Reranker>>,
    nav: Option<NavConfig>,
) -> Result<LocalServices, String> {
    let open = rr_engine::local::open(dir).map_err(|e| e.to_string())?;
    let settings = EngineSettings { retrieval: retrieval.clone(), ..open.engine_settings() };
    let engine = open.engine(reranker, &settings, super::args::flag_name).map_err(|e| e.to_string())?;
    let store = open.store.clone();
    let status = Arc::new(rr_mcp::telemetry::LocalStore(move || {
        let namespaces = store.namespaces().map_err(|e| e.to_string())?;
        let mut files = 0;
        for namespace in &namespaces {
            files += store.list_files(&namespace.namespace_id).map_err(|e| e.to_string())?.len() as u64;
        }
        Ok(rr_mcp::telemetry::StoreStats { chunks: store.len() as u64, files, repositories: namespaces.len() as u64 })
    }));
    let facets = rr_engine::local::StoreFacets::new(&open);
    let nav_source =
        nav.is_some().then(|| Arc::new(rr_engine::nav_embedded::EmbeddedSource::new(dir, open.store.clone())));
    let nav = match (nav, &nav_source) {
        (Some(config), Some(source)) => Some(rr_nav::NavService::open(source.clone(), dir, config)?),
        _ => None,
    };
    Ok(LocalServices { engine, nav, nav_source, status, open, facets })
}

/// The drop-in configuration `serve --chroma-url …` describes, or `None`
/// without `--chroma-url`; `with_store` says whether `--store` or
/// `--stores` was given too. The flags become the drop-in's, so they are
/// validated as the drop-in validates them and
/// everything else (tokens, API keys, reranking, attempts, timeout) comes
/// from the drop-in's environment variables.
pub fn serve_config(
    chroma: &ChromaArgs,
    lexical_index: Option<&Path>,
    with_store: bool,
) -> Result<Option<crate::config::Config>, String> {
    let Some(url) = &chroma.chroma_url else {
        return Ok(None);
    };
    if with_store {
        return Err("--chroma-url serves a Chroma collection; it cannot be combined with --store or --stores".into());
    }
    // With a lexical index, queries are embedded by the index's embedder:
    // the configuration's endpoint is the index's own, or none is called.
    // A folder without one gets a new index built from the collection, whose
    // vectors come from the configured endpoint.
    let settings = match lexical_index {
        Some(dir) => match rr_engine::local::open_settings(dir) {
            Ok(settings) => Some(settings),
            Err(rr_engine::local::LocalError::NoIndex(_)) => None,
            Err(e) => return Err(e.to_string()),
        },
        None => None,
    };
    let (embedding_api_url, embedding_model) = match settings {
        Some(settings) => match settings.endpoint {
            Some(endpoint) => (Some(endpoint.api_url), Some(endpoint.model)),
            None => (Some(NO_ENDPOINT.to_owned()), Some(settings.embedder)),
        },
        None => (chroma.embedding_api_url.clone(), chroma.embedding_model.clone()),
    };
    let flags = crate::config::DropInFlags {
        server_url: Some(url.clone()),
        collection_name: chroma.collection_name.clone(),
        embedding_api_url,
        embedding_model,
        tenant: Some(chroma.tenant.clone()),
        database: Some(chroma.database.clone()),
        ..Default::default()
    };
    crate::config::from_flags(&flags, &crate::config::process_env).map(Some).map_err(|e| e.to_string())
}

/// The embedding endpoint of a configuration whose queries a built-in model
/// embeds: a loopback origin nothing is sent to.
const NO_ENDPOINT: &str = "http://127.0.0.1:9";

/// The navigation tools' source over the collection `config` names, with
/// its own HTTP client (same attempts, timeout and redacted secrets as
/// search); `add_repository` indexes into the same collection.
fn chroma_source(config: &crate::config::Config) -> Result<rr_engine::nav_chroma::ChromaSource, String> {
    let http = crate::app::http_client(config).map_err(|e| e.to_string())?;
    let non_empty = |s: &str| Some(s.to_owned()).filter(|s| !s.is_empty());
    let target = rr_engine::local::ChromaTarget {
        server_url: config.server_url.clone(),
        collection_name: config.collection_name.clone(),
        tenant: config.tenant.clone(),
        database: config.database.clone(),
        bearer_token: non_empty(&config.bearer_token),
        embedding_api_url: config.embedding_api_url.clone(),
        embedding_model: config.embedding_model.clone(),
        embedding_api_key: non_empty(&config.embedding_api_key),
    };
    rr_engine::nav_chroma::ChromaSource::new(crate::app::chroma_store(config, http), Some(target))
        .map_err(|e| e.to_string())
}
