//! `repo-retriever eval`: pipelines compared on a query set, a query set
//! generated from doc comments, and the annotated code-search suite.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::args::{RerankArgs, RetrievalArgs};
use super::output::stdout;

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
    /// Index each repository into the collection `suite-<name>` (`suite-half-<name>` with --federation) of this Chroma server, with the
    /// lexical index beside it in the store folder (`index --chroma-url … --lexical-index`), and search
    /// the collection through it (`serve --chroma-url … --lexical-index`). Tenant and database are
    /// Chroma's defaults; a token comes from CHROMA_REPO_SEARCH_BEARER_TOKEN.
    #[arg(long, value_name = "URL")]
    pub chroma_url: Option<String>,
    /// With --chroma-url: split each repository in two by file name (names starting with a–m or a
    /// digit in an embedded store, the rest in the Chroma collection with its lexical index) and search
    /// both as one `serve --stores` federation (`code_rank = true`, `per_file = 0`).
    #[arg(long, requires = "chroma_url")]
    pub federation: bool,
    /// Index each repository into the collection `suite-<name>` of this Qdrant server (its gRPC URL),
    /// as `index --qdrant-url URL --collection suite-<name>` does (--reindex deletes the collection
    /// first), and search it with the embedded store's defaults: hybrid over Qdrant's dense and
    /// sparse BM25 rankings, the head read again, the code ranking. --mode and --hybrid-* apply. The
    /// API key comes from QDRANT_API_KEY.
    #[arg(long, value_name = "URL", conflicts_with = "chroma_url")]
    pub qdrant_url: Option<String>,
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

/// `repo-retriever eval`: a query set over pipelines, or a subcommand.
pub async fn run(args: EvalCmd) -> Result<bool, String> {
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
        store: args.store.unwrap_or_else(rr_engine::local::default_store_dir),
        json: args.json,
        limit: usize::from(args.limit),
    };
    stdout(&rr_eval::run(&options).await?)?;
    Ok(true)
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
    if args.chroma_url.is_some() && args.retrieval.is_set() {
        return Err("--mode and --hybrid-* set the embedded store's retrieval; with --chroma-url the suite searches \
                    as `serve --chroma-url … --lexical-index` does"
            .into());
    }
    let backend = SuiteSearch {
        reranker: args.rerank.reranker()?,
        retrieval: args.retrieval,
        embedder: args.embedder,
        chroma_url: args.chroma_url,
        federation: args.federation,
        qdrant_url: args.qdrant_url,
        reindex: args.reindex,
        qdrant_settings: std::sync::Mutex::default(),
    };
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
    /// Index into and search this Chroma server, with the lexical index in the store folder.
    chroma_url: Option<String>,
    /// Half of each repository in an embedded store, half in Chroma, searched as a federation.
    federation: bool,
    /// Index into and search this Qdrant server, a collection per repository.
    qdrant_url: Option<String>,
    /// Delete a repository's Qdrant collection before indexing it.
    reindex: bool,
    /// What each repository's collection was written with, read after indexing it.
    qdrant_settings: std::sync::Mutex<std::collections::HashMap<PathBuf, rr_engine::local::StoreSettings>>,
}

/// The files of a federation's embedded half: names starting with a–m or a
/// digit. A path pattern also selects everything below a folder it matches,
/// so it asks for a dot too: folder names seldom hold one, and without it
/// `src/main/...` would put a whole repository in one half.
const EMBEDDED_HALF: &str = "**/[a-mA-M0-9]*.*";
/// The embedded half's store, inside the Chroma half's lexical index folder.
const EMBEDDED_HALF_DIR: &str = "embedded-half";

impl SuiteSearch {
    /// The Qdrant collection of the repository whose store is `store`.
    fn qdrant(&self, store: &Path) -> Option<rr_engine::qdrant::QdrantTarget> {
        let url = self.qdrant_url.as_ref()?;
        let name = store.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Some(rr_engine::qdrant::QdrantTarget {
            url: url.clone(),
            collection: format!("suite-{name}"),
            api_key: std::env::var(rr_engine::qdrant::API_KEY_ENV).ok().filter(|s| !s.is_empty()),
            embedder: self.embedder.clone(),
            ..rr_engine::qdrant::QdrantTarget::default()
        })
    }

    /// The Chroma collection of the repository whose store is `store`.
    fn collection(&self, store: &Path) -> Option<rr_engine::local::ChromaTarget> {
        let url = self.chroma_url.as_ref()?;
        let name = store.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Some(rr_engine::local::ChromaTarget {
            server_url: url.clone(),
            // A federation's collection holds half of each repository, never the whole.
            collection_name: if self.federation { format!("suite-half-{name}") } else { format!("suite-{name}") },
            tenant: "default_tenant".into(),
            database: "default_database".into(),
            bearer_token: std::env::var("CHROMA_REPO_SEARCH_BEARER_TOKEN").ok().filter(|s| !s.is_empty()),
            embedding_api_url: String::new(),
            embedding_model: String::new(),
            embedding_api_key: None,
        })
    }
}

#[async_trait::async_trait]
impl rr_eval::suite::SuiteBackend for SuiteSearch {
    async fn index(&self, folder: &Path, store: &Path) -> Result<(), String> {
        if let Some(target) = self.qdrant(store) {
            if self.reindex {
                rr_engine::qdrant::delete_collection(&target).await.map_err(|e| e.to_string())?;
            }
            let args = super::index::for_store(folder, store, None)?;
            let request = super::index::request(&args)?;
            rr_engine::qdrant::index(request, &target).await.map_err(|e| e.to_string())?;
            let settings = rr_engine::qdrant::read_settings(&target)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("the Qdrant collection \"{}\" was not written", target.collection))?;
            self.qdrant_settings.lock().map_err(|e| e.to_string())?.insert(store.to_owned(), settings);
            return Ok(());
        }
        let args = super::index::for_store(folder, store, self.embedder.as_deref())?;
        let mut request = super::index::request(&args)?;
        if let Some(target) = self.collection(store) {
            request.chroma = Some(target);
            request.lexical_index = true;
        }
        if self.federation {
            request.options.selection.exclude_paths.push(EMBEDDED_HALF.into());
        }
        rr_engine::local::index(request).await.map_err(|e| e.to_string())?;
        if self.federation {
            let half = store.join(EMBEDDED_HALF_DIR);
            let args = super::index::for_store(folder, &half, self.embedder.as_deref())?;
            let mut request = super::index::request(&args)?;
            request.options.selection.include_paths = vec![EMBEDDED_HALF.into()];
            rr_engine::local::index(request).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn engine(&self, store: &Path) -> Result<rr_core::SearchEngine, String> {
        if let Some(target) = self.qdrant(store) {
            let written = self.qdrant_settings.lock().map_err(|e| e.to_string())?.get(store).cloned();
            let Some(written) = written else { return Err(format!("{} was not indexed", target.collection)) };
            let mut settings = rr_engine::qdrant::engine_settings(&written);
            settings.retrieval = self.retrieval.settings();
            self.retrieval.selection.apply_to(&mut settings);
            return rr_engine::qdrant::engine(
                &target,
                &written,
                self.reranker.clone(),
                &settings,
                super::args::flag_name,
            )
            .map_err(|e| e.to_string());
        }
        if let (true, Some(target)) = (self.federation, self.collection(store)) {
            // JSON is YAML: the file is written as JSON and read as YAML.
            let file = store.join("stores.yaml");
            let embedder = rr_engine::local::open_settings(store).map_err(|e| e.to_string())?.embedder;
            let body = federation_file(&target, store, &store.join(EMBEDDED_HALF_DIR), &embedder)?;
            std::fs::write(&file, body).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
            return rr_engine::stores::engine(&file).map_err(|e| e.to_string());
        }
        if let Some(target) = self.collection(store) {
            let remote = rr_engine::local::chroma_store(&target).map_err(|e| e.to_string())?;
            let engine =
                rr_engine::local::engine_beside(remote, store, self.reranker.clone()).map_err(|e| e.to_string())?;
            return Ok(engine);
        }
        let open = rr_engine::local::open(store).map_err(|e| e.to_string())?;
        self.retrieval.engine(&open, self.reranker.clone())
    }
}

/// The `serve --stores` file of a federation: the embedded half and the
/// Chroma half with its lexical index, both embedded by `embedder` (no
/// query prefix, as the built-in models have none), merged as code.
fn federation_file(
    target: &rr_engine::local::ChromaTarget,
    index: &Path,
    half: &Path,
    embedder: &str,
) -> Result<String, String> {
    let file = serde_json::json!({
        "code_rank": true,
        "per_file": 0,
        "stores": {
            "embedded": {
                "kind": "embedded",
                "path": half,
                "query_prefix": "",
                "embedder": {"kind": embedder},
            },
            "chroma": {
                "kind": "chroma",
                "url": target.server_url,
                "collection": target.collection_name,
                "lexical_index": index,
                "query_prefix": "",
                "embedder": {"kind": embedder},
            },
        },
    });
    serde_json::to_string_pretty(&file).map_err(|e| e.to_string())
}
