//! Subcommands beyond the drop-in server: `index`, `search` and `serve` on
//! the embedded store. Invoked without a subcommand the binary behaves as
//! `mcp-chromadb-repo-search`, Go flag syntax included.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Words that select a subcommand when they come first.
pub const SUBCOMMANDS: [&str; 5] = ["index", "search", "serve", "plugins", "eval"];

#[derive(Debug, Parser)]
#[command(name = "repo-retriever", version, about = "Repository search for AI agents over MCP")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index a folder into the embedded store (records identical to chromadb-repo-indexer's).
    Index(Box<IndexArgs>),
    /// Search the embedded store and print the same Markdown as the MCP tool.
    Search(SearchCmd),
    /// Serve MCP over the embedded store, or a Chroma collection with --chroma-url (stdio, or HTTP with --http).
    Serve(Box<ServeCmd>),
    /// List the registered store, embedder and reranker kinds (name, kind, origin).
    Plugins(PluginsCmd),
    /// Compare retrieval pipelines (rerankers) on a query set: MRR, nDCG, recall and latency.
    Eval(EvalCmd),
}

/// `repo-retriever eval`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvalCmd {
    #[command(subcommand)]
    pub command: Option<EvalSubcommand>,
    /// The query set: JSON Lines of {"query", "source"?, "path"?, "relevant": ["path#La-Lb", …]}.
    #[arg(long, required = true)]
    pub queries: Option<PathBuf>,
    /// A TOML file of [[pipeline]] tables to compare [default: the embedded store dense, lexical and
    /// hybrid, with each reranker, and the bm25 baseline].
    #[arg(long)]
    pub pipelines: Option<PathBuf>,
    /// Store folder of the default comparison [default: $REPO_RETRIEVER_STORE or ./.repo-retriever]
    #[arg(long, conflicts_with = "pipelines")]
    pub store: Option<PathBuf>,
    /// Also write the numbers and every query's ranks to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Results kept per query (metrics are at 10).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub limit: u16,
}

#[derive(Debug, Subcommand)]
pub enum EvalSubcommand {
    /// Write a query set and a corpus from a repository's doc comments (CodeSearchNet style).
    Generate(GenerateCmd),
    /// Run semble's annotated code-search benchmark on checkouts of its repositories: NDCG@10 per
    /// repository, language and category, beside semble's published numbers.
    Suite(Box<SuiteCmd>),
}

/// `repo-retriever eval suite`: each repository indexed as `index` does and searched as `search`
/// does, with the same retrieval, selection and rerank flags.
#[derive(Debug, Args)]
pub struct SuiteCmd {
    /// The suite folder: repos.json, annotations/<name>.json and published.json.
    #[arg(long)]
    pub suite: PathBuf,
    /// The checkouts: <checkouts>/<name> is a repository at its pinned revision.
    #[arg(long)]
    pub checkouts: PathBuf,
    /// Store folders, <stores>/<name> per repository [default: `stores` beside the checkouts folder].
    #[arg(long)]
    pub stores: Option<PathBuf>,
    /// The repositories to run: those tuned on (dev), those judged on (test), or all.
    #[arg(long, value_parser = ["dev", "test", "all"], default_value = "all")]
    pub split: String,
    /// Only these repositories (comma-separated names of repos.json).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub repos: Vec<String>,
    /// Also write the tables' numbers and every query's results and targets to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Remove each repository's store first, so that the index time is a full build.
    #[arg(long)]
    pub reindex: bool,
    /// The embedder of stores this run creates, as `index --embedder` (an existing store keeps its own).
    #[arg(long, value_parser = ["potion", "hash", "minilm"])]
    pub embedder: Option<String>,
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
    #[command(flatten)]
    pub rerank: RerankArgs,
}

#[derive(Debug, Args)]
pub struct GenerateCmd {
    /// The repository folder.
    pub repo_dir: PathBuf,
    /// Output folder: queries.jsonl and corpus/ (the copy with the used comments blanked).
    #[arg(long)]
    pub out: PathBuf,
    /// Keep at most this many queries, evenly spread over the repository.
    #[arg(long)]
    pub max: Option<usize>,
}

#[derive(Debug, Args)]
pub struct PluginsCmd {
    /// Also load the dynamic plugins this stores file lists.
    #[arg(long)]
    pub stores: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StoreArg {
    /// Store folder [default: $REPO_RETRIEVER_STORE or ./.repo-retriever]
    #[arg(long)]
    pub store: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// The folder to index.
    pub dir: PathBuf,
    #[command(flatten)]
    pub store: StoreArg,
    /// Organization of the indexed repository [default: the owner in the `origin` remote's URL, else local].
    #[arg(long)]
    pub organization: Option<String>,
    /// Repository name [default: the name in the `origin` remote's URL, else the folder's name].
    #[arg(long)]
    pub repository: Option<String>,
    /// Branch [default: HEAD's branch in a git checkout, else main].
    #[arg(long)]
    pub branch: Option<String>,
    /// Commit the files come from, used for source links [default: HEAD in a git checkout, else none].
    #[arg(long)]
    pub commit_sha: Option<String>,
    /// Index what .gitignore, .ignore and .git/info/exclude ignore too: the reference indexer's file selection.
    #[arg(long)]
    pub no_ignore: bool,
    /// Git wildmatch patterns of paths to include (repeatable) [default: **].
    #[arg(long = "include-paths", value_name = "PATTERN")]
    pub include_paths: Vec<String>,
    /// Git wildmatch patterns of paths to exclude (repeatable).
    #[arg(long = "exclude-paths", value_name = "PATTERN")]
    pub exclude_paths: Vec<String>,
    /// File extensions to include, e.g. .go (repeatable).
    #[arg(long = "include-extensions", value_name = "EXT")]
    pub include_extensions: Vec<String>,
    /// File extensions to exclude (repeatable).
    #[arg(long = "exclude-extensions", value_name = "EXT")]
    pub exclude_extensions: Vec<String>,
    /// Chunk budget in cl100k_base tokens, context prefix included [default: 512].
    #[arg(long)]
    pub chunk_size: Option<usize>,
    /// Token overlap when an oversized unit is split [default: 64].
    #[arg(long)]
    pub chunk_overlap: Option<usize>,
    /// Chunking rules: reference (chromadb-repo-indexer's chunking version 2, identical records) or
    /// semantic (version 3: doc comments with their declaration, small items merged, bounded dense
    /// files, reST/AsciiDoc sections) [default: semantic for a new embedded store, the one an
    /// existing store was built with, reference for --chroma-url]. Another chunking than the
    /// store's rewrites every record.
    #[arg(long, value_parser = ["reference", "semantic"])]
    pub chunking: Option<String>,
    /// Records per write batch [default: 100].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// A chromadb-repo-indexer YAML file (version 1): its files, chunking and sync keys apply, and
    /// its chroma and embedding sections describe a Chroma target. Flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Compute the summary without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Write the list of record ids to this file.
    #[arg(long)]
    pub output_manifest: Option<PathBuf>,
    /// Embedder of a new store: potion (a static model compiled in: potion-base-8M), hash (lexical,
    /// built in), minilm (all-MiniLM-L6-v2, see rr-minilm's locate()) or openai (any
    /// OpenAI-compatible embeddings endpoint: --embedding-api-url and --embedding-model, key from
    /// CHROMA_REPO_SEARCH_EMBEDDING_API_KEY) [default: potion]. An existing store keeps the one it
    /// was created with.
    #[arg(long, value_parser = ["potion", "hash", "minilm", "openai"], conflicts_with = "chroma_url")]
    pub embedder: Option<String>,
    /// Prepended to queries before embedding, for a new store [default: the embedder's: "query: " for
    /// hash and openai, none for potion and minilm].
    #[arg(long, conflicts_with = "chroma_url")]
    pub query_prefix: Option<String>,
    /// Prepended to documents before embedding, for a new store [default: the embedder's: "passage: "
    /// for hash and openai, none for potion and minilm].
    #[arg(long, conflicts_with = "chroma_url")]
    pub document_prefix: Option<String>,
    #[command(flatten)]
    pub chroma: ChromaArgs,
}

/// Index into a Chroma collection instead of the embedded store.
#[derive(Debug, Args)]
pub struct ChromaArgs {
    /// Chroma server origin; when set, index writes to and serve reads from this collection (needs
    /// --collection-name and an embedding endpoint).
    #[arg(long, requires_all = ["collection_name", "embedding_api_url", "embedding_model"])]
    pub chroma_url: Option<String>,
    #[arg(long, env = "CHROMA_REPO_SEARCH_COLLECTION_NAME")]
    pub collection_name: Option<String>,
    #[arg(long, env = "CHROMA_REPO_SEARCH_TENANT", default_value = "default_tenant")]
    pub tenant: String,
    #[arg(long, env = "CHROMA_REPO_SEARCH_DATABASE", default_value = "default_database")]
    pub database: String,
    /// OpenAI-compatible embeddings origin for the Chroma target, or for a new store with
    /// --embedder openai.
    #[arg(long, env = "CHROMA_REPO_SEARCH_EMBEDDING_API_URL")]
    pub embedding_api_url: Option<String>,
    #[arg(long, env = "CHROMA_REPO_SEARCH_EMBEDDING_MODEL")]
    pub embedding_model: Option<String>,
}

#[derive(Debug, Args)]
pub struct SearchCmd {
    /// What to look for.
    pub query: String,
    #[command(flatten)]
    pub store: StoreArg,
    /// owner/repository or owner/repository@branch.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub source: String,
    /// Path pattern: * crosses folders, **/ matches zero or more folders, ? one character.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub path: String,
    /// Maximum excerpts, 1 to 20 [default: 5].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub limit: i64,
    /// Only chunks of this language (one the index holds, e.g. rust, python, markdown).
    #[arg(long)]
    pub language: Option<String>,
    /// Only files of this kind: source, test, example, bench, docs, generated or vendored.
    #[arg(long)]
    pub kind: Option<String>,
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
    #[command(flatten)]
    pub rerank: RerankArgs,
}

/// The first stage of the embedded store (`search`, `serve` without --stores or --chroma-url).
#[derive(Debug, Args)]
pub struct RetrievalArgs {
    /// How the store ranks candidates: dense (embeddings), lexical (BM25 over the full-text index) or
    /// hybrid (both, fused by reciprocal rank) [default: hybrid].
    #[arg(long, value_name = "MODE", value_parser = mode_parser())]
    pub mode: Option<rr_core::RetrievalMode>,
    /// Hybrid: weight of the dense ranking [default: 0.5 with the hash embedder, else 1].
    #[arg(long, value_name = "W")]
    pub hybrid_weight_dense: Option<f64>,
    /// Hybrid: weight of the lexical ranking [default: 4].
    #[arg(long, value_name = "W")]
    pub hybrid_weight_lexical: Option<f64>,
    /// Hybrid: the k of reciprocal-rank fusion [default: 20].
    #[arg(long, value_name = "K")]
    pub hybrid_rrf_k: Option<f64>,
    /// Hybrid: candidates read from each ranking before fusion [default: 50].
    #[arg(long, value_name = "N")]
    pub hybrid_depth: Option<usize>,
    /// Hybrid: the first fused candidates ordered again by how much of the query each holds (its
    /// names, its code, not a file's preamble); 0 keeps the fused order [default: 20].
    #[arg(long, value_name = "N")]
    pub hybrid_rerank: Option<usize>,
    #[command(flatten)]
    pub selection: SelectionArgs,
}

/// How the results are selected from the ranking (`search`, and `serve` over any store).
#[derive(Debug, Args)]
pub struct SelectionArgs {
    /// Results one file gets before other files have had their turn; 0 keeps the ranking's order
    /// [default: 0 over the embedded store; 2, the reference server's selection, with --chroma-url or
    /// --stores unless the file sets `per_file`].
    #[arg(long, value_name = "N")]
    pub per_file: Option<usize>,
    /// Order the candidates again as code: definitions for symbol queries, files named by the
    /// query, source before tests, examples and docs, one file not filling the list (on|off)
    /// [default: on over the embedded store; off with --chroma-url, and with --stores unless the
    /// file sets `code_rank`].
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    pub code_rank: Option<bool>,
}

impl SelectionArgs {
    /// `engine` with the selection asked for; without one, the engine's own.
    fn apply(&self, engine: rr_core::SearchEngine) -> rr_core::SearchEngine {
        let engine = match self.per_file {
            Some(n) => engine.with_per_file(n),
            None => engine,
        };
        match self.code_rank {
            Some(on) => engine.with_code_rank(on.then(rr_core::CodeRank::default)),
            None => engine,
        }
    }
}

fn mode_parser() -> impl clap::builder::TypedValueParser<Value = rr_core::RetrievalMode> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(rr_core::retrieval::MODE_NAMES)
        .map(|s| s.parse::<rr_core::RetrievalMode>().expect("a listed mode"))
}

impl RetrievalArgs {
    pub fn choice(&self) -> crate::local::RetrievalChoice {
        crate::local::RetrievalChoice {
            mode: self.mode,
            weight_dense: self.hybrid_weight_dense,
            weight_lexical: self.hybrid_weight_lexical,
            rrf_k: self.hybrid_rrf_k,
            depth: self.hybrid_depth,
            rerank: self.hybrid_rerank,
        }
    }

    fn is_set(&self) -> bool {
        self.choice() != crate::local::RetrievalChoice::default()
    }
}

/// Reranking of the embedded store (`search`, `serve` without --stores or --chroma-url).
#[derive(Debug, Args)]
pub struct RerankArgs {
    /// Rerank the candidates with this registered reranker kind, default settings (repeatable: a
    /// chain, first to last), e.g. bm25-fusion. Kinds that need settings go in a `serve --stores` file.
    #[arg(long = "rerank", value_name = "KIND")]
    pub kinds: Vec<String>,
    /// Drop candidates the last rerank stage scores below this.
    #[arg(long, value_name = "SCORE", requires = "kinds")]
    pub rerank_min_score: Option<f64>,
}

impl RerankArgs {
    fn reranker(&self) -> Result<Option<std::sync::Arc<dyn rr_core::Reranker>>, String> {
        crate::local::reranker(&self.kinds, self.rerank_min_score).map_err(|e| e.to_string())
    }
}

#[derive(Debug, Args)]
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
    /// comma-separated) are accepted too. Only admin tokens may call add_repository. Ignored over stdio.
    #[arg(long, value_name = "PATH", env = "REPO_RETRIEVER_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve --http on a non-loopback address without tokens: anyone who reaches it may read the
    /// index and add repositories.
    #[arg(long, requires = "http")]
    pub allow_unauthenticated: bool,
    /// A browser origin allowed to call --http (scheme://host[:port]; repeatable; `*`: any). A
    /// request whose Origin header is neither loopback nor listed is refused with 403.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub allow_origins: Vec<String>,
    /// Serve /healthz, /readyz and Prometheus /metrics on this address or port (a bare port:
    /// 127.0.0.1) beside a stdio server; with --http they are on the HTTP listener.
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
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
    #[command(flatten)]
    pub rerank: RerankArgs,
}

impl StoreArg {
    fn dir(&self) -> PathBuf {
        self.store.clone().unwrap_or_else(crate::local::default_store_dir)
    }
}

fn identity(args: &IndexArgs) -> rr_indexer::Identity {
    let flags = rr_indexer::checkout::IdentityFlags {
        organization: args.organization.clone(),
        repository: args.repository.clone(),
        branch: args.branch.clone(),
        commit_sha: args.commit_sha.clone(),
    };
    rr_indexer::checkout::local_identity(&args.dir, &flags)
}

/// What `index` runs for `args`: the YAML file's settings under the flags,
/// the store's embedder chosen, the identity read from the folder. No
/// progress callback.
fn index_request(args: &IndexArgs) -> Result<crate::local::IndexRequest, String> {
    let file = match &args.config {
        Some(path) => crate::index_config::load(path)?,
        None => crate::index_config::IndexConfig::default(),
    };
    let or_file = |flag: &Vec<String>, yaml: &Option<Vec<String>>| {
        if flag.is_empty() { yaml.clone().unwrap_or_default() } else { flag.clone() }
    };
    let mut options = rr_indexer::IndexOptions::default();
    let include = or_file(&args.include_paths, &file.files.include_paths);
    if !include.is_empty() {
        options.selection.include_paths = include;
    }
    options.selection.exclude_paths = or_file(&args.exclude_paths, &file.files.exclude_paths);
    options.selection.include_extensions = or_file(&args.include_extensions, &file.files.include_extensions);
    options.selection.exclude_extensions = or_file(&args.exclude_extensions, &file.files.exclude_extensions);
    options.selection.respect_ignore = !args.no_ignore;
    options.chunking.chunk_size = args.chunk_size.or(file.chunking.chunk_size).unwrap_or(512);
    options.chunking.chunk_overlap = args.chunk_overlap.or(file.chunking.chunk_overlap).unwrap_or(64);
    if args.embedder.is_some() || args.query_prefix.is_some() || args.document_prefix.is_some() {
        let endpoint = match args.embedder.as_deref() {
            Some("openai") => {
                let api_url = args.chroma.embedding_api_url.clone().or(file.embedding.api_url.clone());
                let model = args.chroma.embedding_model.clone().or(file.embedding.model.clone());
                match (api_url.filter(|u| !u.is_empty()), model.filter(|m| !m.is_empty())) {
                    (Some(api_url), Some(model)) => Some(crate::local::EmbeddingEndpoint { api_url, model }),
                    _ => return Err("--embedder openai needs --embedding-api-url and --embedding-model".into()),
                }
            }
            _ => None,
        };
        crate::local::choose_settings(
            &args.store.dir(),
            args.embedder.as_deref(),
            args.query_prefix.as_deref(),
            args.document_prefix.as_deref(),
            endpoint,
            args.dry_run,
        )
        .map_err(|e| e.to_string())?;
    }
    let chroma_url = args.chroma.chroma_url.clone().or(file.chroma.server_url.clone());
    let request = crate::local::IndexRequest {
        root: args.dir.clone(),
        store: args.store.dir(),
        identity: identity(args),
        options,
        batch_size: args.batch_size.or(file.sync.batch_size).unwrap_or(100),
        dry_run: args.dry_run,
        output_manifest: args.output_manifest.clone(),
        progress: None,
        chunking: args.chunking.as_deref().map(str::parse).transpose()?,
        chroma: chroma_url.map(|server_url| crate::local::ChromaTarget {
            server_url,
            collection_name: args
                .chroma
                .collection_name
                .clone()
                .or(file.chroma.collection_name.clone())
                .unwrap_or_default(),
            tenant: file.chroma.tenant.clone().unwrap_or_else(|| args.chroma.tenant.clone()),
            database: file.chroma.database.clone().unwrap_or_else(|| args.chroma.database.clone()),
            // Secrets only from the environment, never from the command line or a file.
            bearer_token: std::env::var("CHROMA_REPO_SEARCH_BEARER_TOKEN").ok().filter(|s| !s.is_empty()),
            embedding_api_url: args
                .chroma
                .embedding_api_url
                .clone()
                .or(file.embedding.api_url.clone())
                .unwrap_or_default(),
            embedding_model: args.chroma.embedding_model.clone().or(file.embedding.model.clone()).unwrap_or_default(),
            embedding_api_key: std::env::var("CHROMA_REPO_SEARCH_EMBEDDING_API_KEY").ok().filter(|s| !s.is_empty()),
        }),
    };
    if let Some(target) = &request.chroma
        && (target.collection_name.is_empty()
            || target.embedding_api_url.is_empty()
            || target.embedding_model.is_empty())
    {
        return Err("a Chroma target needs a collection name, an embedding API URL and an embedding model".into());
    }
    Ok(request)
}

/// Why `serve --rerank` is refused with --stores or --chroma-url: those keep their own reranking.
pub const REMOTE_RERANK: &str = "--rerank reranks the embedded store: a --stores file sets `reranker` and \
     `rerank_min_score` itself, and --chroma-url reranks with the CHROMA_REPO_SEARCH_RERANK_* variables";

/// Why `serve --mode` is refused with --stores or --chroma-url.
pub const REMOTE_MODE: &str = "--mode and --hybrid-* set the embedded store's retrieval: a --stores file sets \
     `retrieval` per store, and a Chroma collection is searched dense";

/// The text of `repo-retriever --help`: the subcommands, one line each, then the drop-in flags.
pub fn help() -> String {
    use clap::CommandFactory as _;
    crate::config::help(&Cli::command())
}

/// Runs a subcommand. `Ok(false)` means it finished but reports failure
/// (a search that answered with a tool error).
pub async fn run(cli: Cli) -> Result<bool, String> {
    match cli.command {
        Command::Index(args) => {
            let mut request = index_request(&args)?;
            let bar = progress_bar(&format!("indexing {}", args.dir.display()));
            if let Some(bar) = &bar {
                let bar = bar.clone();
                request.progress = Some(std::sync::Arc::new(move |p: rr_indexer::sync::SyncProgress| {
                    bar.set_length(p.total as u64);
                    bar.set_position(p.done as u64);
                    bar.set_message(format!("{:?}", p.phase).to_lowercase());
                }));
            }
            let summary = crate::local::index(request).await;
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            stdout(&format!("{}\n", summary.map_err(|e| e.to_string())?.to_json()))?;
            Ok(true)
        }
        Command::Search(args) => {
            let search = rr_core::SearchArgs {
                query: args.query,
                source: args.source,
                path: args.path,
                limit: args.limit,
                language: args.language.unwrap_or_default(),
                kind: args.kind.unwrap_or_default(),
            };
            let choice = args.retrieval.choice();
            let open = crate::local::open(&args.store.dir()).map_err(|e| e.to_string())?;
            if let Err(text) =
                rr_mcp::search::check_facets(&search, &SearchFacets(crate::local::StoreFacets::new(&open)))
            {
                eprintln!("{text}");
                return Ok(false);
            }
            let engine =
                crate::local::engine_over(&open, &choice, args.rerank.reranker()?).map_err(|e| e.to_string())?;
            let engine = args.retrieval.selection.apply(engine);
            let ctx = rr_core::CallContext::default();
            let limits = rr_core::ArgLimits::default();
            let outcome = rr_mcp::search::call_with(&engine, search, &ctx, &limits, rr_mcp::ErrorText::Summary).await;
            let (text, is_error) = (outcome.text, outcome.is_error);
            if is_error {
                eprintln!("{text}");
            } else {
                stdout(&format!("{text}\n"))?;
            }
            Ok(!is_error)
        }
        Command::Eval(args) => {
            match args.command {
                Some(EvalSubcommand::Generate(g)) => {
                    stdout(&rr_eval::generate(&g.repo_dir, &g.out, g.max).await?)?;
                    return Ok(true);
                }
                Some(EvalSubcommand::Suite(suite)) => return run_suite(*suite).await,
                None => {}
            }
            let Some(queries) = args.queries else { return Err("--queries is required".into()) };
            let options = rr_eval::EvalOptions {
                queries,
                pipelines: args.pipelines,
                store: args.store.unwrap_or_else(crate::local::default_store_dir),
                json: args.json,
                limit: usize::from(args.limit),
            };
            stdout(&rr_eval::run(&options).await?)?;
            Ok(true)
        }
        Command::Plugins(args) => {
            let file = args.stores.as_deref().map(crate::stores::read).transpose().map_err(|e| e.to_string())?;
            let registry = crate::stores::registry(file.as_ref()).map_err(|e| e.to_string())?;
            stdout(&crate::stores::list(&registry))?;
            Ok(true)
        }
        Command::Serve(args) => {
            if !args.rerank.kinds.is_empty() && (args.stores.is_some() || args.chroma.chroma_url.is_some()) {
                return Err(REMOTE_RERANK.into());
            }
            if args.retrieval.is_set() && (args.stores.is_some() || args.chroma.chroma_url.is_some()) {
                return Err(REMOTE_MODE.into());
            }
            let chroma = serve_config(&args.chroma, args.store.store.is_some() || args.stores.is_some())?;
            // The listener first: a refused address or bad token list fails before the store opens.
            let listener = match &args.http {
                Some(addr) => Some(http_listener(addr, &args).await?),
                None => None,
            };
            let nav_config = (args.tools == "all").then(|| {
                let mut config = crate::nav::NavConfig::default();
                config.allow_loopback_git |= args.allow_loopback_git;
                config
            });
            let mut local_nav = None;
            let mut store_status = None;
            let mut facets = None;
            let engine = match (&chroma, &args.stores) {
                (Some(config), _) => crate::app::build_engine(config)?,
                (None, Some(file)) => crate::stores::engine(file).map_err(|e| e.to_string())?,
                (None, None) => {
                    // A new store gets its settings here, so that it opens empty while the
                    // watch's first run fills it.
                    let follow = args.watch.as_deref().map(|dir| watch_request(dir, &args.store.dir())).transpose()?;
                    let reranker = args.rerank.reranker()?;
                    let local =
                        local_services(&args.store.dir(), &args.retrieval.choice(), reranker, nav_config.clone())?;
                    if let Some(request) = follow {
                        let follower = crate::watch::Follower::new(request, &local.open).map_err(|e| e.to_string())?;
                        let debounce = std::time::Duration::from_millis(args.watch_debounce_ms);
                        let mut watch = crate::watch::Watch::start(follower, debounce).map_err(|e| e.to_string())?;
                        if let Some(nav) = local.nav.clone() {
                            // The navigation catalogue (definitions) follows the store.
                            watch = watch.after_update(move || {
                                if let Err(error) = nav.refresh() {
                                    tracing::warn!(%error, "watch: the navigation catalogue was not refreshed");
                                }
                            });
                        }
                        tokio::spawn(watch.run());
                    }
                    local_nav = local.nav;
                    store_status = Some(local.status);
                    facets = Some(local.facets);
                    local.engine
                }
            };
            // Over a stores file the flag wins over its `per_file`.
            let engine = args.retrieval.selection.apply(engine);
            if store_status.is_none() {
                let probe: std::sync::Arc<dyn rr_mcp::telemetry::StoreStatus> =
                    std::sync::Arc::new(rr_mcp::telemetry::SearchProbe(engine.clone()));
                store_status = Some(probe);
            }
            let mut limits = rr_core::ArgLimits::default();
            if let Some(max) = args.max_query_bytes {
                limits.max_query_bytes = usize::try_from(max).unwrap_or(usize::MAX);
            }
            let mut server = rr_mcp::McpServer::builder(engine, crate::app::NAME, crate::app::version_line())
                .limits(limits)
                .error_text(rr_mcp::ErrorText::Summary)
                .log_tool_durations(true);
            if let Some(facets) = facets {
                server = server.facets(std::sync::Arc::new(SearchFacets(facets)));
            }
            let mut options = rr_mcp::http::HttpOptions::default();
            if let Some((_, access)) = &listener {
                options.access = Some(access.clone());
            }
            let telemetry = if listener.is_some() || args.metrics.is_some() {
                let telemetry = rr_mcp::telemetry::Telemetry::install(store_status)?;
                rr_http::describe_metrics();
                Some(telemetry)
            } else {
                None
            };
            if let (Some(addr), Some(telemetry)) = (&args.metrics, &telemetry) {
                let status = rr_mcp::http::bind_local(addr).await.map_err(|e| format!("--metrics {addr}: {e}"))?;
                tokio::spawn(rr_mcp::http::serve_status(status, telemetry.clone()));
            }
            options.telemetry = telemetry;
            if let Some(config) = nav_config {
                let nav = match (local_nav, &chroma) {
                    (Some(nav), _) => nav,
                    (None, Some(chroma)) => {
                        let source = chroma_source(chroma)?;
                        rr_engine::nav_chroma::open(source, config).await?
                    }
                    (None, None) => rr_engine::nav_embedded::open_dir(&args.store.dir(), config)?,
                };
                server = server.navigation(std::sync::Arc::new(crate::mcp_nav::NavTools(nav)));
                options.rate_limit = Some(args.rate_limit);
            }
            let server = server.build();
            match listener {
                None => rr_mcp::stdio::serve(server).await.map_err(|e| format!("stdio MCP server terminated: {e}"))?,
                Some((listener, _)) => rr_mcp::http::serve(listener, server, options)
                    .await
                    .map_err(|e| format!("Streamable HTTP server error: {e}"))?,
            }
            Ok(true)
        }
    }
}

/// The tokens of `serve --http`: the token file's and the environment's.
/// `None` when neither lists any.
pub fn serve_tokens(
    token_file: Option<&std::path::Path>,
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
        tokens.extend(from_file);
    }
    if let Some(text) = env(TOKENS_ENV).filter(|t| !t.trim().is_empty()) {
        tokens.extend(Tokens::parse(&text, TOKENS_ENV, &[','])?);
    }
    Ok((!tokens.is_empty()).then_some(tokens))
}

/// Why `serve --http` refuses an address other than loopback without tokens.
pub fn unauthenticated_refusal(addr: &std::net::SocketAddr) -> String {
    format!(
        "refusing to serve --http on {addr} without authentication: anyone who reaches it could read every \
         indexed file and make the server clone repositories. Give bearer tokens (--token-file PATH or \
         ${}), listen on loopback only (--http PORT listens on 127.0.0.1), or pass --allow-unauthenticated",
        rr_mcp::auth::TOKENS_ENV
    )
}

/// The listener of `serve --http` and its access rules: a bare port on
/// 127.0.0.1; any other interface only with tokens or
/// `--allow-unauthenticated`.
async fn http_listener(
    addr: &str,
    args: &ServeCmd,
) -> Result<(tokio::net::TcpListener, std::sync::Arc<rr_mcp::auth::Access>), String> {
    let tokens = serve_tokens(args.token_file.as_deref(), &|name| std::env::var(name).ok())?;
    let origins = rr_mcp::auth::Origins::new(&args.allow_origins)?;
    let listener = rr_mcp::http::bind_local(addr).await.map_err(|e| format!("Streamable HTTP server error: {e}"))?;
    let local = listener.local_addr().map_err(|e| format!("Streamable HTTP server error: {e}"))?;
    if tokens.is_none() && !local.ip().to_canonical().is_loopback() && !args.allow_unauthenticated {
        return Err(unauthenticated_refusal(&local));
    }
    Ok((listener, std::sync::Arc::new(rr_mcp::auth::Access { tokens, origins })))
}

/// `eval suite`: the tables on stdout, the details in `--json`.
async fn run_suite(args: SuiteCmd) -> Result<bool, String> {
    let stores = args.stores.unwrap_or_else(|| rr_eval::suite::default_stores(&args.checkouts));
    let options = rr_eval::suite::SuiteOptions {
        suite: args.suite,
        checkouts: args.checkouts,
        stores,
        split: args.split.parse()?,
        repos: args.repos,
        reindex: args.reindex,
    };
    let backend = SuiteSearch { reranker: args.rerank.reranker()?, retrieval: args.retrieval, embedder: args.embedder };
    let report = rr_eval::suite::run(&options, &backend).await.map_err(|e| e.to_string())?;
    if let Some(path) = &args.json {
        let body = serde_json::to_vec_pretty(&rr_eval::suite::to_json(&report)).map_err(|e| e.to_string())?;
        std::fs::write(path, body).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    stdout(&rr_eval::suite::markdown(&report))?;
    Ok(true)
}

/// The suite's repositories indexed by `index` and searched by `search`'s engine.
struct SuiteSearch {
    retrieval: RetrievalArgs,
    embedder: Option<String>,
    reranker: Option<std::sync::Arc<dyn rr_core::Reranker>>,
}

#[async_trait::async_trait]
impl rr_eval::suite::SuiteBackend for SuiteSearch {
    async fn index(&self, folder: &std::path::Path, store: &std::path::Path) -> Result<(), String> {
        // The command line `index <folder> --store <store>`, parsed as the binary parses it.
        let mut words: Vec<&std::ffi::OsStr> = vec![
            "repo-retriever".as_ref(),
            "index".as_ref(),
            folder.as_os_str(),
            "--store".as_ref(),
            store.as_os_str(),
        ];
        if let Some(embedder) = &self.embedder {
            words.extend([std::ffi::OsStr::new("--embedder"), std::ffi::OsStr::new(embedder)]);
        }
        let Command::Index(args) = Cli::try_parse_from(words).map_err(|e| e.to_string())?.command else {
            return Err("`index` did not parse as the index command".into());
        };
        crate::local::index(index_request(&args)?).await.map(drop).map_err(|e| e.to_string())
    }

    fn engine(&self, store: &std::path::Path) -> Result<rr_core::SearchEngine, String> {
        let engine = crate::local::engine_with(store, &self.retrieval.choice(), self.reranker.clone())
            .map_err(|e| e.to_string())?;
        Ok(self.retrieval.selection.apply(engine))
    }
}

/// What `serve --watch DIR` indexes: `index DIR --store STORE` as the command
/// line would run it (the store's embedder, or a new store's default).
fn watch_request(dir: &std::path::Path, store: &std::path::Path) -> Result<crate::local::IndexRequest, String> {
    let words: [&std::ffi::OsStr; 5] =
        ["repo-retriever".as_ref(), "index".as_ref(), dir.as_os_str(), "--store".as_ref(), store.as_os_str()];
    let Command::Index(args) = Cli::try_parse_from(words).map_err(|e| e.to_string())?.command else {
        return Err("`index` did not parse as the index command".into());
    };
    crate::local::choose_settings(store, None, None, None, None, false).map_err(|e| e.to_string())?;
    index_request(&args)
}

/// What `serve --store DIR` serves: the search engine and, with `--tools
/// all`, the navigation service.
pub struct LocalServices {
    pub engine: rr_core::SearchEngine,
    pub nav: Option<std::sync::Arc<crate::nav::NavService>>,
    /// What the navigation service reads: the same open store as `engine`.
    pub nav_source: Option<std::sync::Arc<rr_engine::nav_embedded::EmbeddedSource>>,
    /// The store's figures for `/metrics` and `/readyz`.
    pub status: std::sync::Arc<dyn rr_mcp::telemetry::StoreStatus>,
    /// The store they share, for a watch to write into.
    pub open: crate::local::OpenStore,
    /// The languages and kinds of file `search` can be narrowed to.
    pub facets: crate::local::StoreFacets,
}

/// [`crate::local::StoreFacets`] as the `search` tool reads them.
pub struct SearchFacets(pub crate::local::StoreFacets);

impl rr_mcp::search::SearchFacets for SearchFacets {
    fn languages(&self) -> Vec<String> {
        self.0.languages()
    }

    fn kinds(&self) -> Vec<String> {
        self.0.kinds()
    }
}

/// The search engine over the embedded store in `dir` and, given `nav`'s
/// settings, the navigation service over the same store. The store is
/// opened once and shared: each open builds its own in-memory vector index
/// and lexical cache, which a second open would hold twice.
pub fn local_services(
    dir: &std::path::Path,
    choice: &crate::local::RetrievalChoice,
    reranker: Option<std::sync::Arc<dyn rr_core::Reranker>>,
    nav: Option<crate::nav::NavConfig>,
) -> Result<LocalServices, String> {
    let open = crate::local::open(dir).map_err(|e| e.to_string())?;
    let engine = crate::local::engine_over(&open, choice, reranker).map_err(|e| e.to_string())?;
    let store = open.store.clone();
    let status = std::sync::Arc::new(rr_mcp::telemetry::LocalStore(move || {
        let namespaces = store.namespaces().map_err(|e| e.to_string())?;
        let mut files = 0;
        for namespace in &namespaces {
            files += store.list_files(&namespace.namespace_id).map_err(|e| e.to_string())?.len() as u64;
        }
        Ok(rr_mcp::telemetry::StoreStats { chunks: store.len() as u64, files, repositories: namespaces.len() as u64 })
    }));
    let facets = crate::local::StoreFacets::new(&open);
    let nav_source = nav
        .is_some()
        .then(|| std::sync::Arc::new(rr_engine::nav_embedded::EmbeddedSource::new(dir, open.store.clone())));
    let nav = match (nav, &nav_source) {
        (Some(config), Some(source)) => Some(crate::nav::NavService::open(source.clone(), dir, config)?),
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
pub fn serve_config(chroma: &ChromaArgs, with_store: bool) -> Result<Option<crate::config::Config>, String> {
    let Some(url) = &chroma.chroma_url else {
        return Ok(None);
    };
    if with_store {
        return Err("--chroma-url serves a Chroma collection; it cannot be combined with --store or --stores".into());
    }
    let flags = crate::config::DropInFlags {
        server_url: Some(url.clone()),
        collection_name: chroma.collection_name.clone(),
        embedding_api_url: chroma.embedding_api_url.clone(),
        embedding_model: chroma.embedding_model.clone(),
        tenant: Some(chroma.tenant.clone()),
        database: Some(chroma.database.clone()),
        ..Default::default()
    };
    crate::config::from_flags(&flags, &crate::config::process_env).map(Some).map_err(|e| e.to_string())
}

/// The navigation tools' source over the collection `config` names, with
/// its own HTTP client (same attempts, timeout and redacted secrets as
/// search); `add_repository` indexes into the same collection.
fn chroma_source(config: &crate::config::Config) -> Result<rr_engine::nav_chroma::ChromaSource, String> {
    let http = crate::app::http_client(config).map_err(|e| e.to_string())?;
    let non_empty = |s: &str| Some(s.to_owned()).filter(|s| !s.is_empty());
    let target = crate::local::ChromaTarget {
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

/// A progress bar on stderr when it is a terminal; nothing otherwise, so
/// logs and pipes stay clean.
fn progress_bar(message: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0).with_message(message.to_owned());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(bar)
}

/// Writes a command's output. A reader that stops early (`| head`) is not
/// an error: the output is simply no longer wanted, and `println!` would
/// panic on the broken pipe.
pub(crate) fn stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("cannot write to stdout: {e}")),
        _ => Ok(()),
    }
}
