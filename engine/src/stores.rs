//! `serve --stores <file>`: several named stores searched as one.
//!
//! The file (TOML, or YAML for `.yaml`/`.yml`) is layered with `figment`:
//! the file first, then environment variables `RR_CONFIG__<KEY>__<KEY>`
//! (e.g. `RR_CONFIG__STORES__DOCS__TIMEOUT_SECS=5`). It is independent of the
//! drop-in flags, environment and YAML, which keep their meaning.
//!
//! ```toml
//! plugins = ["/opt/rr/libmy_reranker.so"]   # dynamic plugins, loaded in order
//! retry_attempts = 3                         # per backend request
//! request_timeout_secs = 120                 # per attempt
//!
//! rerank_min_score = 0.2                     # optional: drop what the last stage scores below
//! per_file = 0                               # optional: results a file gets before other files
//!                                            # have had their turn; 0 keeps the merged order
//!                                            # (default 2, as the reference selects)
//! code_rank = true                           # optional: order the merged list again as code
//!                                            # (definitions, file names, source first; default
//!                                            # false, the stores' order)
//!
//! [[reranker]]                               # optional: reranks the fused list; one table,
//! kind = "bm25-fusion"                       # or an array of them applied in order (a chain)
//! [[reranker]]
//! kind = "openai"
//! api_url = "http://localhost:8080"
//! model = "bge-reranker"
//! api_key_env = "RERANK_API_KEY"
//!
//! [stores.widgets]
//! kind = "chroma"                            # a registered store kind
//! url = "http://localhost:8000"
//! collection = "acme-widgets"
//! token_env = "CHROMA_TOKEN"                 # secrets: environment only
//! sources = ["acme/*"]                       # optional: what the store can hold
//! timeout_secs = 10                          # optional, default 30
//! query_prefix = "query: "                   # optional, default "query: "
//! lexical_index = "/srv/rr/widgets-index"    # optional: the lexical index beside a store that
//!                                            # cannot rank words (index --lexical-index)
//! retrieval = "dense"                        # optional: dense, lexical or hybrid; default hybrid
//!                                            # for a store that can rank lexically (embedded,
//!                                            # Qdrant with a sparse_vector_name, or one with a
//!                                            # lexical_index), else dense
//! # hybrid_weight_dense = 1.0                # hybrid only: the fusion's weights, its k and
//! # hybrid_weight_lexical = 1.0              # how many candidates each ranking gives
//! # hybrid_rrf_k = 60
//! # hybrid_depth = 50
//! # hybrid_rerank = 20                       # embedded: the fused head read again (0: off)
//! [stores.widgets.embedder]                  # every store has its own
//! kind = "openai"
//! api_url = "http://localhost:8081"
//! model = "e5-small"
//! [stores.widgets.reranker]                  # optional: reorders this store's list before fusion
//! kind = "boost"                             # (a table or an array, as above; the store may
//!                                            # set its own rerank_min_score too)
//! ```
//!
//! In YAML a chain is a list under `reranker:`. A chain runs each stage on
//! the order the one before produced ([`RerankChain`]); a one-stage list is
//! that stage. `rerank_min_score` drops candidates whose score from the last
//! stage is below it (or NaN) before results are selected, so it is in that
//! model's units: a cross-encoder's logit, an API's 0..1 relevance, a fused
//! reciprocal-rank sum.
//!
//! Unknown keys and kinds are errors naming the key (with its store, and the
//! stage index in a chain: `reranker[1]`) and listing the valid choices.
//! Secrets are only ever read from environment variables named in the file,
//! and never printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use rr_core::federated::{DEFAULT_STORE_TIMEOUT, FederatedStore, SourcePattern};
use rr_core::registry::{FactoryContext, Registry, RegistryError};
use rr_core::{Embedder, RerankChain, RerankOptions, Reranker, SearchEngine};
use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde_json::{Map, Value};

/// A store, embedder or reranker section: its kind and the factory's settings.
#[derive(Debug, Clone, Deserialize)]
pub struct Component {
    pub kind: String,
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

/// A `reranker` key: one component table, or an array of them (a chain).
#[derive(Debug, Clone)]
pub enum RerankerSection {
    One(Component),
    Chain(Vec<Component>),
}

/// By hand rather than `#[serde(untagged)]`, whose one message ("data did
/// not match any variant") would hide which key of which stage is wrong.
impl<'de> Deserialize<'de> for RerankerSection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RerankerSection;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a reranker table or an array of reranker tables")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Component::deserialize(MapAccessDeserializer::new(map)).map(RerankerSection::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Vec::<Component>::deserialize(SeqAccessDeserializer::new(seq)).map(RerankerSection::Chain)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// One `[stores.<name>]` section.
#[derive(Debug, Clone, Deserialize)]
pub struct StoreSection {
    pub kind: String,
    pub embedder: Component,
    #[serde(default)]
    pub reranker: Option<RerankerSection>,
    #[serde(default)]
    pub rerank_min_score: Option<f64>,
    #[serde(default)]
    pub sources: Option<Vec<String>>,
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    #[serde(default)]
    pub query_prefix: Option<String>,
    /// The store's first stage: `retrieval` and the `hybrid_*` keys.
    #[serde(flatten)]
    pub retrieval: crate::retrieval::RetrievalSettings,
    /// The lexical index kept beside a store that cannot rank words (`index
    /// --chroma-url … --lexical-index DIR`): lexical and hybrid retrieval,
    /// the head read again and the files a query names then come from it.
    #[serde(default)]
    pub lexical_index: Option<std::path::PathBuf>,
    /// Everything else goes to the store's factory, which refuses unknown keys.
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoresFile {
    #[serde(default)]
    pub plugins: Vec<PathBuf>,
    #[serde(default)]
    pub retry_attempts: Option<u32>,
    #[serde(default)]
    pub request_timeout_secs: Option<f64>,
    #[serde(default)]
    pub reranker: Option<RerankerSection>,
    #[serde(default)]
    pub rerank_min_score: Option<f64>,
    #[serde(default)]
    pub rerank_candidate_multiplier: Option<usize>,
    #[serde(default)]
    pub rerank_max_candidates: Option<usize>,
    /// Results one file gets before other files have had their turn in the
    /// merged list (0: the merged order); default the reference's 2.
    #[serde(default)]
    pub per_file: Option<usize>,
    /// Order the merged list again as code ([`rr_core::code_rank`]); off by
    /// default, as the reference orders it.
    #[serde(default)]
    pub code_rank: bool,
    #[serde(default)]
    pub stores: BTreeMap<String, StoreSection>,
}

/// A problem with a stores file, worded for the operator: most name the key
/// (`stores.<name>.embedder`, `reranker[1]`) the problem is at.
#[derive(Debug, thiserror::Error)]
pub enum StoresError {
    #[error("stores file {}: not found", .0.display())]
    NotFound(PathBuf),
    /// The file does not parse, or a key has the wrong type (every problem
    /// figment found, on one line).
    #[error("stores file {}: {}", path.display(), one_line(source))]
    Invalid { path: PathBuf, source: Box<figment::Error> },
    #[error("stores file: no [stores.<name>] section")]
    NoStores,
    /// A duration key that is not a positive number of seconds.
    #[error("{key}: must be a positive number of seconds, not {value}")]
    NotSeconds { key: String, value: f64 },
    /// A `rerank_min_score` without a reranker to cut.
    #[error("{key}: needs a reranker, whose last stage's scores it cuts")]
    MinScoreWithoutReranker { key: String },
    /// A `rerank_min_score` that is NaN.
    #[error("{key}: must be a number, not {value}")]
    MinScoreNotANumber { key: String, value: f64 },
    /// A component (store, embedder, reranker stage) the registry would not build.
    #[error("{at}: {source}")]
    Component { at: String, source: RegistryError },
    /// A `sources` pattern that does not parse.
    #[error("{at}: {message}")]
    Sources { at: String, message: String },
    /// A `lexical_index` folder that does not open.
    #[error("{at}: {message}")]
    LexicalIndex { at: String, message: String },
    /// `reranker = []`.
    #[error("{at}: an empty array has no stage; leave the key out for no reranking")]
    EmptyChain { at: String },
    /// Retrieval settings that do not go together.
    #[error(transparent)]
    Retrieval(rr_core::retrieval::RetrievalSettingError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A dynamic plugin the file lists could not be loaded.
    #[error(transparent)]
    Plugin(#[from] rr_plugins::PluginError),
}

/// Reads and layers the file (see the module docs).
pub fn read(path: &Path) -> Result<StoresFile, StoresError> {
    if !path.is_file() {
        return Err(StoresError::NotFound(path.to_owned()));
    }
    let yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
    let figment =
        if yaml { Figment::from(serde_saphyr::figment::Yaml::file(path)) } else { Figment::from(Toml::file(path)) };
    figment
        .merge(Env::prefixed("RR_CONFIG__").split("__"))
        .extract()
        .map_err(|e| StoresError::Invalid { path: path.to_owned(), source: Box::new(e) })
}

fn one_line(e: &figment::Error) -> String {
    e.clone().into_iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
}

fn secs(key: &str, value: Option<f64>, default: Duration) -> Result<Duration, StoresError> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v)),
        Some(value) => Err(StoresError::NotSeconds { key: key.to_owned(), value }),
    }
}

/// The reranker that the `reranker` and `rerank_min_score` keys under
/// `prefix` (`""` or `stores.<name>.`) describe: the component itself when
/// there is one stage and no cut-off, else a chain.
fn reranker(
    prefix: &str,
    section: Option<&RerankerSection>,
    min_score: Option<f64>,
    registry: &Registry,
    ctx: &FactoryContext,
) -> Result<Option<Arc<dyn Reranker>>, StoresError> {
    let at = format!("{prefix}reranker");
    let min_key = format!("{prefix}rerank_min_score");
    let Some(section) = section else {
        return match min_score {
            Some(_) => Err(StoresError::MinScoreWithoutReranker { key: min_key }),
            None => Ok(None),
        };
    };
    if let Some(v) = min_score
        && v.is_nan()
    {
        return Err(StoresError::MinScoreNotANumber { key: min_key, value: v });
    }
    let build = |label: String, c: &Component| {
        registry
            .reranker(&c.kind, &Value::Object(c.settings.clone()), ctx)
            .map_err(|source| StoresError::Component { at: label, source })
    };
    let stages = match section {
        RerankerSection::One(c) => vec![build(at.clone(), c)?],
        RerankerSection::Chain(list) => {
            list.iter().enumerate().map(|(i, c)| build(format!("{at}[{i}]"), c)).collect::<Result<Vec<_>, _>>()?
        }
    };
    if stages.len() == 1 && min_score.is_none() {
        return Ok(stages.into_iter().next());
    }
    let chain = RerankChain::new(stages).map_err(|_| StoresError::EmptyChain { at })?;
    Ok(Some(Arc::new(chain.with_min_score(min_score))))
}

/// The factory context the file describes.
pub fn context(file: &StoresFile) -> Result<FactoryContext, StoresError> {
    let mut ctx = FactoryContext::new(crate::user_agent());
    if let Some(n) = file.retry_attempts {
        ctx.retry_attempts = n.max(1);
    }
    ctx.request_timeout = secs("request_timeout_secs", file.request_timeout_secs, ctx.request_timeout)?;
    Ok(ctx)
}

/// Builds the federated engine the file describes, with `registry`'s kinds.
pub fn build(file: &StoresFile, registry: &Registry, ctx: &FactoryContext) -> Result<SearchEngine, StoresError> {
    if file.stores.is_empty() {
        return Err(StoresError::NoStores);
    }
    let mut embedders: Vec<(String, Arc<dyn Embedder>)> = Vec::new();
    let mut stores = Vec::with_capacity(file.stores.len());
    for (name, section) in &file.stores {
        let at = format!("stores.{name}");
        let store = registry
            .store(&section.kind, &Value::Object(section.settings.clone()), ctx)
            .map_err(|source| StoresError::Component { at: at.clone(), source })?;
        // One instance per distinct embedder section, so a query is embedded once per model.
        let key = format!("{}\u{0}{}", section.embedder.kind, Value::Object(section.embedder.settings.clone()));
        let embedder = match embedders.iter().find(|(k, _)| *k == key) {
            Some((_, e)) => e.clone(),
            None => {
                let e = registry
                    .embedder(&section.embedder.kind, &Value::Object(section.embedder.settings.clone()), ctx)
                    .map_err(|source| StoresError::Component { at: format!("{at}.embedder"), source })?;
                embedders.push((key, e.clone()));
                e
            }
        };
        let lexical_index = match &section.lexical_index {
            Some(dir) => Some(rr_embedded::registry::shared(dir).map_err(|e| StoresError::LexicalIndex {
                at: format!("{at}.lexical_index"),
                message: e.to_string(),
            })?),
            None => None,
        };
        let (mode, hybrid) = section
            .retrieval
            .resolve(lexical_index.is_some() || store.lexical().is_some(), embedder.as_ref(), |key| {
                format!("stores.{name}.{key}")
            })
            .map_err(StoresError::Retrieval)?;
        let mut entry = FederatedStore::new(name.clone(), store, embedder).with_retrieval(mode, hybrid);
        if let Some(index) = lexical_index {
            entry = entry.with_lexical_index(index);
        }
        entry.model = section
            .embedder
            .settings
            .get("model")
            .and_then(Value::as_str)
            .map_or_else(|| section.embedder.kind.clone(), str::to_owned);
        if let Some(prefix) = &section.query_prefix {
            entry.query_prefix = prefix.clone();
        }
        entry.timeout = secs(&format!("stores.{name}.timeout_secs"), section.timeout_secs, DEFAULT_STORE_TIMEOUT)?;
        if let Some(sources) = &section.sources {
            entry.sources = Some(
                sources
                    .iter()
                    .map(|s| SourcePattern::parse(s))
                    .collect::<Result<_, _>>()
                    .map_err(|message| StoresError::Sources { at: at.clone(), message })?,
            );
        }
        entry.reranker =
            reranker(&format!("stores.{name}."), section.reranker.as_ref(), section.rerank_min_score, registry, ctx)?;
        stores.push(entry);
    }
    let reranker = reranker("", file.reranker.as_ref(), file.rerank_min_score, registry, ctx)?;
    let mut rerank = RerankOptions::default();
    if let Some(m) = file.rerank_candidate_multiplier {
        rerank.candidate_multiplier = m.max(1);
    }
    if let Some(m) = file.rerank_max_candidates {
        rerank.max_candidates = m.max(1);
    }
    let engine = SearchEngine::federated(stores, reranker, rerank)
        .with_code_rank(file.code_rank.then(rr_core::CodeRank::default));
    Ok(match file.per_file {
        Some(n) => engine.with_per_file(n),
        None => engine,
    })
}

/// The built-in registry plus the file's dynamic plugins.
pub fn registry(file: Option<&StoresFile>) -> Result<Registry, StoresError> {
    let mut registry = Registry::builtin()?;
    for path in file.map(|f| f.plugins.as_slice()).unwrap_or_default() {
        for entry in rr_plugins::load(path)? {
            registry.add(entry)?;
        }
    }
    Ok(registry)
}

/// Reads `path` and builds its engine.
pub fn engine(path: &Path) -> Result<SearchEngine, StoresError> {
    let file = read(path)?;
    let registry = registry(Some(&file))?;
    build(&file, &registry, &context(&file)?)
}

/// `repo-retriever plugins`: one line per factory, `kind  name  origin`.
pub fn list(registry: &Registry) -> String {
    let rows: Vec<(String, String, String)> =
        registry.entries().map(|e| (e.factory.kind().to_string(), e.name.clone(), e.origin.clone())).collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(4);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(4);
    let mut out = format!("{:w0$}  {:w1$}  ORIGIN\n", "KIND", "NAME");
    for (kind, name, origin) in rows {
        out.push_str(&format!("{kind:w0$}  {name:w1$}  {origin}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, body: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        (dir, path)
    }

    fn build_err(name: &str, body: &str) -> String {
        let (_dir, path) = write(name, body);
        match read(&path) {
            Err(e) => e.to_string(),
            Ok(file) => {
                let reg = registry(Some(&file)).unwrap();
                build(&file, &reg, &context(&file).unwrap()).err().map(|e| e.to_string()).unwrap_or_default()
            }
        }
    }

    const TWO: &str = r#"
[stores.a]
kind = "chroma"
url = "http://127.0.0.1:1"
collection = "a"
sources = ["acme/*"]
[stores.a.embedder]
kind = "hash"
[stores.b]
kind = "chroma"
url = "http://127.0.0.1:1"
collection = "b"
timeout_secs = 2.5
[stores.b.embedder]
kind = "hash"
"#;

    #[test]
    fn builds_two_stores_sharing_one_embedder() {
        let (_dir, path) = write("s.toml", TWO);
        let engine = engine(&path).unwrap();
        let fed = &engine;
        assert!(fed.is_federated());
        assert_eq!(fed.stores().len(), 2);
        assert!(Arc::ptr_eq(&fed.stores()[0].embedder, &fed.stores()[1].embedder));
        assert_eq!(fed.stores()[1].timeout, Duration::from_millis(2500));
        assert_eq!(fed.stores()[0].model, "hash");
        assert_eq!(fed.per_file(), rr_core::select::PER_FILE_FIRST_PASS, "the reference's selection by default");
        assert!(fed.code_rank().is_none(), "the stores' order by default");
        let (_dir, path) = write("s.toml", &format!("code_rank = true\n{TWO}"));
        assert_eq!(super::engine(&path).unwrap().code_rank(), Some(&rr_core::CodeRank::default()));
        let (_dir, path) = write("s.toml", &format!("per_file = 0\n{TWO}"));
        assert_eq!(super::engine(&path).unwrap().per_file(), 0);
    }

    #[test]
    fn file_level_errors_name_the_file_or_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        assert_eq!(read(&missing).unwrap_err().to_string(), format!("stores file {}: not found", missing.display()));
        assert_eq!(build_err("s.toml", "retry_attempts = 2\n"), "stores file: no [stores.<name>] section");
        let (_dir, path) = write("s.toml", &format!("request_timeout_secs = 0\n{TWO}"));
        assert_eq!(
            context(&read(&path).unwrap()).unwrap_err().to_string(),
            "request_timeout_secs: must be a positive number of seconds, not 0"
        );
        let slow = TWO.replace("timeout_secs = 2.5", "timeout_secs = -1");
        assert_eq!(build_err("s.toml", &slow), "stores.b.timeout_secs: must be a positive number of seconds, not -1");
        let sources = TWO.replace("sources = [\"acme/*\"]", "sources = [\"acme\"]");
        assert_eq!(
            build_err("s.toml", &sources),
            "stores.a: source pattern \"acme\" must be owner/repository or owner/repository@branch (* as a whole part matches any)"
        );
    }

    #[test]
    fn yaml_works_too() {
        let yaml =
            "stores:\n  a:\n    kind: embedded\n    path: /nonexistent\n    embedder: {kind: hash, dimension: 8}\n";
        assert_eq!(build_err("s.yaml", yaml), "stores.a: store \"embedded\": path: /nonexistent is not a store folder");
    }

    #[test]
    fn unknown_keys_and_kinds_name_the_key_and_list_choices() {
        let typo = TWO.replace("collection = \"b\"", "colection = \"b\"");
        assert_eq!(
            build_err("s.toml", &typo),
            "stores.b: store \"chroma\": unknown field `colection`, expected one of `url`, `tenant`, `database`, `collection`, `token_env`"
        );
        let kind =
            TWO.replace("kind = \"chroma\"\nurl = \"http://127.0.0.1:1\"\ncollection = \"b\"", "kind = \"chromadb\"");
        let msg = build_err("s.toml", &kind);
        assert!(msg.starts_with("stores.b: unknown store kind \"chromadb\"; valid kinds: chroma, embedded"), "{msg}");
        let emb = TWO.replacen("kind = \"hash\"", "kind = \"hsh\"", 1);
        let msg = build_err("s.toml", &emb);
        assert!(
            msg.starts_with("stores.a.embedder: unknown embedder kind \"hsh\"; valid kinds: hash, minilm, openai"),
            "{msg}"
        );
        let top = format!("colour = 1\n{TWO}");
        let msg = build_err("s.toml", &top);
        assert!(msg.contains("unknown field: found `colour`, expected `one of"), "{msg}");
        let secret =
            TWO.replacen("kind = \"hash\"", "kind = \"openai\"\napi_url = \"x\"\nmodel = \"m\"\napi_key = \"sk-1\"", 1);
        let msg = build_err("s.toml", &secret);
        assert!(msg.contains("unknown field `api_key`, expected one of `api_url`, `model`, `api_key_env`"), "{msg}");
        assert!(!msg.contains("sk-1"));
    }

    /// A reranker's name and cut-off.
    type Described = Option<(String, Option<f64>)>;

    fn describe(r: Option<&Arc<dyn Reranker>>) -> Described {
        r.map(|r| (r.name().to_owned(), r.min_score()))
    }

    /// The fused list's reranker and each store's.
    fn rerankers(name: &str, body: &str) -> (Described, Vec<Described>) {
        let (_dir, path) = write(name, body);
        let engine = engine(&path).unwrap();
        let fed = &engine;
        assert!(fed.is_federated());
        (describe(fed.reranker()), fed.stores().iter().map(|s| describe(s.reranker.as_ref())).collect())
    }

    #[test]
    fn a_reranker_array_is_a_chain_with_its_cut_off() {
        let body = format!(
            "rerank_min_score = 0.2\n[[reranker]]\nkind = \"bm25-fusion\"\nk = 10\n[[reranker]]\nkind = \"mmr\"\nlambda = 0.5\n{}",
            TWO.replacen(
                "[stores.a.embedder]",
                "rerank_min_score = -1.5\nreranker = [{kind = \"mmr\"}, {kind = \"bm25-fusion\"}]\n[stores.a.embedder]",
                1
            )
        );
        let (top, per_store) = rerankers("s.toml", &body);
        assert_eq!(top, Some(("bm25-fusion > mmr".into(), Some(0.2))));
        assert_eq!(per_store[0], Some(("mmr > bm25-fusion".into(), Some(-1.5))));
        assert_eq!(per_store[1], None);
    }

    #[test]
    fn a_yaml_list_is_a_chain_too() {
        let yaml = r#"
rerank_min_score: 0.5
reranker:
  - kind: bm25-fusion
    weight_lexical: 2
  - kind: mmr
stores:
  a:
    kind: chroma
    url: http://127.0.0.1:1
    collection: a
    embedder: {kind: hash}
    reranker: [{kind: mmr}]
"#;
        let (top, per_store) = rerankers("s.yaml", yaml);
        assert_eq!(top, Some(("bm25-fusion > mmr".into(), Some(0.5))));
        // One stage and no cut-off: the stage itself, not a chain around it.
        assert_eq!(per_store[0], Some(("mmr".into(), None)));
    }

    #[test]
    fn one_table_is_one_reranker_and_a_cut_off_wraps_it() {
        let one = format!("[reranker]\nkind = \"mmr\"\n{TWO}");
        assert_eq!(rerankers("s.toml", &one).0, Some(("mmr".into(), None)));
        let cut = format!("rerank_min_score = 2\n{one}");
        assert_eq!(rerankers("s.toml", &cut).0, Some(("mmr".into(), Some(2.0))));
    }

    #[test]
    fn chain_errors_name_the_stage() {
        let bad_kind = format!("[[reranker]]\nkind = \"bm25-fusion\"\n[[reranker]]\nkind = \"bm26\"\n{TWO}");
        let msg = build_err("s.toml", &bad_kind);
        assert!(msg.starts_with("reranker[1]: unknown reranker kind \"bm26\"; valid kinds: bm25-fusion, "), "{msg}");
        assert!(msg.contains(", mmr, ") && msg.contains("openai"), "{msg}");
        let bad_key = TWO.replacen(
            "[stores.b.embedder]",
            "reranker = [{kind = \"bm25-fusion\"}, {kind = \"mmr\", lamda = 1}]\n[stores.b.embedder]",
            1,
        );
        assert_eq!(
            build_err("s.toml", &bad_key),
            "stores.b.reranker[1]: reranker \"mmr\": unknown field `lamda`, expected `lambda`"
        );
        let bad_value = format!("[reranker]\nkind = \"mmr\"\nlambda = 2\n{TWO}");
        assert_eq!(
            build_err("s.toml", &bad_value),
            "reranker: reranker \"mmr\": lambda must be between 0 and 1, not 2"
        );
        assert_eq!(
            build_err("s.toml", &format!("reranker = []\n{TWO}")),
            "reranker: an empty array has no stage; leave the key out for no reranking"
        );
        assert_eq!(
            build_err("s.toml", &format!("rerank_min_score = 0.2\n{TWO}")),
            "rerank_min_score: needs a reranker, whose last stage's scores it cuts"
        );
        let nan = TWO.replacen(
            "[stores.a.embedder]",
            "rerank_min_score = nan\nreranker = {kind = \"mmr\"}\n[stores.a.embedder]",
            1,
        );
        assert_eq!(build_err("s.toml", &nan), "stores.a.rerank_min_score: must be a number, not NaN");
        let msg = build_err("s.toml", &format!("reranker = \"mmr\"\n{TWO}"));
        assert!(msg.contains("expected a reranker table or an array of reranker tables"), "{msg}");
        let msg = build_err("s.toml", &format!("[[reranker]]\nlambda = 1\n{TWO}"));
        assert!(msg.contains("missing field `kind`"), "{msg}");
    }

    #[test]
    fn each_store_has_its_retrieval_mode() {
        let body = TWO.replacen(
            "sources = [\"acme/*\"]",
            "sources = [\"acme/*\"]\nretrieval = \"hybrid\"\nhybrid_weight_lexical = 2\nhybrid_rerank = 5",
            1,
        );
        let (_dir, path) = write("s.toml", &body);
        let engine = engine(&path).unwrap();
        let fed = &engine;
        assert!(fed.is_federated());
        // Chroma cannot rank lexically: hybrid is kept as asked, and runs dense.
        assert_eq!(fed.stores()[0].retriever.mode(), rr_core::RetrievalMode::Hybrid);
        assert_eq!(fed.stores()[0].retriever.hybrid().weight_lexical, 2.0);
        assert_eq!(fed.stores()[0].retriever.hybrid().rerank, 5);
        assert_eq!(fed.stores()[1].retriever.hybrid().rerank, rr_core::retrieval::DEFAULT_HYBRID_RERANK);
        assert_eq!(fed.stores()[1].retriever.mode(), rr_core::RetrievalMode::Dense);
        let bad = TWO.replacen("timeout_secs = 2.5", "timeout_secs = 2.5\nretrieval = \"bm25\"", 1);
        let msg = build_err("s.toml", &bad);
        assert!(msg.contains("unknown variant: found `bm25`, expected `one of `dense`, `lexical`, `hybrid``"), "{msg}");
        let stray = TWO.replacen("timeout_secs = 2.5", "timeout_secs = 2.5\nhybrid_rrf_k = 5", 1);
        assert_eq!(build_err("s.toml", &stray), "stores.b.hybrid_rrf_k: applies to hybrid retrieval only, not dense");
        let stray = TWO.replacen("timeout_secs = 2.5", "timeout_secs = 2.5\nhybrid_rerank = 0", 1);
        assert_eq!(build_err("s.toml", &stray), "stores.b.hybrid_rerank: applies to hybrid retrieval only, not dense");
        let zero = TWO.replacen(
            "timeout_secs = 2.5",
            "timeout_secs = 2.5\nretrieval = \"hybrid\"\nhybrid_weight_dense = 0\nhybrid_weight_lexical = 0",
            1,
        );
        assert_eq!(
            build_err("s.toml", &zero),
            "stores.b.hybrid_weight_dense and stores.b.hybrid_weight_lexical cannot both be 0"
        );
    }

    #[test]
    fn a_lexical_index_beside_a_store_makes_it_hybrid_by_default() {
        let index = tempfile::tempdir().unwrap();
        let body = TWO.replacen(
            "sources = [\"acme/*\"]",
            &format!("sources = [\"acme/*\"]\nlexical_index = {:?}", index.path().to_str().unwrap()),
            1,
        );
        let (_dir, path) = write("s.toml", &body);
        let fed = engine(&path).unwrap();
        assert_eq!(fed.stores()[0].retriever.mode(), rr_core::RetrievalMode::Hybrid);
        assert!(fed.stores()[0].lexical().is_some());
        // The store without one runs dense, as before.
        assert_eq!(fed.stores()[1].retriever.mode(), rr_core::RetrievalMode::Dense);
        assert!(fed.stores()[1].lexical().is_none());
        let file = index.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let bad = TWO.replacen(
            "sources = [\"acme/*\"]",
            &format!("sources = [\"acme/*\"]\nlexical_index = {:?}", file.to_str().unwrap()),
            1,
        );
        let msg = build_err("s.toml", &bad);
        assert!(msg.starts_with("stores.a.lexical_index: "), "{msg}");
    }

    #[test]
    fn missing_secret_names_the_variable_only() {
        let body =
            TWO.replacen("collection = \"a\"", "collection = \"a\"\ntoken_env = \"RR_TEST_SURELY_UNSET_TOKEN\"", 1);
        assert_eq!(
            build_err("s.toml", &body),
            "stores.a: store \"chroma\": token_env: environment variable RR_TEST_SURELY_UNSET_TOKEN is not set or empty"
        );
    }

    #[test]
    fn builtins_are_listed() {
        let listing = list(&Registry::builtin().unwrap());
        for row in ["store     chroma", "store     embedded", "embedder  hash", "embedder  openai", "reranker  openai"]
        {
            assert!(listing.contains(row), "{row} in\n{listing}");
        }
    }
}
