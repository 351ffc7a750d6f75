//! The pipelines an evaluation compares, each run by the engine itself
//! ([`SearchEngine`], as `search` and `serve` run it), with each stage timed.
//!
//! A pipelines file (TOML) lists `[[pipeline]]` tables:
//!
//! ```toml
//! [[pipeline]]
//! name = "minilm + bm25-fusion"
//! store = ".repo-retriever"              # an embedded store folder, or a component table:
//! # store = { kind = "chroma", url = "http://localhost:8000", collection = "widgets" }
//! embedder = { kind = "hash" }           # optional for a store folder: default its own
//! reranker = [{ kind = "bm25-fusion" }, { kind = "mmr" }]   # optional; one table or a chain
//! candidates = 30                        # retrieved before reranking (default 30)
//! min_score = 0.1                        # optional: drop results the last stage scores below this
//! query_prefix = "query: "               # optional: default the store folder's, else "query: "
//! retrieval = "hybrid"                   # optional: dense, lexical or hybrid (default: the store's)
//! hybrid_weight_lexical = 2.0            # optional, hybrid only; also hybrid_weight_dense,
//!                                        # hybrid_rrf_k, hybrid_depth, hybrid_rerank
//! per_file = 2                           # optional: results a file gets before other files have
//!                                        # had their turn, as `search --per-file` (0: no limit);
//!                                        # default what `search` does: 0 over a store folder, else 2
//! code_rank = true                       # optional: the code ranking, as `search --code-rank`, or
//!                                        # its weights: code_rank = { rank_k = 10, docs = 1.0 };
//!                                        # default what `search` does: on over a store folder, else off
//! ```
//!
//! Each pipeline's results are selected as the `search` tool selects them
//! (repeated text dropped, `per_file`), so a row scores what a user is shown.
//!
//! Every comparison ends with the [`bm25`](super::bm25) baseline row over all
//! the chunks of the first embedded store folder it reads.
//!
//! Stores, embedders and rerankers are built through the plugin registry by
//! kind, with the same settings as a `serve --stores` file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use figment::Figment;
use figment::providers::{Format, Toml};
use rr_core::CodeRank;
use rr_core::registry::{FactoryContext, Registry};
use rr_core::select::PER_FILE_FIRST_PASS;
use rr_core::{
    CallContext, Candidate, Embedder, HybridOptions, PipelineOptions, RerankChain, RerankOptions, RetrievalMode,
    Retriever, SearchEngine, SearchRequest, VectorStore,
};
use serde::Deserialize;
use serde_json::Value;

use super::queries::EvalQuery;
use rr_engine::retrieval::RetrievalSettings;
use rr_engine::stores::Component;

/// Candidates retrieved before reranking when a pipeline does not say.
pub const DEFAULT_CANDIDATES: usize = 30;

/// The rerankers the default comparison puts after the store's default
/// retrieval mode, as chains of registry kinds (each mode without a
/// reranker has its own row before them).
pub const DEFAULT_CHAINS: [&[&str]; 3] = [&["bm25-fusion"], &["mmr"], &["bm25-fusion", "mmr"]];

/// The modes the default comparison runs without a reranker, in order.
pub const DEFAULT_MODES: [RetrievalMode; 3] = [RetrievalMode::Dense, RetrievalMode::Lexical, RetrievalMode::Hybrid];

/// The reranker kind added to the default comparison when its model folder is set.
pub const CROSS_ENCODER: (&str, &str) = ("cross-encoder", "RR_CROSS_ENCODER_DIR");

/// What a backend, a store or a reranker said, whatever its type.
type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A problem with the pipelines or with a query run through one, worded for
/// the operator: each names the file, pipeline, key or query it is about.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("pipelines file {}: not found", .0.display())]
    NotFound(PathBuf),
    /// The file does not parse, or a key has the wrong type (every problem
    /// figment found, on one line).
    #[error("pipelines file {}: {}", path.display(), one_line(source))]
    Invalid { path: PathBuf, source: Box<figment::Error> },
    #[error("pipelines file {}: no [[pipeline]] table", .0.display())]
    NoPipelines(PathBuf),
    #[error("pipeline[{index}]: the name {name:?} is used twice")]
    DuplicateName { index: usize, name: String },
    #[error("pipeline[{index}]: the name {name:?} is the baseline row's")]
    BaselineName { index: usize, name: String },
    /// A problem with the `index`th pipeline of a file.
    #[error("pipeline[{index}] {name:?}: {source}")]
    InPipeline { index: usize, name: String, source: Box<PipelineError> },
    #[error("name: must be non-empty")]
    EmptyName,
    /// The embedded store folder a pipeline reads could not be opened.
    #[error("store: {0}")]
    OpenStore(#[source] rr_engine::local::LocalError),
    /// A component (store, embedder, reranker stage) the registry would not
    /// build; `at` is its key, or the default chain's name.
    #[error("{at}: {source}")]
    Component { at: String, source: rr_core::registry::RegistryError },
    #[error("store: an embedded store needs a path")]
    NoStorePath,
    #[error("embedder: required when the store is not an embedded store folder")]
    NoEmbedder,
    /// Retrieval settings that do not go together (core's wording).
    #[error(transparent)]
    Retrieval(rr_core::retrieval::RetrievalSettingError),
    #[error("candidates: must be at least 1")]
    NoCandidates,
    #[error("min_score: needs a reranker, whose scores it cuts")]
    MinScoreWithoutReranker,
    #[error("min_score: must be a number")]
    MinScoreNotANumber,
    /// The chunks of the baseline's store could not be read.
    #[error("{}: {source}", super::bm25::NAME)]
    Baseline { source: Cause },
    /// A query failed.
    #[error("pipeline {pipeline:?}, query on line {line}: {source}")]
    Query { pipeline: String, line: usize, source: Cause },
    /// The default comparison's store folder could not be opened.
    #[error(transparent)]
    Local(#[from] rr_engine::local::LocalError),
}

/// Every problem figment found, on one line.
fn one_line(e: &figment::Error) -> String {
    e.clone().into_iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
}

/// One step-by-step search configuration.
pub struct Pipeline {
    pub name: String,
    pub embedder: Arc<dyn Embedder>,
    pub store: Arc<dyn VectorStore>,
    pub query_prefix: String,
    /// The first stage: dense, lexical or hybrid.
    pub retriever: Retriever,
    /// The rerank stages in order, with the cut-off; `None` for no reranking.
    pub reranker: Option<Arc<RerankChain>>,
    pub candidates: usize,
    /// Results one file gets before other files have had their turn when the
    /// results are selected ([`select_spread`]); 0 keeps the ranking's order.
    pub per_file: usize,
    /// The code ranking after the rerank stages ([`rr_core::code_rank`]).
    pub code_rank: Option<CodeRank>,
}

impl Pipeline {
    /// The names of the rerank stages, in order.
    pub fn stage_names(&self) -> Vec<String> {
        self.reranker.iter().flat_map(|c| c.stages()).map(|s| s.name().to_owned()).collect()
    }

    /// The mode that runs: the one asked for, or dense on a store that
    /// cannot rank lexically.
    pub fn retrieval_ran(&self) -> RetrievalMode {
        match self.store.lexical() {
            Some(_) => self.retriever.mode(),
            None => RetrievalMode::Dense,
        }
    }
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.name)
            .field("embedder", &self.embedder.name())
            .field("store", &self.store.name())
            .field("retrieval", &self.retriever.mode())
            .field("reranker", &self.reranker)
            .field("candidates", &self.candidates)
            .field("per_file", &self.per_file)
            .field("code_rank", &self.code_rank.is_some())
            .finish()
    }
}

/// The time each stage of one query took: the engine's own timings.
pub use rr_core::StageTimings as Timings;

impl Pipeline {
    /// The engine that runs this pipeline: the same [`SearchEngine`] as
    /// `search` and `serve`, with this pipeline's settings.
    pub fn engine(&self) -> SearchEngine {
        let options = PipelineOptions {
            query_prefix: self.query_prefix.clone(),
            retrieval: self.retriever.mode(),
            hybrid: *self.retriever.hybrid(),
            rerank: RerankOptions::default(),
        };
        let reranker = self.reranker.clone().map(|chain| chain as Arc<dyn rr_core::Reranker>);
        SearchEngine::new(self.embedder.clone(), self.store.clone(), reranker, options)
            .with_per_file(self.per_file)
            .with_code_rank(self.code_rank.clone())
            .with_candidates(Some(self.candidates))
    }

    /// One query through `engine` ([`engine`](Self::engine)), its first
    /// `limit` results as the `search` tool selects them, and the time each
    /// stage took.
    pub async fn run(
        &self,
        engine: &SearchEngine,
        query: &EvalQuery,
        limit: usize,
    ) -> Result<(Vec<Candidate>, Timings), PipelineError> {
        let request =
            SearchRequest { query: query.query.clone(), limit, filter: query.filter.clone(), source: String::new() };
        let outcome = engine
            .search_outcome(&request, &CallContext::default())
            .await
            .map_err(|e| PipelineError::Query { pipeline: self.name.clone(), line: query.line, source: Box::new(e) })?;
        Ok((outcome.results, outcome.timings))
    }
}

/// The default comparison: the embedded store at `store_dir` with its own
/// embedder in each of [`DEFAULT_MODES`], then its default mode crossed with
/// [`DEFAULT_CHAINS`] (and the cross-encoder when `RR_CROSS_ENCODER_DIR` is
/// set), then the [`bm25`](super::bm25) baseline. Chains with a kind this
/// binary does not register are left out; their names are returned as the
/// second value.
pub fn defaults(
    store_dir: &Path,
    registry: &Registry,
    ctx: &FactoryContext,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Pipeline>, Vec<String>), PipelineError> {
    let open = rr_engine::local::open(store_dir)?;
    let rr_engine::local::OpenStore { embedder, store, settings } = &open;
    let mut chains: Vec<Vec<&str>> = DEFAULT_CHAINS.iter().map(|c| c.to_vec()).collect();
    if env(CROSS_ENCODER.1).is_some_and(|v| !v.is_empty()) {
        chains.push(vec![CROSS_ENCODER.0]);
    }
    let known = registry.names(rr_core::PluginKind::Reranker);
    let pipeline = |name: String, mode: RetrievalMode, reranker: Option<Arc<RerankChain>>| Pipeline {
        name,
        embedder: embedder.clone(),
        store: store.clone(),
        query_prefix: settings.query_prefix.clone(),
        retriever: Retriever::new(mode, HybridOptions::for_embedder(embedder.as_ref())),
        reranker,
        candidates: DEFAULT_CANDIDATES,
        per_file: rr_engine::local::EMBEDDED_PER_FILE,
        code_rank: Some(CodeRank::default()),
    };
    let mut pipelines: Vec<Pipeline> =
        DEFAULT_MODES.iter().map(|&mode| pipeline(format!("{} {mode}", settings.embedder), mode, None)).collect();
    let mode = RetrievalMode::default_for(store.lexical().is_some());
    // What the code ranking adds to the default mode.
    pipelines.push(Pipeline {
        code_rank: None,
        ..pipeline(format!("{} {mode}, no code ranking", settings.embedder), mode, None)
    });
    // What the default mode loses to the reference's selection, which gives
    // each file two results before any gets a third.
    pipelines.push(Pipeline {
        per_file: PER_FILE_FIRST_PASS,
        ..pipeline(format!("{} {mode}, {PER_FILE_FIRST_PASS} per file", settings.embedder), mode, None)
    });
    let mut missing = Vec::new();
    for chain in chains {
        let name = std::iter::once(format!("{} {mode}", settings.embedder))
            .chain(chain.iter().map(|k| (*k).to_owned()))
            .collect::<Vec<_>>()
            .join(" + ");
        if chain.iter().any(|kind| !known.contains(kind)) {
            missing.push(name);
            continue;
        }
        let stages = chain
            .iter()
            .map(|kind| {
                registry
                    .reranker(kind, &Value::Object(Default::default()), ctx)
                    .map_err(|source| PipelineError::Component { at: name.clone(), source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        pipelines.push(pipeline(name, mode, RerankChain::new(stages).ok().map(Arc::new)));
    }
    pipelines.push(bm25_baseline(&open)?);
    Ok((pipelines, missing))
}

/// The [`bm25`](super::bm25) row over every chunk of `open`'s store.
pub fn bm25_baseline(open: &rr_engine::local::OpenStore) -> Result<Pipeline, PipelineError> {
    let chunks = open.store.chunks().map_err(|e| PipelineError::Baseline { source: Box::new(e) })?;
    Ok(Pipeline {
        name: super::bm25::NAME.into(),
        // Never called: the lexical mode of a lexical store embeds nothing.
        embedder: open.embedder.clone(),
        store: Arc::new(super::bm25::Bm25Index::new(chunks)),
        query_prefix: String::new(),
        retriever: Retriever::new(RetrievalMode::Lexical, HybridOptions::default()),
        reranker: None,
        candidates: DEFAULT_CANDIDATES,
        per_file: 0,
        code_rank: None,
    })
}

/// A pipeline's `store`: a folder, or a registry component.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StoreSpec {
    Folder(PathBuf),
    Component(Component),
}

/// A pipeline's `reranker`: one component or a chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RerankerSpec {
    One(Component),
    Chain(Vec<Component>),
}

/// One `[[pipeline]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    pub name: String,
    pub store: StoreSpec,
    #[serde(default)]
    pub embedder: Option<Component>,
    #[serde(default)]
    pub reranker: Option<RerankerSpec>,
    #[serde(default)]
    pub candidates: Option<usize>,
    #[serde(default)]
    pub min_score: Option<f64>,
    #[serde(default)]
    pub query_prefix: Option<String>,
    /// The first stage: `retrieval` and the `hybrid_*` keys.
    #[serde(flatten)]
    pub retrieval: RetrievalSettings,
    #[serde(default)]
    pub per_file: Option<usize>,
    #[serde(default)]
    pub code_rank: Option<CodeRankSpec>,
}

/// A pipeline's `code_rank`: on or off, or on with these weights (the
/// others at their defaults).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CodeRankSpec {
    On(bool),
    Weights(CodeRank),
}

/// The whole pipelines file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelinesFile {
    #[serde(default)]
    pub pipeline: Vec<PipelineSpec>,
}

/// Reads a pipelines file.
pub fn read(path: &Path) -> Result<PipelinesFile, PipelineError> {
    if !path.is_file() {
        return Err(PipelineError::NotFound(path.to_owned()));
    }
    let file: PipelinesFile = Figment::from(Toml::file(path))
        .extract()
        .map_err(|e| PipelineError::Invalid { path: path.to_owned(), source: Box::new(e) })?;
    if file.pipeline.is_empty() {
        return Err(PipelineError::NoPipelines(path.to_owned()));
    }
    Ok(file)
}

/// Builds every pipeline of a file, with `registry`'s kinds, and the
/// [`bm25`](super::bm25) baseline over the first embedded store folder a
/// pipeline reads (`None` when none does).
pub fn build(
    file: &PipelinesFile,
    registry: &Registry,
    ctx: &FactoryContext,
) -> Result<(Vec<Pipeline>, Option<Pipeline>), PipelineError> {
    let mut names = std::collections::HashSet::new();
    let mut baseline = None;
    let mut pipelines = Vec::with_capacity(file.pipeline.len());
    for (i, spec) in file.pipeline.iter().enumerate() {
        if !names.insert(spec.name.as_str()) {
            return Err(PipelineError::DuplicateName { index: i, name: spec.name.clone() });
        }
        if spec.name == super::bm25::NAME {
            return Err(PipelineError::BaselineName { index: i, name: spec.name.clone() });
        }
        let (pipeline, own) = build_one(spec, registry, ctx).map_err(|e| PipelineError::InPipeline {
            index: i,
            name: spec.name.clone(),
            source: Box::new(e),
        })?;
        if baseline.is_none()
            && let Some(own) = own
        {
            baseline = Some(bm25_baseline(&own)?);
        }
        pipelines.push(pipeline);
    }
    Ok((pipelines, baseline))
}

/// One pipeline, and the store folder it reads when it is one.
fn build_one(
    spec: &PipelineSpec,
    registry: &Registry,
    ctx: &FactoryContext,
) -> Result<(Pipeline, Option<rr_engine::local::OpenStore>), PipelineError> {
    if spec.name.trim().is_empty() {
        return Err(PipelineError::EmptyName);
    }
    let component = |c: &Component| Value::Object(c.settings.clone());
    let at = |key: &str| {
        let at = key.to_owned();
        move |source| PipelineError::Component { at, source }
    };
    // A store folder (or an `embedded` table naming one) knows its embedder and prefix.
    let folder = match &spec.store {
        StoreSpec::Folder(dir) => Some(dir.clone()),
        StoreSpec::Component(c) if c.kind == "embedded" => {
            c.settings.get("path").and_then(Value::as_str).map(PathBuf::from)
        }
        StoreSpec::Component(_) => None,
    };
    let own = match &folder {
        Some(dir) => Some(rr_engine::local::open(dir).map_err(PipelineError::OpenStore)?),
        None => None,
    };
    let store: Arc<dyn VectorStore> = match (&spec.store, &own) {
        (StoreSpec::Folder(_), Some(own)) => own.store.clone(),
        (StoreSpec::Component(c), _) if c.kind != "embedded" || own.is_some() => {
            registry.store(&c.kind, &component(c), ctx).map_err(at("store"))?
        }
        _ => return Err(PipelineError::NoStorePath),
    };
    let embedder = match (&spec.embedder, &own) {
        (Some(c), _) => registry.embedder(&c.kind, &component(c), ctx).map_err(at("embedder"))?,
        (None, Some(own)) => own.embedder.clone(),
        (None, None) => return Err(PipelineError::NoEmbedder),
    };
    let (mode, hybrid) = spec
        .retrieval
        .resolve(store.lexical().is_some(), embedder.as_ref(), str::to_owned)
        .map_err(PipelineError::Retrieval)?;
    let query_prefix = match (&spec.query_prefix, &own) {
        (Some(p), _) => p.clone(),
        (None, Some(own)) => own.settings.query_prefix.clone(),
        (None, None) => rr_core::PipelineOptions::default().query_prefix,
    };
    let chain = match &spec.reranker {
        None => Vec::new(),
        Some(RerankerSpec::One(c)) => vec![c.clone()],
        Some(RerankerSpec::Chain(cs)) => cs.clone(),
    };
    let stages = chain
        .iter()
        .enumerate()
        .map(|(n, c)| registry.reranker(&c.kind, &component(c), ctx).map_err(at(&format!("reranker[{n}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    let candidates = spec.candidates.unwrap_or(DEFAULT_CANDIDATES);
    if candidates == 0 {
        return Err(PipelineError::NoCandidates);
    }
    if spec.min_score.is_some() && stages.is_empty() {
        return Err(PipelineError::MinScoreWithoutReranker);
    }
    if spec.min_score.is_some_and(f64::is_nan) {
        return Err(PipelineError::MinScoreNotANumber);
    }
    let reranker = RerankChain::new(stages).ok().map(|c| Arc::new(c.with_min_score(spec.min_score)));
    let retriever = Retriever::new(mode, hybrid);
    // What `search` does over the store: a store folder is the embedded
    // store's search, anything else a stores file's.
    let per_file = spec.per_file.unwrap_or(match own {
        Some(_) => rr_engine::local::EMBEDDED_PER_FILE,
        None => PER_FILE_FIRST_PASS,
    });
    let code_rank = match spec.code_rank.clone() {
        None => own.is_some().then(CodeRank::default),
        Some(CodeRankSpec::On(on)) => on.then(CodeRank::default),
        Some(CodeRankSpec::Weights(weights)) => Some(weights),
    };
    let name = spec.name.clone();
    Ok((Pipeline { name, embedder, store, query_prefix, retriever, reranker, candidates, per_file, code_rank }, own))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_core::Reranker as _;

    fn build_file(body: &str) -> Result<Vec<Pipeline>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, body).unwrap();
        let file = read(&path).map_err(|e| e.to_string().replace(&path.display().to_string(), "P"))?;
        let registry = Registry::builtin().unwrap();
        build(&file, &registry, &FactoryContext::new("test")).map(|(p, _)| p).map_err(|e| e.to_string())
    }

    const CHROMA: &str = r#"store = { kind = "chroma", url = "http://127.0.0.1:1", collection = "c" }"#;

    #[test]
    fn a_store_table_with_an_embedder_and_a_chain() {
        let body = format!(
            "[[pipeline]]\nname = \"chain\"\n{CHROMA}\nembedder = {{ kind = \"hash\" }}\n\
             reranker = [{{ kind = \"bm25-fusion\" }}, {{ kind = \"mmr\", lambda = 0.5 }}]\nmin_score = 2\n\n\
             [[pipeline]]\nname = \"one\"\n{CHROMA}\nembedder = {{ kind = \"hash\" }}\nreranker = {{ kind = \"mmr\" }}\n\
             candidates = 7\nquery_prefix = \"\"\nper_file = 0\n"
        );
        let built = build_file(&body).unwrap();
        assert_eq!(built.len(), 2);
        assert_eq!(built[0].stage_names(), ["bm25-fusion", "mmr"]);
        assert_eq!(built[0].reranker.as_ref().unwrap().min_score(), Some(2.0));
        assert_eq!((built[0].candidates, built[0].query_prefix.as_str()), (DEFAULT_CANDIDATES, "query: "));
        assert_eq!(built[1].stage_names(), ["mmr"]);
        assert_eq!((built[1].candidates, built[1].query_prefix.as_str()), (7, ""));
        // A store table selects as a stores file does unless told otherwise.
        assert_eq!((built[0].per_file, built[1].per_file), (PER_FILE_FIRST_PASS, 0));
        assert!(built[0].code_rank.is_none(), "a store table keeps the store's order");
    }

    #[test]
    fn code_rank_is_on_off_or_weights() {
        let pipeline =
            |extra: &str| format!("[[pipeline]]\nname = \"p\"\n{CHROMA}\nembedder = {{ kind = \"hash\" }}\n{extra}\n");
        assert_eq!(build_file(&pipeline("code_rank = true")).unwrap()[0].code_rank, Some(CodeRank::default()));
        assert_eq!(build_file(&pipeline("code_rank = false")).unwrap()[0].code_rank, None);
        let weighted = build_file(&pipeline("code_rank = { rank_k = 10.0, docs = 1.0 }")).unwrap();
        assert_eq!(weighted[0].code_rank, Some(CodeRank { rank_k: 10.0, docs: 1.0, ..CodeRank::default() }));
        assert!(build_file(&pipeline("code_rank = { rank = 10.0 }")).is_err(), "an unknown weight is refused");
    }

    #[test]
    fn the_retrieval_section_is_read_and_checked_and_a_stray_key_refused() {
        let pipeline =
            |extra: &str| format!("[[pipeline]]\nname = \"p\"\n{CHROMA}\nembedder = {{ kind = \"hash\" }}\n{extra}\n");
        let built = build_file(&pipeline("retrieval = \"dense\"")).unwrap();
        assert_eq!(built[0].retrieval_ran(), RetrievalMode::Dense);
        let stray = build_file(&pipeline("hybrid_rrf_k = 5")).err().unwrap();
        assert!(stray.ends_with("hybrid_rrf_k: applies to hybrid retrieval only, not dense"), "{stray}");
        let unknown = build_file(&pipeline("hybrid_rrf = 5")).err().unwrap();
        assert!(unknown.contains("unknown field") && unknown.contains("hybrid_rrf"), "{unknown}");
    }

    #[test]
    fn configuration_errors_name_the_pipeline_and_the_key() {
        let one = |extra: &str| format!("[[pipeline]]\nname = \"a\"\n{CHROMA}\n{extra}");
        let cases = [
            (one(""), "pipeline[0] \"a\": embedder: required when the store is not an embedded store folder"),
            (
                one("embedder = { kind = \"hash\" }\nmin_score = 0.5"),
                "pipeline[0] \"a\": min_score: needs a reranker, whose scores it cuts",
            ),
            (
                one("embedder = { kind = \"hash\" }\ncandidates = 0"),
                "pipeline[0] \"a\": candidates: must be at least 1",
            ),
            (
                format!("{}\n{}", one("embedder = { kind = \"hash\" }"), one("embedder = { kind = \"hash\" }")),
                "pipeline[1]: the name \"a\" is used twice",
            ),
            (
                one("embedder = { kind = \"hash\" }\nreranker = { kind = \"mmr\", lambda = 2 }"),
                "pipeline[0] \"a\": reranker[0]: reranker \"mmr\": lambda must be between 0 and 1, not 2",
            ),
            (
                "name = \"x\"\n".to_owned(),
                "pipelines file P: unknown field: found `name`, expected ``pipeline`` for key \"default.name\" in P TOML file",
            ),
            (String::new(), "pipelines file P: no [[pipeline]] table"),
        ];
        for (body, want) in cases {
            assert_eq!(build_file(&body).err().as_deref(), Some(want), "{body}");
        }
    }
}
