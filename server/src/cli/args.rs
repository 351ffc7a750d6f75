//! The flags several subcommands share: the store folder, the Chroma
//! target, and the embedded store's retrieval, selection and reranking.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use rr_core::registry::{FactoryContext, Registry, RegistryError};
use rr_core::{RerankChain, Reranker, SearchEngine};
use rr_engine::local::OpenStore;
use rr_engine::retrieval::{EngineSettings, RetrievalSettings};

#[derive(Debug, Args)]
pub struct StoreArg {
    /// Store folder [default: $REPO_RETRIEVER_STORE or ./.repo-retriever]
    #[arg(long)]
    pub store: Option<PathBuf>,
}

impl StoreArg {
    pub fn dir(&self) -> PathBuf {
        self.store.clone().unwrap_or_else(rr_engine::local::default_store_dir)
    }
}

/// Index into a Chroma collection instead of the embedded store.
#[derive(Debug, Args)]
pub struct ChromaArgs {
    /// Chroma server origin; when set, index writes to and serve reads from this collection (needs
    /// --collection-name, and an embedding endpoint unless --lexical-index names the embedder).
    #[arg(long, requires = "collection_name")]
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
    /// `settings` with the selection asked for; without one, their own.
    pub fn apply_to(&self, settings: &mut EngineSettings) {
        if let Some(n) = self.per_file {
            settings.per_file = n;
        }
        if let Some(on) = self.code_rank {
            settings.code_rank = on.then(rr_core::CodeRank::default);
        }
    }

    /// `engine` with the selection asked for; without one, the engine's own.
    pub fn apply(&self, engine: SearchEngine) -> SearchEngine {
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
    /// The flags as the retrieval section of a stores or pipelines file.
    pub fn settings(&self) -> RetrievalSettings {
        RetrievalSettings {
            mode: self.mode,
            weight_dense: self.hybrid_weight_dense,
            weight_lexical: self.hybrid_weight_lexical,
            rrf_k: self.hybrid_rrf_k,
            depth: self.hybrid_depth,
            rerank: self.hybrid_rerank,
        }
    }

    pub fn is_set(&self) -> bool {
        self.settings() != RetrievalSettings::default()
    }

    /// The search engine over `open` with these flags and `reranker`.
    pub fn engine(&self, open: &OpenStore, reranker: Option<Arc<dyn Reranker>>) -> Result<SearchEngine, String> {
        let mut settings = open.engine_settings();
        settings.retrieval = self.settings();
        self.selection.apply_to(&mut settings);
        open.engine(reranker, &settings, flag_name).map_err(|e| e.to_string())
    }
}

/// The flag of a hybrid setting (the only keys a refusal names):
/// `hybrid_rrf_k` is `--hybrid-rrf-k`.
pub(crate) fn flag_name(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
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

/// Appended to a `--rerank` kind's refusal of its default settings.
pub const RERANK_SETTINGS_HINT: &str = "--rerank uses a kind's default settings; \
     a reranker that needs settings is configured in a stores file for `serve --stores`, see docs/rerankers.md";

impl RerankArgs {
    /// The reranker of `--rerank KIND...` and `--rerank-min-score`: registry
    /// kinds built with their default settings (`{}`), run first to last, and
    /// the cut-off on the last stage's scores. `None` when no kind is given.
    ///
    /// Only kinds that work without settings make sense here (`bm25-fusion`,
    /// `mmr`, `cross-encoder` with `RR_CROSS_ENCODER_DIR`); the others fail
    /// with the factory's own message, and the error points to the stores
    /// file, where settings (and secrets, through `*_env` keys) have a place.
    pub fn reranker(&self) -> Result<Option<Arc<dyn Reranker>>, String> {
        let min_score = self.rerank_min_score;
        if self.kinds.is_empty() {
            return match min_score {
                Some(_) => Err("--rerank-min-score: needs --rerank, whose last stage's scores it cuts".into()),
                None => Ok(None),
            };
        }
        if let Some(v) = min_score.filter(|v| v.is_nan()) {
            return Err(format!("--rerank-min-score: must be a number, not {v}"));
        }
        let registry = Registry::builtin().map_err(|e| e.to_string())?;
        let ctx = FactoryContext::new(rr_engine::user_agent());
        let defaults = serde_json::Value::Object(serde_json::Map::new());
        let stages = self
            .kinds
            .iter()
            .map(|kind| {
                registry.reranker(kind, &defaults, &ctx).map_err(|e| match e {
                    RegistryError::Factory { .. } => format!("--rerank: {e} ({RERANK_SETTINGS_HINT})"),
                    other => format!("--rerank: {other}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if stages.len() == 1 && min_score.is_none() {
            return Ok(stages.into_iter().next());
        }
        let chain = RerankChain::new(stages).map_err(|e| e.to_string())?;
        Ok(Some(Arc::new(chain.with_min_score(min_score))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rerank(kinds: &[&str], min_score: Option<f64>) -> Result<Option<Arc<dyn Reranker>>, String> {
        RerankArgs { kinds: kinds.iter().map(|k| (*k).to_owned()).collect(), rerank_min_score: min_score }.reranker()
    }

    #[test]
    fn rerank_kinds_build_one_stage_or_a_chain() {
        assert!(rerank(&[], None).unwrap().is_none());
        let one = rerank(&["bm25-fusion"], None).unwrap().unwrap();
        assert_eq!((one.name(), one.min_score()), ("bm25-fusion", None));
        let chain = rerank(&["bm25-fusion", "mmr"], Some(0.25)).unwrap().unwrap();
        assert_eq!((chain.name(), chain.min_score()), ("bm25-fusion > mmr", Some(0.25)));
        // A cut-off needs a chain even for one stage.
        let cut = rerank(&["mmr"], Some(0.5)).unwrap().unwrap();
        assert_eq!((cut.name(), cut.min_score()), ("mmr", Some(0.5)));
    }

    #[test]
    fn rerank_flag_refusals_read_as_the_operator_sees_them() {
        let message = |kinds: &[&str], min_score| rerank(kinds, min_score).err().unwrap();
        assert_eq!(message(&[], Some(0.5)), "--rerank-min-score: needs --rerank, whose last stage's scores it cuts");
        assert_eq!(message(&["mmr"], Some(f64::NAN)), "--rerank-min-score: must be a number, not NaN");
        assert!(message(&["bm26"], None).starts_with("--rerank: unknown reranker kind \"bm26\"; valid kinds: "));
    }

    #[test]
    fn retrieval_settings_are_named_by_their_flags() {
        assert_eq!(flag_name("hybrid_rrf_k"), "--hybrid-rrf-k");
        assert_eq!(flag_name("hybrid_weight_dense"), "--hybrid-weight-dense");
    }
}
