//! What a search engine is built with, whoever configured it, and the one
//! function that builds an engine over a single store from it (the drop-in's
//! Chroma collection, an embedded store folder). The first stage is one
//! section with the same keys in a stores file (per store), a pipelines file
//! (per pipeline) and, as `--mode` and `--hybrid-*`, on the command line.

use std::sync::Arc;

use rr_core::retrieval::RetrievalSettingError;
use rr_core::{
    CodeRank, Embedder, HybridOptions, LexicalStore, PipelineOptions, RerankOptions, Reranker, RetrievalMode,
    SearchEngine, VectorStore,
};
use serde::Deserialize;

/// An engine over one store: its first stage, query prefix, rerank budget
/// and selection. The defaults are the drop-in's (dense, `query: `, two
/// results per file, the store's order).
#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub retrieval: RetrievalSettings,
    /// Prepended to the query before embedding.
    pub query_prefix: String,
    pub rerank: RerankOptions,
    /// Results one file gets before other files have had their turn (0: the ranking's order).
    pub per_file: usize,
    /// The code ranking of the candidates; `None` keeps the store's order.
    pub code_rank: Option<CodeRank>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            retrieval: RetrievalSettings::default(),
            query_prefix: PipelineOptions::default().query_prefix,
            rerank: RerankOptions::default(),
            per_file: rr_core::select::PER_FILE_FIRST_PASS,
            code_rank: None,
        }
    }
}

/// The search engine over `store`, searched with `embedder` and reranked by
/// `reranker`, as `settings` say. `key` names a retrieval setting in a
/// refusal as the operator wrote it ([`RetrievalSettings::resolve`]).
pub fn engine(
    store: Arc<dyn VectorStore>,
    embedder: Arc<dyn Embedder>,
    reranker: Option<Arc<dyn Reranker>>,
    settings: &EngineSettings,
    key: impl Fn(&str) -> String,
) -> Result<SearchEngine, RetrievalSettingError> {
    engine_with_index(store, None, embedder, reranker, settings, key)
}

/// [`engine`] with `lexical_index` ranking the store's chunks by their
/// words when the store cannot (a lexical index kept beside a Chroma
/// collection): the lexical and hybrid modes, the head read again and the
/// files a query names then work over that store as over the embedded one.
pub fn engine_with_index(
    store: Arc<dyn VectorStore>,
    lexical_index: Option<Arc<dyn LexicalStore>>,
    embedder: Arc<dyn Embedder>,
    reranker: Option<Arc<dyn Reranker>>,
    settings: &EngineSettings,
    key: impl Fn(&str) -> String,
) -> Result<SearchEngine, RetrievalSettingError> {
    let lexical = lexical_index.is_some() || store.lexical().is_some();
    let (retrieval, hybrid) = settings.retrieval.resolve(lexical, embedder.as_ref(), key)?;
    let options = PipelineOptions {
        query_prefix: settings.query_prefix.clone(),
        retrieval,
        hybrid,
        rerank: settings.rerank.clone(),
    };
    Ok(SearchEngine::with_lexical_index(embedder, store, lexical_index, reranker, options)
        .with_per_file(settings.per_file)
        .with_code_rank(settings.code_rank.clone()))
}

/// A retrieval mode and hybrid settings, each `None` when left out.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct RetrievalSettings {
    /// `retrieval`: dense, lexical or hybrid.
    #[serde(default, rename = "retrieval")]
    pub mode: Option<RetrievalMode>,
    #[serde(default, rename = "hybrid_weight_dense")]
    pub weight_dense: Option<f64>,
    #[serde(default, rename = "hybrid_weight_lexical")]
    pub weight_lexical: Option<f64>,
    #[serde(default, rename = "hybrid_rrf_k")]
    pub rrf_k: Option<f64>,
    #[serde(default, rename = "hybrid_depth")]
    pub depth: Option<usize>,
    #[serde(default, rename = "hybrid_rerank")]
    pub rerank: Option<usize>,
}

impl RetrievalSettings {
    /// The mode (default: [`RetrievalMode::default_for`] the store) and the
    /// hybrid options (defaults of [`HybridOptions::for_embedder`]), checked.
    /// `key` turns a file key (`hybrid_rrf_k`) into the name the operator
    /// wrote (`--hybrid-rrf-k`, `stores.docs.hybrid_rrf_k`). Hybrid settings
    /// with another mode are refused, since they would silently do nothing.
    pub fn resolve(
        &self,
        lexical: bool,
        embedder: &dyn Embedder,
        key: impl Fn(&str) -> String,
    ) -> Result<(RetrievalMode, HybridOptions), RetrievalSettingError> {
        let mode = self.mode.unwrap_or_else(|| RetrievalMode::default_for(lexical));
        let defaults = HybridOptions::for_embedder(embedder);
        let hybrid = HybridOptions {
            weight_dense: self.weight_dense.unwrap_or(defaults.weight_dense),
            weight_lexical: self.weight_lexical.unwrap_or(defaults.weight_lexical),
            rrf_k: self.rrf_k.unwrap_or(defaults.rrf_k),
            depth: self.depth.unwrap_or(defaults.depth),
            rerank: self.rerank.unwrap_or(defaults.rerank),
        };
        let given = [
            ("weight_dense", self.weight_dense.is_some()),
            ("weight_lexical", self.weight_lexical.is_some()),
            ("rrf_k", self.rrf_k.is_some()),
            ("depth", self.depth.is_some()),
            ("rerank", self.rerank.is_some()),
        ];
        let key = |name: &str| key(&format!("hybrid_{name}"));
        if mode != RetrievalMode::Hybrid
            && let Some((name, _)) = given.iter().find(|(_, set)| *set)
        {
            return Err(RetrievalSettingError::HybridOnly { key: key(name), mode });
        }
        hybrid.validate(key)?;
        Ok((mode, hybrid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_settings_are_checked_and_need_hybrid() {
        let hash = rr_hash_embed::HashEmbedder::new(256).unwrap();
        let key = |k: &str| format!("--{}", k.replace('_', "-"));
        let resolve = |settings: RetrievalSettings| settings.resolve(true, &hash, key);
        let (mode, hybrid) = resolve(RetrievalSettings::default()).unwrap();
        // The embedder's own dense weight, the other settings the defaults.
        let defaults = HybridOptions { weight_dense: 0.5, ..HybridOptions::default() };
        assert_eq!((mode, hybrid), (rr_core::retrieval::DEFAULT_LEXICAL_CAPABLE_MODE, defaults));
        let settings = RetrievalSettings { weight_dense: Some(1.0), ..Default::default() };
        assert_eq!(resolve(settings).unwrap().1, HybridOptions::default());
        let settings =
            RetrievalSettings { mode: Some(RetrievalMode::Hybrid), weight_lexical: Some(2.0), ..Default::default() };
        assert_eq!(resolve(settings).unwrap().1.weight_lexical, 2.0);
        let refusal = |settings| resolve(settings).unwrap_err().to_string();
        let dense = RetrievalSettings { mode: Some(RetrievalMode::Dense), rrf_k: Some(10.0), ..Default::default() };
        assert_eq!(refusal(dense), "--hybrid-rrf-k: applies to hybrid retrieval only, not dense");
        let bad = RetrievalSettings { mode: Some(RetrievalMode::Hybrid), depth: Some(0), ..Default::default() };
        assert_eq!(refusal(bad), "--hybrid-depth: must be at least 1");
        let dense = RetrievalSettings { mode: Some(RetrievalMode::Dense), rerank: Some(5), ..Default::default() };
        assert_eq!(refusal(dense), "--hybrid-rerank: applies to hybrid retrieval only, not dense");
        // 0 turns the second look off; any head is bounded by the fused list.
        for rerank in [0, usize::MAX] {
            let settings = RetrievalSettings { rerank: Some(rerank), ..Default::default() };
            assert_eq!(resolve(settings).unwrap().1.rerank, rerank);
        }
    }

    #[test]
    fn engines_are_built_as_their_settings_say() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn VectorStore> = Arc::new(rr_embedded::EmbeddedStore::open(dir.path()).unwrap());
        let hash: Arc<dyn Embedder> = Arc::new(rr_hash_embed::HashEmbedder::new(256).unwrap());
        // The defaults are the drop-in's: two results a file first, the store's order, `query: ` (and
        // dense retrieval, which a store without a lexical ranking, as Chroma, gets by default).
        let defaults = EngineSettings {
            retrieval: RetrievalSettings { mode: Some(RetrievalMode::Dense), ..Default::default() },
            ..Default::default()
        };
        let built = engine(store.clone(), hash.clone(), None, &defaults, str::to_owned).unwrap();
        assert_eq!((built.per_file(), built.code_rank()), (2, None));
        let first = &built.stores()[0];
        assert_eq!((first.query_prefix.as_str(), first.retriever.mode()), ("query: ", RetrievalMode::Dense));
        // Every setting reaches the engine.
        let settings = EngineSettings {
            retrieval: RetrievalSettings { rrf_k: Some(30.0), ..Default::default() },
            query_prefix: String::new(),
            rerank: RerankOptions { max_candidates: 7, ..RerankOptions::default() },
            per_file: 0,
            code_rank: Some(CodeRank::default()),
        };
        let built = engine(store.clone(), hash.clone(), None, &settings, str::to_owned).unwrap();
        assert_eq!((built.per_file(), built.code_rank()), (0, Some(&CodeRank::default())));
        let first = &built.stores()[0];
        assert_eq!((first.query_prefix.as_str(), first.retriever.mode()), ("", RetrievalMode::Hybrid));
        assert_eq!(first.retriever.hybrid().rrf_k, 30.0);
        // A refusal names the setting by the caller's key.
        let stray = EngineSettings {
            retrieval: RetrievalSettings { mode: Some(RetrievalMode::Dense), depth: Some(5), ..Default::default() },
            ..Default::default()
        };
        let refusal = engine(store, hash, None, &stray, |k| format!("stores.docs.{k}")).err().unwrap();
        assert_eq!(refusal.to_string(), "stores.docs.hybrid_depth: applies to hybrid retrieval only, not dense");
    }

    #[test]
    fn the_section_reads_the_file_keys() {
        let settings: RetrievalSettings =
            serde_json::from_str(r#"{"retrieval": "hybrid", "hybrid_rrf_k": 30, "hybrid_depth": 10}"#).unwrap();
        let expected = RetrievalSettings {
            mode: Some(RetrievalMode::Hybrid),
            rrf_k: Some(30.0),
            depth: Some(10),
            ..Default::default()
        };
        assert_eq!(settings, expected);
    }
}
