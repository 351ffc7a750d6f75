//! The embedded default: index a folder into a store on disk and search it,
//! with no server to install.
//!
//! A store folder holds the SQLite database of `rr-embedded` and a small
//! `repo-retriever.json` that records which embedder wrote the vectors:
//! vectors are model-specific, so a search must embed its query with the
//! same model, and a mismatch is refused with a clear error instead of
//! returning meaningless neighbours.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::retrieval::EngineSettings;
use rr_chroma::{ChromaConfig, ChromaStore};
use rr_core::registry::{FactoryContext, Registry, RegistryError};
use rr_core::{BackendError, EmbeddedChunk, Embedder, IndexStore, Reranker, SearchEngine, VectorStore};
use rr_embedded::{EmbeddedStore, FileKey, StoredFile, WriteBatch};
use rr_http::{HttpClient, HttpSettings};
use rr_indexer::sync::{SyncOptions, SyncPhase, SyncSummary};
use rr_indexer::{BuildStream, ChunkingScheme, Identity, IndexOptions, StreamSync};
use rr_openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
use serde::{Deserialize, Serialize};

/// The store folder used when none is given: `$REPO_RETRIEVER_STORE`, else
/// `.repo-retriever` in the working directory.
pub fn default_store_dir() -> PathBuf {
    std::env::var_os("REPO_RETRIEVER_STORE").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".repo-retriever"))
}

/// The settings file in every store folder (which embedder wrote the vectors); `eval suite --reindex`
/// removes only a folder that holds it.
pub const SETTINGS_FILE: &str = "repo-retriever.json";

/// The chunking of a new embedded store: the semantic one, which finds more
/// than the reference's on hand-written queries (`docs/evaluation.md`).
/// Chroma targets keep the reference's unless asked.
pub const DEFAULT_EMBEDDED_CHUNKING: ChunkingScheme = ChunkingScheme::Semantic;

/// What a store was written with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSettings {
    pub embedder: String,
    pub dimension: usize,
    pub query_prefix: String,
    pub document_prefix: String,
    /// The chunking of its records; a settings file without it predates the
    /// choice, and its store holds the reference's records.
    #[serde(default)]
    pub chunking: ChunkingScheme,
    /// The OpenAI-compatible endpoint of an `openai` store; absent for the
    /// built-in embedders. Its API key is never written here: it is read
    /// from [`EMBEDDING_API_KEY_ENV`] on every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EmbeddingEndpoint>,
}

/// The OpenAI-compatible embeddings endpoint a store's vectors come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingEndpoint {
    /// The origin `/v1/embeddings` is appended to.
    pub api_url: String,
    pub model: String,
}

/// Where an `openai` store's API key comes from, as for a Chroma target: the
/// environment only, so it reaches neither the settings file nor a log.
pub const EMBEDDING_API_KEY_ENV: &str = "CHROMA_REPO_SEARCH_EMBEDDING_API_KEY";

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            embedder: "hash".into(),
            dimension: 256,
            query_prefix: "query: ".into(),
            document_prefix: "passage: ".into(),
            chunking: DEFAULT_EMBEDDED_CHUNKING,
            endpoint: None,
        }
    }
}

/// A failure of a local command (`index`, `search`, `serve` on a store
/// folder, a watch). Each message is worded for the operator, who reads it as
/// `Error: <message>`; the tests pin them.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The folder has no settings file: nothing was indexed into it.
    #[error("no index at {}: run `repo-retriever index <folder> --store {}` first", .0.display(), .0.display())]
    NoIndex(PathBuf),
    /// The settings file is not what this build writes.
    #[error("{} is not a valid store settings file: {source}", path.display())]
    InvalidSettings { path: PathBuf, source: serde_json::Error },
    /// A file or folder could not be read, written or created; `action` says
    /// which (`read`, `write`, `create the store folder`, `write the manifest`).
    #[error("cannot {action} {}: {source}", path.display())]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    /// The store's database could not be opened.
    #[error("cannot open the store at {}: {source}", path.display())]
    OpenStore { path: PathBuf, source: rr_embedded::EmbeddedError },
    /// The store refused the texts of the indexed files.
    #[error("cannot store the indexed files: {0}")]
    StoreFiles(#[source] rr_embedded::EmbeddedError),
    /// The store's vectors are not as long as its embedder's.
    #[error(
        "store {} holds {held}-dimensional vectors but its embedder \"{embedder}\" makes {made}-dimensional ones",
        path.display()
    )]
    StoreDimension { path: PathBuf, held: usize, embedder: String, made: usize },
    /// An embedder name that is not one of [`EMBEDDERS`].
    #[error("unknown embedder \"{0}\"; valid choices: {EMBEDDERS}")]
    UnknownEmbedder(String),
    /// An `openai` store, or a request for one, without its endpoint.
    #[error("the openai embedder needs an embedding API URL and model")]
    NoEndpoint,
    /// An endpoint given with another embedder than `openai`.
    #[error("an embedding API URL and model are for the openai embedder, not \"{0}\"")]
    EndpointNotOpenAi(String),
    /// The hash embedder refused the store's dimension.
    #[error("invalid hash embedder dimension {0}")]
    HashDimension(usize),
    /// A model embedder (`potion`, `minilm`) could not be loaded.
    #[error("cannot load the {embedder} embedder: {message}")]
    LoadEmbedder { embedder: &'static str, message: String },
    /// The `openai` embedder's settings were refused.
    #[error("cannot set up the openai embedder: {0}")]
    OpenAiSetup(String),
    /// The installed minilm model makes vectors of another length than the store's.
    #[error("the minilm model at {} makes {made}-dimensional vectors, the store expects {expected}", dir.display())]
    ModelDimension { dir: PathBuf, made: usize, expected: usize },
    /// Another embedder asked of an existing store.
    #[error(
        "the store at {} was created with the \"{kept}\" embedder, not \"{asked}\": a store keeps its embedder \
         (index into another --store to use \"{asked}\")",
        store.display()
    )]
    KeepsEmbedder { store: PathBuf, kept: String, asked: String },
    /// Another query or document prefix asked of an existing store.
    #[error(
        "the store at {} was created with the {what} {kept:?}, not {asked:?}: a store keeps its prefixes",
        store.display()
    )]
    KeepsPrefix { store: PathBuf, what: &'static str, kept: String, asked: String },
    /// Another embedding endpoint asked of an existing store; `kept` describes
    /// its own, both URLs without credentials.
    #[error(
        "the store at {} was created with {kept}, not the model {asked_model:?} at {asked_url}: a store keeps its embedder",
        store.display()
    )]
    KeepsEndpoint { store: PathBuf, kept: String, asked_model: String, asked_url: String },
    /// Retrieval settings that do not go together.
    #[error(transparent)]
    Retrieval(#[from] rr_core::retrieval::RetrievalSettingError),
    /// An index request with neither a store folder nor a Chroma target.
    #[error("no store to index into")]
    NoTarget,
    /// A watch over a Chroma target.
    #[error("a watch writes into the embedded store")]
    WatchNeedsEmbedded,
    /// The file-system notifications of a watched folder could not be set up.
    #[error("cannot watch {}: {source}", path.display())]
    Watch { path: PathBuf, source: notify_debouncer_full::notify::Error },
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Index(#[from] rr_indexer::IndexError),
    #[error(transparent)]
    Sync(#[from] rr_indexer::SyncError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Http(#[from] rr_http::HttpError),
    #[error(transparent)]
    Chroma(#[from] rr_chroma::ChromaError),
    /// A lexical index whose embedder does not make the collection's vectors.
    #[error(
        "the Chroma collection \"{collection}\" holds {held}-dimensional vectors, but the lexical index at {} \
         embeds queries with the \"{embedder}\" embedder into {made} dimensions: serve the collection with the \
         index written beside it, or give a new --lexical-index folder",
        index.display()
    )]
    CollectionDimension { collection: String, held: usize, index: PathBuf, embedder: String, made: usize },
    /// The Chroma collection a lexical index is refreshed from does not exist.
    #[error("the Chroma collection \"{0}\" does not exist")]
    NoCollection(String),
    #[error(transparent)]
    EmptyChain(#[from] rr_core::EmptyChain),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A task of the blocking pool panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

impl LocalError {
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> LocalError {
        let path = path.to_owned();
        move |source| LocalError::Io { action, path, source }
    }
}

pub(crate) fn read_settings(dir: &Path) -> Result<Option<StoreSettings>, LocalError> {
    let path = dir.join(SETTINGS_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| LocalError::InvalidSettings { path: path.clone(), source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LocalError::io("read", &path)(e)),
    }
}

/// Writes the settings atomically (temp file + rename), so a crash never
/// leaves a half-written file behind.
pub(crate) fn write_settings(dir: &Path, settings: &StoreSettings) -> Result<(), LocalError> {
    let path = dir.join(SETTINGS_FILE);
    let tmp = dir.join(format!("{SETTINGS_FILE}.tmp"));
    let body = serde_json::to_vec_pretty(settings)?;
    std::fs::write(&tmp, body).and_then(|_| std::fs::rename(&tmp, &path)).map_err(LocalError::io("write", &path))
}

/// The embedder a store was written with, built by kind through the registry.
pub(crate) fn embedder_for(settings: &StoreSettings) -> Result<Arc<dyn Embedder>, LocalError> {
    let registry = Registry::builtin()?;
    let ctx = FactoryContext::new(crate::user_agent());
    let message = |e: RegistryError| match e {
        RegistryError::Factory { message, .. } => message,
        other => other.to_string(),
    };
    match settings.embedder.as_str() {
        "hash" => registry
            .embedder("hash", &serde_json::json!({ "dimension": settings.dimension }), &ctx)
            .map_err(|_| LocalError::HashDimension(settings.dimension)),
        "potion" => registry
            .embedder("potion", &serde_json::json!({}), &ctx)
            .map_err(|e| LocalError::LoadEmbedder { embedder: "potion", message: message(e) }),
        "minilm" => {
            let failed = |message: String| LocalError::LoadEmbedder { embedder: "minilm", message };
            let dir = rr_minilm::locate().map_err(|e| failed(e.to_string()))?;
            let embedder = registry
                .embedder("minilm", &serde_json::json!({ "dir": dir }), &ctx)
                .map_err(|e| failed(message(e)))?;
            if let Some(dimension) = embedder.dimension()
                && dimension != settings.dimension
            {
                return Err(LocalError::ModelDimension { dir, made: dimension, expected: settings.dimension });
            }
            Ok(embedder)
        }
        "openai" => {
            let Some(endpoint) = &settings.endpoint else { return Err(LocalError::NoEndpoint) };
            let mut config = serde_json::json!({ "api_url": endpoint.api_url, "model": endpoint.model });
            // A local server usually wants no key; the registry refuses a
            // named variable that is unset, so it is named only when set.
            if std::env::var_os(EMBEDDING_API_KEY_ENV).is_some_and(|v| !v.is_empty()) {
                config["api_key_env"] = EMBEDDING_API_KEY_ENV.into();
            }
            registry.embedder("openai", &config, &ctx).map_err(|e| LocalError::OpenAiSetup(message(e)))
        }
        other => Err(LocalError::UnknownEmbedder(other.to_owned())),
    }
}

/// The embedders a new embedded store can be created with.
pub const EMBEDDERS: &str = "potion, hash, minilm, openai";

/// The embedder of a new embedded store when none is asked for: the static
/// model compiled in, which needs nothing installed and indexes as fast as
/// `hash` (docs/evaluation.md, "The embedder").
pub const DEFAULT_EMBEDDER: &str = "potion";

/// The settings of a new store with embedder `name`, with the query and
/// document prefixes its model was trained with: none for all-MiniLM-L6-v2
/// (a sentence-transformers model that saw no prefix) and potion-base-8M
/// (distilled from one), `query: ` /
/// `passage: ` for `hash`, which ignores them but whose records and the
/// reference indexer's carry `passage: `, as E5-style models expect.
/// `openai` is any OpenAI-compatible `endpoint`, which it alone takes, with
/// the prefixes of the reference deployment; its dimension is the model's,
/// fixed by the store at the first write, so 0 here means "whatever the
/// model makes".
pub fn new_store_settings(name: &str, endpoint: Option<EmbeddingEndpoint>) -> Result<StoreSettings, LocalError> {
    match (name, endpoint) {
        ("openai", Some(endpoint)) => Ok(StoreSettings {
            embedder: "openai".into(),
            dimension: 0,
            endpoint: Some(endpoint),
            ..StoreSettings::default()
        }),
        ("openai", None) => Err(LocalError::NoEndpoint),
        (name, Some(_)) => Err(LocalError::EndpointNotOpenAi(name.to_owned())),
        ("hash", None) => Ok(StoreSettings::default()),
        ("potion", None) => Ok(StoreSettings {
            embedder: "potion".into(),
            dimension: rr_potion::DIMENSION,
            query_prefix: String::new(),
            document_prefix: String::new(),
            chunking: DEFAULT_EMBEDDED_CHUNKING,
            endpoint: None,
        }),
        ("minilm", None) => Ok(StoreSettings {
            embedder: "minilm".into(),
            dimension: rr_minilm::DIMENSION,
            query_prefix: String::new(),
            document_prefix: String::new(),
            chunking: DEFAULT_EMBEDDED_CHUNKING,
            endpoint: None,
        }),
        (other, None) => Err(LocalError::UnknownEmbedder(other.to_owned())),
    }
}

/// `url` without the `user:password@` of its authority, for messages; one
/// that does not parse is not shown at all, since where its credentials
/// end cannot be told.
fn without_userinfo(url: &str) -> String {
    match url::Url::parse(url) {
        // Shown as given when there is nothing to hide.
        Ok(parsed) if parsed.username().is_empty() && parsed.password().is_none() => url.to_owned(),
        Ok(mut parsed) => {
            // Both fail only for URLs that cannot carry credentials.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => "an unparseable URL".to_owned(),
    }
}

/// Fixes a new store's embedder and its query/document prefixes (each
/// `None` keeps the default: [`DEFAULT_EMBEDDER`], and the embedder's prefixes, see
/// [`new_store_settings`]); `openai` also needs its `endpoint`. The embedder is
/// loaded once here, so a missing model fails before anything is written; the
/// settings are written unless `dry_run`. An existing store keeps what it was
/// created with: asking for something else is an error, because vectors made
/// another way would not be comparable.
pub fn choose_settings(
    store_dir: &Path,
    name: Option<&str>,
    query_prefix: Option<&str>,
    document_prefix: Option<&str>,
    endpoint: Option<EmbeddingEndpoint>,
    dry_run: bool,
) -> Result<(), LocalError> {
    let mut wanted = new_store_settings(name.unwrap_or(DEFAULT_EMBEDDER), endpoint.clone())?;
    if let Some(prefix) = query_prefix {
        wanted.query_prefix = prefix.to_owned();
    }
    if let Some(prefix) = document_prefix {
        wanted.document_prefix = prefix.to_owned();
    }
    match read_settings(store_dir)? {
        Some(existing) => {
            if let Some(name) = name
                && existing.embedder != name
            {
                return Err(LocalError::KeepsEmbedder {
                    store: store_dir.to_owned(),
                    kept: existing.embedder,
                    asked: name.to_owned(),
                });
            }
            for (what, asked, kept) in [
                ("query prefix", query_prefix, &existing.query_prefix),
                ("document prefix", document_prefix, &existing.document_prefix),
            ] {
                if let Some(asked) = asked
                    && asked != kept
                {
                    return Err(LocalError::KeepsPrefix {
                        store: store_dir.to_owned(),
                        what,
                        kept: kept.clone(),
                        asked: asked.to_owned(),
                    });
                }
            }
            if let Some(asked) = endpoint
                && existing.endpoint.as_ref() != Some(&asked)
            {
                let kept = existing.endpoint.as_ref().map_or_else(
                    || "no embedding endpoint".to_owned(),
                    |e| format!("the model {:?} at {}", e.model, without_userinfo(&e.api_url)),
                );
                return Err(LocalError::KeepsEndpoint {
                    store: store_dir.to_owned(),
                    kept,
                    asked_url: without_userinfo(&asked.api_url),
                    asked_model: asked.model,
                });
            }
            Ok(())
        }
        None => {
            embedder_for(&wanted)?;
            if dry_run {
                return Ok(());
            }
            std::fs::create_dir_all(store_dir).map_err(LocalError::io("create the store folder", store_dir))?;
            write_settings(store_dir, &wanted)
        }
    }
}

/// The store in `dir`, opened once per process: the search engine, the
/// navigation tools and a watch's writes share it.
fn open_store(dir: &Path) -> Result<Arc<EmbeddedStore>, LocalError> {
    rr_embedded::registry::shared(dir).map_err(|source| LocalError::OpenStore { path: dir.to_owned(), source })
}

/// A Chroma collection to index into instead of the embedded store, with the
/// OpenAI-compatible embedding endpoint that makes its vectors (as the
/// reference indexer does).
#[derive(Clone)]
pub struct ChromaTarget {
    pub server_url: String,
    pub collection_name: String,
    pub tenant: String,
    pub database: String,
    pub bearer_token: Option<String>,
    pub embedding_api_url: String,
    pub embedding_model: String,
    pub embedding_api_key: Option<String>,
}

/// What `index` needs besides the folder.
#[derive(Clone)]
pub struct IndexRequest {
    pub root: PathBuf,
    pub store: PathBuf,
    /// When set, records go to this Chroma collection, and `store` is unused
    /// unless [`lexical_index`](Self::lexical_index) says otherwise.
    pub chroma: Option<ChromaTarget>,
    /// With `chroma`: `store` is the lexical index kept beside the
    /// collection. It receives the same records and the files' texts, and
    /// keeps the settings (embedder, prefixes, chunking) as an embedded store
    /// does, so its embedder makes the collection's vectors too, and a search
    /// embeds queries with it ([`open_beside`]).
    pub lexical_index: bool,
    /// The chunking to index with, overriding `options.chunking.scheme`. `None`: the one an
    /// existing embedded store records, [`DEFAULT_EMBEDDED_CHUNKING`] for a new one, the
    /// reference's for Chroma (records identical to the reference indexer's). A store indexed
    /// with another chunking than before has every record rewritten (record ids carry the
    /// chunking version), and records the new one.
    pub chunking: Option<ChunkingScheme>,
    pub identity: Identity,
    pub options: IndexOptions,
    pub batch_size: usize,
    pub dry_run: bool,
    pub output_manifest: Option<PathBuf>,
    /// Receives progress of the write phases, e.g. for a progress bar.
    pub progress: Option<rr_indexer::sync::ProgressFn>,
}

/// Indexes `request.root` into the store: records identical to the
/// reference indexer's, synchronised safely (upserts first, deletions only
/// once every upsert succeeded), and the whole text of every indexed file
/// for the navigation tools.
///
/// The folder is streamed ([`rr_indexer::BuildStream`]): files are read and
/// chunked a group at a time, their records embedded and upserted in batches
/// as they come, and their texts written likewise, so memory does not grow
/// with the folder beyond the file list, a digest per record id and the
/// stored files' hashes. A failure midway (an unreadable file, the embedder,
/// the store, the process killed) leaves every batch written before it, each
/// complete, and nothing deleted; the next run skips what is there and
/// finishes the job.
pub async fn index(request: IndexRequest) -> Result<SyncSummary, LocalError> {
    let settings = index_settings(&request)?;
    let embedder = embedder_for(&settings)?;
    index_with(request, settings, embedder).await
}

/// The settings `request` indexes with: those of the store (or a new
/// store's), the reference's chunking for Chroma, and the chunking asked for.
fn index_settings(request: &IndexRequest) -> Result<StoreSettings, LocalError> {
    let mut settings = if request.chroma.is_some() && !request.lexical_index {
        StoreSettings { chunking: ChunkingScheme::Reference, ..StoreSettings::default() }
    } else {
        std::fs::create_dir_all(&request.store).map_err(LocalError::io("create the store folder", &request.store))?;
        match read_settings(&request.store)? {
            Some(settings) => settings,
            // A store written before settings files were kept holds `hash` vectors.
            None if request.store.join(rr_embedded::DATABASE_FILE).exists() => StoreSettings::default(),
            None => new_store_settings(DEFAULT_EMBEDDER, None)?,
        }
    };
    // Asked for explicitly, a chunking replaces the store's: the record ids
    // differ, so the sync rewrites every record (deleting the old ones last).
    if let Some(scheme) = request.chunking {
        settings.chunking = scheme;
    }
    Ok(settings)
}

/// [`index`] with the embedder given.
async fn index_with(
    request: IndexRequest,
    settings: StoreSettings,
    embedder: Arc<dyn Embedder>,
) -> Result<SyncSummary, LocalError> {
    let store = match (&request.chroma, request.lexical_index) {
        (Some(_), false) => None,
        _ => Some(open_store(&request.store)?),
    };
    index_in(request, settings, embedder, store, Writes::Batched).await
}

/// How the embedded store's records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// In transactions of up to the store's largest batch, as they come
    /// (see [`Coalesced`]): memory stays bounded, and a search during the
    /// run may see a changed file's new records beside its old ones.
    Batched,
    /// Every upsert and deletion of the run in one transaction at its end,
    /// none if it fails: a search sees each file before or after the run,
    /// never between. For a few changed files, as a watch writes them.
    Atomic,
}

/// [`index_with`] into `store` (the embedded store, already open), or into
/// `request.chroma` when `store` is `None`.
pub(crate) async fn index_in(
    request: IndexRequest,
    settings: StoreSettings,
    embedder: Arc<dyn Embedder>,
    store: Option<Arc<EmbeddedStore>>,
    mode: Writes,
) -> Result<SyncSummary, LocalError> {
    let started = Instant::now();
    let (root, identity, mut options) = (request.root.clone(), request.identity.clone(), request.options.clone());
    options.chunking.scheme = settings.chunking;
    let known = match &store {
        // A collection may lack records its index holds: every file is read
        // and its records compared with what both hold.
        Some(_) if request.chroma.is_some() => rr_indexer::KnownFiles::new(),
        Some(store) => {
            let (namespace_id, chunking) = (identity.namespace_id(), options.chunking);
            blocking_write(store, move |s| known_files(s, &namespace_id, chunking)).await?
        }
        None => rr_indexer::KnownFiles::new(),
    };
    let stream = tokio::task::spawn_blocking(move || rr_indexer::build_stream_known(&root, &identity, &options, known))
        .await??;
    let opts = sync_options(&request, &settings, started);
    let chunking = rr_indexer::ChunkingOptions { scheme: settings.chunking, ..request.options.chunking };
    let Some(store) = store else {
        let target = request.chroma.as_ref().ok_or(LocalError::NoTarget)?;
        let (store, embedder) = chroma_target(target)?;
        return stream_into(&store, &embedder, None, stream, &request, &opts, chunking).await;
    };
    if let Some(target) = &request.chroma {
        let (remote, _) = chroma_target(target)?;
        let files = if request.dry_run { None } else { Some(Texts { store: store.as_ref(), held: None }) };
        let index = Coalesced::new(store.as_ref(), false);
        let both = crate::beside::Beside::new(&remote, &index);
        let summary = stream_into(&both, embedder.as_ref(), files, stream, &request, &opts, chunking).await;
        let flushed = index.flush().await;
        let summary = summary?;
        flushed?;
        if !request.dry_run {
            write_settings(&request.store, &settings)?;
        }
        return Ok(summary);
    }
    let atomic = mode == Writes::Atomic;
    let writes = Coalesced::new(store.as_ref(), atomic);
    let files =
        if request.dry_run { None } else { Some(Texts { store: store.as_ref(), held: atomic.then_some(&writes) }) };
    let summary = stream_into(&writes, embedder.as_ref(), files, stream, &request, &opts, chunking).await;
    // Batched, written even when the run failed: what the sync handed over
    // is whole batches, which the next run then counts as unchanged.
    if mode == Writes::Atomic && summary.is_err() {
        return summary;
    }
    let flushed = writes.flush().await;
    let summary = summary?;
    flushed?;
    if !request.dry_run {
        write_settings(&request.store, &settings)?;
    }
    Ok(summary)
}

/// How a run of `request` synchronises: its batches, dry run and progress,
/// the store's document prefix, timed from `started`.
pub(crate) fn sync_options(request: &IndexRequest, settings: &StoreSettings, started: Instant) -> SyncOptions {
    SyncOptions {
        batch_size: request.batch_size,
        dry_run: request.dry_run,
        document_prefix: settings.document_prefix.clone(),
        started: Some(started),
        progress: request.progress.clone(),
    }
}

/// The files of `namespace_id` whose records `store` holds, all of them,
/// as `chunking` cuts them: those a re-index need not chunk again. A file
/// stored with another chunking (or by a build that did not record one) is
/// not among them, nor one whose records are not all there (a run stopped
/// between writing a file's text and its last records): those are chunked
/// again, and their records that are stored count as unchanged.
fn known_files(
    store: &EmbeddedStore,
    namespace_id: &str,
    chunking: rr_indexer::ChunkingOptions,
) -> Result<rr_indexer::KnownFiles, rr_embedded::EmbeddedError> {
    let key = chunking.key();
    let files = store.list_files(namespace_id)?;
    if !files.iter().any(|f| f.chunking == key) {
        return Ok(rr_indexer::KnownFiles::new());
    }
    let ids: std::collections::HashSet<String> = store.ids_in_namespace(namespace_id)?.into_iter().collect();
    Ok(files
        .into_iter()
        .filter(|f| f.chunking == key)
        .filter(|f| {
            rr_indexer::file_record_ids(namespace_id, &f.path, &f.file_hash, chunking.scheme, f.chunks)
                .iter()
                .all(|id| ids.contains(id))
        })
        .map(|f| (f.path, rr_indexer::KnownFile { file_hash: f.file_hash, chunks: f.chunks }))
        .collect())
}

/// The embedded store's writes, gathered into transactions of up to its
/// largest batch. Each transaction of the embedded store rewrites the last
/// posting block of every token its rows hold, so ten batches of 100 cost
/// several times one of 1,000; the sync's own batches (and so the embedder's
/// requests) keep `--batch-size`. Any other call writes what is gathered
/// first, so deletions still come after every upsert has succeeded, and a
/// run stopped halfway leaves whole transactions only.
///
/// `atomic` ([`Writes::Atomic`]) gathers everything instead, deletions
/// included, and answers [`IndexStore::namespace_ids`] as the store will
/// hold them once [`Coalesced::flush`] has written it all in one
/// transaction.
struct Coalesced<'a> {
    store: &'a EmbeddedStore,
    atomic: bool,
    pending: tokio::sync::Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    upsert: Vec<EmbeddedChunk>,
    delete: Vec<String>,
    /// Files' texts, written in the same transaction as the records (atomic only).
    put_files: Vec<StoredFile>,
    delete_files: Vec<FileKey>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.upsert.is_empty() && self.delete.is_empty() && self.put_files.is_empty() && self.delete_files.is_empty()
    }
}

/// Where the texts of the indexed files go: written to `store` in batches
/// as they come, or, for an atomic run, `held` with its records and
/// written in their transaction.
#[derive(Clone, Copy)]
pub(crate) struct Texts<'s, 'c> {
    store: &'s EmbeddedStore,
    held: Option<&'c Coalesced<'s>>,
}

impl<'a> Coalesced<'a> {
    fn new(store: &'a EmbeddedStore, atomic: bool) -> Self {
        Coalesced { store, atomic, pending: tokio::sync::Mutex::new(Pending::default()) }
    }

    /// Holds files' texts to write with the records (atomic only).
    async fn hold_files(&self, put: Vec<StoredFile>, delete: Vec<FileKey>) {
        let mut pending = self.pending.lock().await;
        pending.put_files.extend(put);
        pending.delete_files.extend(delete);
    }

    /// Writes what is gathered, in one transaction.
    async fn flush(&self) -> Result<(), BackendError> {
        let mut pending = self.pending.lock().await;
        if pending.is_empty() {
            return Ok(());
        }
        let taken = std::mem::take(&mut *pending);
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            store.write(&WriteBatch {
                delete: &taken.delete,
                upsert: &taken.upsert,
                delete_files: &taken.delete_files,
                put_files: &taken.put_files,
            })
        })
        .await
        .unwrap_or_else(|e| {
            Err(rr_embedded::EmbeddedError::Task { operation: rr_embedded::WRITE_OPERATION, detail: e.to_string() })
        })
        .map_err(|e| BackendError::new(rr_embedded::STORE_NAME, e))
    }
}

#[async_trait::async_trait]
impl IndexStore for Coalesced<'_> {
    fn name(&self) -> &str {
        IndexStore::name(self.store)
    }

    fn max_batch_size(&self) -> usize {
        IndexStore::max_batch_size(self.store)
    }

    async fn namespace_ids(&self, namespace_id: &str) -> Result<Vec<String>, BackendError> {
        if !self.atomic {
            self.flush().await?;
            return self.store.namespace_ids(namespace_id).await;
        }
        let stored = self.store.namespace_ids(namespace_id).await?;
        let pending = self.pending.lock().await;
        let deleted: std::collections::HashSet<&str> = pending.delete.iter().map(String::as_str).collect();
        let mut ids: Vec<String> = stored.into_iter().filter(|id| !deleted.contains(id.as_str())).collect();
        ids.extend(
            pending.upsert.iter().filter(|r| r.chunk.metadata.namespace_id == namespace_id).map(|r| r.chunk.id.clone()),
        );
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    async fn upsert(&self, records: &[EmbeddedChunk]) -> Result<(), BackendError> {
        let limit = IndexStore::max_batch_size(self.store);
        let mut pending = self.pending.lock().await;
        if !self.atomic && pending.upsert.len() + records.len() > limit && !pending.upsert.is_empty() {
            IndexStore::upsert(self.store, &pending.upsert).await?;
            pending.upsert.clear();
        }
        pending.upsert.extend_from_slice(records);
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<(), BackendError> {
        if self.atomic {
            self.pending.lock().await.delete.extend_from_slice(ids);
            return Ok(());
        }
        self.flush().await?;
        self.store.delete(ids).await
    }
}

/// Synchronises `stream` into `store` (see [`index`]); `files`, when set,
/// receives the texts of the files.
pub(crate) async fn stream_into(
    store: &dyn IndexStore,
    embedder: &dyn Embedder,
    files: Option<Texts<'_, '_>>,
    mut stream: BuildStream,
    request: &IndexRequest,
    opts: &SyncOptions,
    chunking: rr_indexer::ChunkingOptions,
) -> Result<SyncSummary, LocalError> {
    let namespace_id = request.identity.namespace_id();
    let mut manifest =
        request.output_manifest.as_deref().map(|path| ManifestSpool::create(path, stream.files())).transpose()?;
    let mut sync = StreamSync::start(store, embedder, &namespace_id, opts).await?;
    let mut texts = match files {
        Some(files) => Some(FileSync::start(files.store, &namespace_id, chunking.key(), files.held).await?),
        None => None,
    };
    let total = stream.files();
    opts.report(SyncPhase::Index, 0, total);
    loop {
        let (back, group) = tokio::task::spawn_blocking(move || {
            let group = stream.next_group();
            (stream, group)
        })
        .await?;
        stream = back;
        let Some(group) = group else { break };
        for file in group? {
            if let Some(known) = file.unchanged {
                let ids = rr_indexer::file_record_ids(
                    &namespace_id,
                    &file.path,
                    &known.file_hash,
                    chunking.scheme,
                    known.chunks,
                );
                if let Some(manifest) = &mut manifest {
                    manifest.add_ids(file.position, &file.path, &ids)?;
                }
                if let Some(texts) = &mut texts {
                    texts.keep(&file.path);
                }
                sync.keep(&ids)?;
                continue;
            }
            let Some((text, records)) = file.content else { continue };
            if let Some(manifest) = &mut manifest {
                manifest.add(file.position, &records)?;
            }
            if let Some(texts) = &mut texts {
                texts.add(file.path, text, records.len()).await?;
            }
            sync.push(records).await?;
        }
        opts.report(SyncPhase::Index, stream.delivered(), total);
    }
    if let Some(manifest) = manifest {
        manifest.finish()?;
    }
    if let Some(texts) = &mut texts {
        texts.flush().await?;
    }
    let summary = sync.finish().await?;
    if let Some(texts) = texts {
        texts.finish().await?;
    }
    Ok(summary.with_identity(&request.identity).with_build_stats(&stream.stats()).with_skipped(stream.skipped()))
}

/// Texts of indexed files written per batch, at most this many bytes...
const FILE_BATCH_BYTES: usize = 8 << 20;
/// ... or this many files.
const FILE_BATCH_FILES: usize = 500;

/// Brings the namespace's stored files in line with the indexed ones as
/// they come: changed and new files written in batches, vanished ones
/// removed at the end, unchanged ones left alone (a re-run over unchanged
/// files writes nothing).
struct FileSync<'c> {
    store: EmbeddedStore,
    /// An atomic run's writes: the texts go with the records.
    held: Option<&'c Coalesced<'c>>,
    namespace_id: String,
    /// The key of the chunking the records are cut with.
    chunking: String,
    /// Path → hash, chunking and record count of the stored files not met yet.
    unseen: HashMap<String, (String, String, usize)>,
    pending: Vec<StoredFile>,
    pending_bytes: usize,
}

impl<'c> FileSync<'c> {
    async fn start(
        store: &EmbeddedStore,
        namespace_id: &str,
        chunking: String,
        held: Option<&'c Coalesced<'c>>,
    ) -> Result<Self, LocalError> {
        let namespace = namespace_id.to_owned();
        let unseen = blocking_write(store, move |s| {
            Ok(s.list_files(&namespace)?.into_iter().map(|f| (f.path, (f.file_hash, f.chunking, f.chunks))).collect())
        })
        .await?;
        Ok(FileSync {
            store: store.clone(),
            held,
            namespace_id: namespace_id.to_owned(),
            chunking,
            unseen,
            pending: Vec::new(),
            pending_bytes: 0,
        })
    }

    /// Notes that `path` is stored as it is.
    fn keep(&mut self, path: &str) {
        self.unseen.remove(path);
    }

    /// Queues `content` for `path`, cut into `chunks` records, unless it is
    /// stored as it is.
    async fn add(&mut self, path: String, content: String, chunks: usize) -> Result<(), LocalError> {
        let file_hash = rr_indexer::sha256_hex(&content);
        let stored = (file_hash, self.chunking.clone(), chunks);
        if self.unseen.remove(&path).is_some_and(|found| found == stored) {
            return Ok(());
        }
        let (file_hash, chunking, chunks) = stored;
        self.pending_bytes += content.len();
        self.pending.push(StoredFile {
            namespace_id: self.namespace_id.clone(),
            path,
            file_hash,
            content,
            chunking,
            chunks,
        });
        if self.pending_bytes >= FILE_BATCH_BYTES || self.pending.len() >= FILE_BATCH_FILES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes the queued files in one transaction (an atomic run's go with
    /// its records instead).
    async fn flush(&mut self) -> Result<(), LocalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Some(held) = self.held {
            held.hold_files(std::mem::take(&mut self.pending), Vec::new()).await;
            self.pending_bytes = 0;
            return Ok(());
        }
        let put = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        blocking_write(&self.store, move |s| s.write(&WriteBatch { put_files: &put, ..Default::default() })).await
    }

    /// Removes the stored files that the folder no longer has.
    async fn finish(mut self) -> Result<(), LocalError> {
        self.flush().await?;
        let namespace_id = self.namespace_id;
        let delete: Vec<FileKey> =
            self.unseen.into_keys().map(|path| FileKey { namespace_id: namespace_id.clone(), path }).collect();
        if delete.is_empty() {
            return Ok(());
        }
        if let Some(held) = self.held {
            held.hold_files(Vec::new(), delete).await;
            return Ok(());
        }
        blocking_write(&self.store, move |s| s.write(&WriteBatch { delete_files: &delete, ..Default::default() })).await
    }
}

/// Runs `work` on the store on tokio's blocking pool.
async fn blocking_write<T: Send + 'static>(
    store: &EmbeddedStore,
    work: impl FnOnce(&EmbeddedStore) -> Result<T, rr_embedded::EmbeddedError> + Send + 'static,
) -> Result<T, LocalError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || work(&store)).await?.map_err(LocalError::StoreFiles)
}

/// `--output-manifest`: the id, path and chunk index of every record, in
/// path then chunk order, as one pretty-printed JSON array.
///
/// The stream delivers files in id order, so each file's entries go to a
/// spool file next to the manifest as they come, with their place noted
/// (16 bytes per file); [`ManifestSpool::finish`] copies them out in path
/// order into a temporary file renamed over the manifest. Nothing is
/// written at `path` unless the whole build succeeded.
struct ManifestSpool {
    path: PathBuf,
    spool_path: PathBuf,
    spool: std::io::BufWriter<std::fs::File>,
    written: u64,
    /// Where each file's entries are in the spool, by path-order position.
    places: Vec<Option<(u64, usize)>>,
}

impl ManifestSpool {
    /// A manifest at `path` of a build of `files` eligible files.
    fn create(path: &Path, files: usize) -> Result<Self, LocalError> {
        let spool_path = sibling(path, "spool");
        let spool = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&spool_path)
            .map_err(LocalError::io("write the manifest", path))?;
        Ok(ManifestSpool {
            path: path.to_owned(),
            spool_path,
            spool: std::io::BufWriter::new(spool),
            written: 0,
            places: vec![None; files],
        })
    }

    fn failed(&self, e: std::io::Error) -> LocalError {
        LocalError::io("write the manifest", &self.path)(e)
    }

    /// Spools the entries of the file at path-order `position`.
    fn add(&mut self, position: usize, records: &[rr_core::Chunk]) -> Result<(), LocalError> {
        use std::io::Write;
        if records.is_empty() {
            return Ok(());
        }
        let text = records.iter().map(manifest_entry).collect::<Vec<_>>().join(",\n");
        self.spool.write_all(text.as_bytes()).map_err(|e| self.failed(e))?;
        if let Some(place) = self.places.get_mut(position) {
            *place = Some((self.written, text.len()));
        }
        self.written += text.len() as u64;
        Ok(())
    }

    /// Spools the entries of a file that was not chunked again, from its
    /// record ids (in chunk order).
    fn add_ids(&mut self, position: usize, path: &str, ids: &[String]) -> Result<(), LocalError> {
        let records: Vec<rr_core::Chunk> = ids
            .iter()
            .enumerate()
            .map(|(index, id)| rr_core::Chunk {
                id: id.clone(),
                document: String::new(),
                metadata: rr_core::Metadata { path: path.to_owned(), chunk_index: index as i64, ..Default::default() },
            })
            .collect();
        self.add(position, &records)
    }

    /// Writes the manifest from the spool.
    fn finish(mut self) -> Result<(), LocalError> {
        use std::io::Write;
        let tmp = sibling(&self.path, "tmp");
        let written = self
            .spool
            .flush()
            .and_then(|()| copy_out(self.spool.get_mut(), &self.places, &tmp))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.failed(e)
        })
    }
}

/// Writes the spooled entries at `places`, in order, as a JSON array into `to`.
fn copy_out(spool: &mut std::fs::File, places: &[Option<(u64, usize)>], to: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, Write};
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    out.write_all(b"[")?;
    let mut first = true;
    let mut buf = Vec::new();
    for &(offset, len) in places.iter().flatten() {
        out.write_all(if first { b"\n" } else { b",\n" })?;
        first = false;
        spool.seek(std::io::SeekFrom::Start(offset))?;
        buf.resize(len, 0);
        spool.read_exact(&mut buf)?;
        out.write_all(&buf)?;
    }
    out.write_all(if first { b"]" } else { b"\n]" })?;
    out.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_all()
}

impl Drop for ManifestSpool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.spool_path);
    }
}

/// One record's manifest entry, as it is indented inside the array.
fn manifest_entry(c: &rr_core::Chunk) -> String {
    let entry = serde_json::json!({"id": c.id, "path": c.metadata.path, "chunk_index": c.metadata.chunk_index});
    let pretty = serde_json::to_string_pretty(&entry).expect("a manifest entry is plain JSON");
    // JSON escapes newlines inside strings, so every line break is the formatter's.
    pretty.lines().map(|line| format!("  {line}")).collect::<Vec<_>>().join("\n")
}

/// `path` with `.suffix` appended to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(std::ffi::OsString::from).unwrap_or_default();
    name.push(format!(".{suffix}"));
    path.with_file_name(name)
}

/// The Chroma collection of `target`, to search.
pub fn chroma_store(target: &ChromaTarget) -> Result<Arc<dyn VectorStore>, LocalError> {
    Ok(Arc::new(chroma_target(target)?.0))
}

/// The Chroma store and embedder of a Chroma target, on one HTTP client.
fn chroma_target(target: &ChromaTarget) -> Result<(ChromaStore, OpenAiEmbedder), LocalError> {
    let mut settings = HttpSettings::new(crate::user_agent());
    settings.secrets = [&target.bearer_token, &target.embedding_api_key]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .cloned()
        .collect();
    let http = HttpClient::new(settings)?;
    let store = ChromaStore::new(
        ChromaConfig {
            server_url: target.server_url.trim_end_matches('/').to_owned(),
            tenant: target.tenant.clone(),
            database: target.database.clone(),
            collection_name: target.collection_name.clone(),
            bearer_token: target.bearer_token.clone(),
        },
        http.clone(),
    );
    let embedder = OpenAiEmbedder::new(
        OpenAiEmbedderConfig {
            api_url: target.embedding_api_url.trim_end_matches('/').to_owned(),
            model: target.embedding_model.clone(),
            api_key: target.embedding_api_key.clone(),
        },
        http,
    );
    Ok((store, embedder))
}

/// The search engine over an existing store, in the default retrieval
/// mode, without reranking.
pub fn engine(store_dir: &Path) -> Result<SearchEngine, LocalError> {
    let open = open(store_dir)?;
    Ok(open.engine(None, &open.engine_settings(), str::to_owned)?)
}

/// How many results one file gets, by default, before other files have had
/// their turn in a search of the embedded store: no limit, the ranking's
/// order. The reference's two per file (which the drop-in keeps) cost 15 of
/// the 16 real query sets recall, up to 0.12 R@5, since the chunks that
/// answer a question often stand in the same file (docs/evaluation.md, "What
/// the search tool returns").
pub const EMBEDDED_PER_FILE: usize = 0;

/// The search engine over `remote` with the lexical index at `dir` beside
/// it: queries embedded by the embedder the index records (the one that
/// wrote the collection's vectors), the index's retrieval defaults (hybrid,
/// the head read again, the code ranking, the ranking's order), reranked by
/// `reranker`.
pub fn engine_beside(
    remote: Arc<dyn VectorStore>,
    dir: &Path,
    reranker: Option<Arc<dyn Reranker>>,
) -> Result<SearchEngine, LocalError> {
    let index = open(dir)?;
    let settings = index.engine_settings();
    let lexical: Arc<dyn rr_core::LexicalStore> = index.store.clone();
    Ok(crate::retrieval::engine_with_index(
        remote,
        Some(lexical),
        index.embedder.clone(),
        reranker,
        &settings,
        str::to_owned,
    )?)
}

/// The settings an existing store (or lexical index) was written with.
pub fn open_settings(store_dir: &Path) -> Result<StoreSettings, LocalError> {
    read_settings(store_dir)?.ok_or_else(|| LocalError::NoIndex(store_dir.to_owned()))
}

/// An existing store with the embedder its vectors were made with: the
/// parts of [`engine`], for callers that run the pipeline's steps themselves
/// (`eval`).
#[derive(Clone)]
pub struct OpenStore {
    pub embedder: Arc<dyn Embedder>,
    pub store: Arc<EmbeddedStore>,
    /// What it was written with (the query prefix among them).
    pub settings: StoreSettings,
}

/// The languages and kinds of file an open store holds: the values its
/// `search` can be narrowed to. Read from the store's in-memory index on
/// every call (a few microseconds per thousand files), so a store that is
/// being written shows what it holds now.
#[derive(Clone)]
pub struct StoreFacets(Arc<EmbeddedStore>);

impl StoreFacets {
    pub fn new(open: &OpenStore) -> Self {
        StoreFacets(open.store.clone())
    }

    fn read(&self) -> rr_embedded::Facets {
        self.0.facets(&rr_core::SearchFilter::default()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the store's languages and kinds");
            rr_embedded::Facets::default()
        })
    }

    /// The languages with at least one chunk, sorted (chunks without one
    /// are left out: they cannot be asked for).
    pub fn languages(&self) -> Vec<String> {
        self.read().languages.into_keys().filter(|l| !l.is_empty()).collect()
    }

    /// The kinds of file with at least one chunk, in [`rr_core::paths::PATH_CLASSES`] order.
    pub fn kinds(&self) -> Vec<String> {
        let kinds = self.read().kinds;
        rr_core::paths::PATH_CLASSES.iter().filter(|c| kinds.contains_key(c)).map(|c| c.as_str().to_owned()).collect()
    }
}

impl OpenStore {
    /// What an engine over this store is built with unless the operator
    /// says otherwise: its own query prefix, every result of one file in
    /// ranking order ([`EMBEDDED_PER_FILE`]), the code ranking on.
    pub fn engine_settings(&self) -> EngineSettings {
        EngineSettings {
            query_prefix: self.settings.query_prefix.clone(),
            per_file: EMBEDDED_PER_FILE,
            code_rank: Some(rr_core::CodeRank::default()),
            ..EngineSettings::default()
        }
    }

    /// The search engine over this store with `settings` and `reranker`:
    /// it searches `self.store` itself, so a caller that also reads the
    /// store (the navigation tools, a watch) shares its in-memory index.
    pub fn engine(
        &self,
        reranker: Option<Arc<dyn Reranker>>,
        settings: &EngineSettings,
        key: impl Fn(&str) -> String,
    ) -> Result<SearchEngine, rr_core::retrieval::RetrievalSettingError> {
        crate::retrieval::engine(self.store.clone(), self.embedder.clone(), reranker, settings, key)
    }
}

/// Opens an existing store (see [`OpenStore`]).
pub fn open(store_dir: &Path) -> Result<OpenStore, LocalError> {
    let settings = open_settings(store_dir)?;
    let embedder = embedder_for(&settings)?;
    let store = open_store(store_dir)?;
    // An endpoint's dimension (0) is whatever its model makes: the store
    // fixed it at the first write and refuses vectors of another length.
    if let Some(dimension) = store.dimension()
        && settings.dimension != 0
        && dimension != settings.dimension
    {
        return Err(LocalError::StoreDimension {
            path: store_dir.to_owned(),
            held: dimension,
            embedder: settings.embedder,
            made: settings.dimension,
        });
    }
    Ok(OpenStore { embedder, store, settings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str) -> EmbeddedChunk {
        EmbeddedChunk {
            chunk: rr_core::Chunk {
                id: id.into(),
                document: format!("Source: acme/tools@main:src/{id}.rs\nType: text\n\nfn {id}() {{}}"),
                metadata: rr_core::Metadata {
                    schema_version: 1,
                    namespace_id: "ns".into(),
                    organization: "acme".into(),
                    repository: "tools".into(),
                    branch: "main".into(),
                    path: format!("src/{id}.rs"),
                    ..Default::default()
                },
            },
            embedding: vec![1.0, 0.0],
        }
    }

    #[test]
    fn settings_and_embedder_refusals_read_as_the_operator_sees_them() {
        let message = |r: Result<StoreSettings, LocalError>| r.unwrap_err().to_string();
        let endpoint = EmbeddingEndpoint { api_url: "http://127.0.0.1:1".into(), model: "m".into() };
        assert_eq!(
            message(new_store_settings("openai", None)),
            "the openai embedder needs an embedding API URL and model"
        );
        assert_eq!(
            message(new_store_settings("hash", Some(endpoint))),
            "an embedding API URL and model are for the openai embedder, not \"hash\""
        );
        assert_eq!(
            message(new_store_settings("bert", None)),
            "unknown embedder \"bert\"; valid choices: potion, hash, minilm, openai"
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            open(dir.path()).err().unwrap().to_string(),
            format!(
                "no index at {}: run `repo-retriever index <folder> --store {}` first",
                dir.path().display(),
                dir.path().display()
            )
        );
        std::fs::write(dir.path().join(SETTINGS_FILE), "{").unwrap();
        assert_eq!(
            open(dir.path()).err().unwrap().to_string(),
            format!(
                "{} is not a valid store settings file: EOF while parsing an object at line 1 column 1",
                dir.path().join(SETTINGS_FILE).display()
            )
        );
        let settings = StoreSettings { embedder: "hash".into(), dimension: 0, ..StoreSettings::default() };
        assert_eq!(embedder_for(&settings).err().unwrap().to_string(), "invalid hash embedder dimension 0");
    }

    #[test]
    fn store_and_watch_refusals_read_as_the_operator_sees_them() {
        let io = || std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let path = PathBuf::from("/s");
        let cases = [
            (LocalError::io("read", &path)(io()), "cannot read /s: denied"),
            (LocalError::io("write", &path)(io()), "cannot write /s: denied"),
            (LocalError::io("create the store folder", &path)(io()), "cannot create the store folder /s: denied"),
            (LocalError::io("write the manifest", &path)(io()), "cannot write the manifest /s: denied"),
            (
                LocalError::StoreDimension { path: path.clone(), held: 8, embedder: "hash".into(), made: 256 },
                "store /s holds 8-dimensional vectors but its embedder \"hash\" makes 256-dimensional ones",
            ),
            (
                LocalError::LoadEmbedder { embedder: "minilm", message: "no model".into() },
                "cannot load the minilm embedder: no model",
            ),
            (LocalError::OpenAiSetup("bad".into()), "cannot set up the openai embedder: bad"),
            (
                LocalError::ModelDimension { dir: path.clone(), made: 768, expected: 384 },
                "the minilm model at /s makes 768-dimensional vectors, the store expects 384",
            ),
            (LocalError::NoTarget, "no store to index into"),
            (LocalError::WatchNeedsEmbedded, "a watch writes into the embedded store"),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[tokio::test]
    async fn gathered_writes_reach_the_store_before_any_read_or_delete_and_never_above_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let writes = Coalesced::new(&store, false);
        writes.upsert(&[chunk("a"), chunk("b")]).await.unwrap();
        writes.upsert(&[chunk("c")]).await.unwrap();
        assert_eq!(store.len(), 0, "gathered, not yet written");
        let mut ids = writes.namespace_ids("ns").await.unwrap();
        ids.sort();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(store.len(), 3);
        writes.upsert(&[chunk("d")]).await.unwrap();
        writes.delete(&["a".to_string()]).await.unwrap();
        assert_eq!(store.len(), 3, "d written before a was deleted");
        // A batch that would pass the store's limit writes what was gathered first.
        let limit = IndexStore::max_batch_size(&store);
        let first: Vec<EmbeddedChunk> = (0..limit - 1).map(|i| chunk(&format!("x{i}"))).collect();
        writes.upsert(&first).await.unwrap();
        writes.upsert(&[chunk("y0"), chunk("y1")]).await.unwrap();
        assert_eq!(store.len(), 3 + limit - 1);
        writes.flush().await.unwrap();
        assert_eq!(store.len(), 3 + limit + 1);
    }

    /// The `hash` embedder, failing every call after the first `healthy` ones.
    struct FailingEmbedder {
        healthy: usize,
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Embedder for FailingEmbedder {
        fn name(&self) -> &str {
            "failing"
        }

        async fn embed(
            &self,
            inputs: &[String],
            ctx: &rr_core::CallContext,
        ) -> Result<Vec<Vec<f32>>, rr_core::BackendError> {
            if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= self.healthy {
                return Err(rr_core::BackendError::new("failing", "embedding failed: injected fault"));
            }
            rr_hash_embed::HashEmbedder::default().embed(inputs, ctx).await
        }
    }

    fn failing_after(healthy: usize) -> Arc<dyn Embedder> {
        Arc::new(FailingEmbedder { healthy, calls: Default::default() })
    }

    fn healthy() -> Arc<dyn Embedder> {
        failing_after(usize::MAX)
    }

    /// A folder of real code: this workspace's indexer sources.
    fn corpus() -> tempfile::TempDir {
        fn copy(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).unwrap();
            for entry in std::fs::read_dir(from).unwrap() {
                let entry = entry.unwrap();
                let target = to.join(entry.file_name());
                if entry.file_type().unwrap().is_dir() {
                    copy(&entry.path(), &target);
                } else {
                    std::fs::copy(entry.path(), target).unwrap();
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        copy(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../indexer/src"), dir.path());
        dir
    }

    fn request(root: &Path, store: &Path) -> IndexRequest {
        IndexRequest {
            root: root.to_owned(),
            store: store.to_owned(),
            chroma: None,
            lexical_index: false,
            chunking: None,
            identity: Identity::new("acme", "widgets", "main", ""),
            options: IndexOptions::default(),
            batch_size: 10,
            dry_run: false,
            output_manifest: None,
            progress: None,
        }
    }

    async fn index_using(request: IndexRequest, embedder: Arc<dyn Embedder>) -> Result<SyncSummary, LocalError> {
        let settings = index_settings(&request).unwrap();
        index_with(request, settings, embedder).await
    }

    /// Chunk ids and stored files (path, hash) of the namespace.
    fn contents(store: &Path) -> (Vec<String>, Vec<(String, String)>) {
        let store = EmbeddedStore::open(store).unwrap();
        let namespace = Identity::new("acme", "widgets", "main", "").namespace_id();
        let files = store.list_files(&namespace).unwrap().into_iter().map(|f| (f.path, f.file_hash)).collect();
        (store.ids_in_namespace(&namespace).unwrap(), files)
    }

    #[tokio::test]
    async fn an_index_stopped_by_a_failing_embedder_deletes_nothing_and_the_next_run_completes_it() {
        let folder = corpus();
        let (store, fresh) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert!(first.chunks_added_or_updated > 100, "{first:?}");
        let before = contents(store.path());

        // Every file edited, one gone, one new: every stored record is stale.
        fn edit(dir: &Path) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    edit(&path);
                } else {
                    std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "\n// edited\n").unwrap();
                }
            }
        }
        edit(folder.path());
        std::fs::remove_file(folder.path().join("tokens.rs")).unwrap();
        std::fs::write(folder.path().join("new.md"), "# New\n\nA new page.\n").unwrap();
        let wanted = index_using(request(folder.path(), fresh.path()), healthy()).await.unwrap();
        let wanted_contents = contents(fresh.path());

        let err = index_using(request(folder.path(), store.path()), failing_after(2)).await.unwrap_err();
        assert_eq!(err.to_string(), "embedding failed: injected fault");
        let (ids, files) = contents(store.path());
        assert!(before.0.iter().all(|id| ids.contains(id)), "a stale record was deleted");
        assert_eq!(ids.len(), before.0.len() + 20, "the two batches before the fault are written, whole");
        assert!(files.iter().any(|(path, _)| path == "tokens.rs"), "a vanished file's text was deleted");

        let last = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert_eq!(contents(store.path()), wanted_contents);
        assert_eq!(
            (last.chunks_desired, last.chunks_unchanged, last.chunks_deleted),
            (wanted.chunks_desired, 20, before.0.len()),
            "the batches written before the fault count as unchanged"
        );
        assert!(EmbeddedStore::open(store.path()).unwrap().check().unwrap().is_consistent());
    }

    /// An atomic run (a watch's update or catch-up) over many new files that fails midway writes
    /// nothing: not their records, and not their texts either, which would show files whose
    /// chunks are missing.
    #[tokio::test]
    async fn an_atomic_run_that_fails_writes_neither_records_nor_texts() {
        let folder = corpus();
        let store = tempfile::tempdir().unwrap();
        index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        let before = contents(store.path());
        // More new files than a batch of texts holds.
        for n in 0..FILE_BATCH_FILES + 20 {
            std::fs::write(folder.path().join(format!("added_{n}.md")), format!("# Page {n}\n\nText {n}.\n")).unwrap();
        }
        let run = |embedder: Arc<dyn Embedder>| {
            let request = request(folder.path(), store.path());
            let settings = index_settings(&request).unwrap();
            let open = open_store(store.path()).unwrap();
            async move { index_in(request, settings, embedder, Some(open), Writes::Atomic).await }
        };
        let err = run(failing_after(3)).await.unwrap_err();
        assert_eq!(err.to_string(), "embedding failed: injected fault");
        assert_eq!(contents(store.path()), before);

        let done = run(healthy()).await.unwrap();
        assert!(done.chunks_added_or_updated >= FILE_BATCH_FILES + 20, "{done:?}");
        let (ids, files) = contents(store.path());
        assert_eq!(files.len(), before.1.len() + FILE_BATCH_FILES + 20);
        assert_eq!(ids.len(), before.0.len() + done.chunks_added_or_updated);
    }

    /// Stored record ids of one file of the namespace.
    fn ids_of(store: &Path, path: &str) -> Vec<String> {
        let namespace = Identity::new("acme", "widgets", "main", "").namespace_id();
        let path_hash = rr_indexer::sha256_hex(path);
        let (ids, _) = contents(store);
        ids.into_iter().filter(|id| id.starts_with(&format!("repochunk:v1:{namespace}:{path_hash}:"))).collect()
    }

    #[tokio::test]
    async fn a_reindex_chunks_only_the_files_that_changed_and_drops_those_that_vanished() {
        let folder = corpus();
        let (store, fresh) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert_eq!(first.files_unchanged, 0);
        let eligible = first.files_eligible;

        let again = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert_eq!(again.files_unchanged, eligible, "{again:?}");
        assert_eq!(
            (again.chunks_added_or_updated, again.chunks_deleted, again.chunks_unchanged, again.files_indexed),
            (0, 0, first.chunks_desired, first.files_indexed)
        );

        let old_lib = ids_of(store.path(), "lib.rs");
        let lib = folder.path().join("lib.rs");
        std::fs::write(&lib, std::fs::read_to_string(&lib).unwrap() + "\n/// Added by the edit.\npub fn edited() {}\n")
            .unwrap();
        std::fs::remove_file(folder.path().join("tokens.rs")).unwrap();
        let edited = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert_eq!(edited.files_unchanged, eligible - 2, "lib.rs alone chunked again: {edited:?}");
        assert!(ids_of(store.path(), "tokens.rs").is_empty(), "the vanished file's records are gone");
        let new_lib = ids_of(store.path(), "lib.rs");
        assert!(!new_lib.is_empty() && new_lib.iter().all(|id| !old_lib.contains(id)));

        // The store holds what a fresh index of the folder holds.
        index_using(request(folder.path(), fresh.path()), healthy()).await.unwrap();
        assert_eq!(contents(store.path()), contents(fresh.path()));
        assert!(EmbeddedStore::open(store.path()).unwrap().check().unwrap().is_consistent());
    }

    #[tokio::test]
    async fn a_file_whose_records_are_missing_or_whose_chunking_is_unknown_is_chunked_again() {
        let folder = corpus();
        let store = tempfile::tempdir().unwrap();
        let first = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        let namespace = Identity::new("acme", "widgets", "main", "").namespace_id();
        {
            let embedded = EmbeddedStore::open(store.path()).unwrap();
            // A run stopped after writing lib.rs's text but before its last record.
            let lib = ids_of(store.path(), "lib.rs");
            embedded.delete_chunks(&lib[lib.len() - 1..]).unwrap();
            // A file stored by a build that recorded no chunking.
            let mut old = embedded.get_file(&namespace, "sync.rs").unwrap().unwrap();
            (old.chunking, old.chunks) = (String::new(), 0);
            embedded.put_file(&old).unwrap();
        }
        let again = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert_eq!(again.files_unchanged, first.files_eligible - 2, "{again:?}");
        assert_eq!((again.chunks_added_or_updated, again.chunks_deleted), (1, 0), "{again:?}");
        let stored = EmbeddedStore::open(store.path()).unwrap().get_file(&namespace, "sync.rs").unwrap().unwrap();
        assert_eq!(
            stored.chunking,
            rr_indexer::ChunkingOptions { scheme: DEFAULT_EMBEDDED_CHUNKING, ..Default::default() }.key()
        );
        let third = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        assert_eq!(third.files_unchanged, first.files_eligible, "{third:?}");
    }

    #[tokio::test]
    async fn another_chunking_chunks_every_file_again() {
        let folder = corpus();
        let store = tempfile::tempdir().unwrap();
        let first = index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        let mut smaller = request(folder.path(), store.path());
        smaller.options.chunking.chunk_size = 256;
        let again = index_using(smaller, healthy()).await.unwrap();
        assert_eq!(again.files_unchanged, 0, "{again:?}");
        assert!(again.chunks_desired > first.chunks_desired, "{again:?}");
    }

    #[tokio::test]
    async fn the_manifest_lists_records_in_path_order_as_a_pretty_json_array() {
        let folder = corpus();
        let (store, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let manifest = out.path().join("manifest.json");
        let mut dry = request(folder.path(), store.path());
        (dry.dry_run, dry.output_manifest) = (true, Some(manifest.clone()));
        index_using(dry, healthy()).await.unwrap();

        let identity = Identity::new("acme", "widgets", "main", "");
        let mut options = IndexOptions::default();
        options.chunking.scheme = DEFAULT_EMBEDDED_CHUNKING;
        let records = rr_indexer::build(folder.path(), &identity, &options).unwrap().records;
        let entries: Vec<_> = records
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "path": c.metadata.path, "chunk_index": c.metadata.chunk_index}))
            .collect();
        assert!(entries.len() > 100);
        assert_eq!(std::fs::read(&manifest).unwrap(), serde_json::to_vec_pretty(&entries).unwrap());
        let names: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["manifest.json"], "the spool is removed");
        // The same manifest when no file is chunked again.
        index_using(request(folder.path(), store.path()), healthy()).await.unwrap();
        let mut again = request(folder.path(), store.path());
        again.output_manifest = Some(manifest.clone());
        assert_eq!(index_using(again, healthy()).await.unwrap().files_unchanged, records_files(&records));
        assert_eq!(std::fs::read(&manifest).unwrap(), serde_json::to_vec_pretty(&entries).unwrap());

        let empty = tempfile::tempdir().unwrap();
        let mut dry = request(empty.path(), store.path());
        (dry.dry_run, dry.output_manifest) = (true, Some(manifest.clone()));
        index_using(dry, healthy()).await.unwrap();
        assert_eq!(std::fs::read_to_string(&manifest).unwrap(), "[]");
    }

    /// Files with records among `records`.
    fn records_files(records: &[rr_core::Chunk]) -> usize {
        records.iter().map(|r| r.metadata.path.as_str()).collect::<std::collections::HashSet<_>>().len()
    }

    #[test]
    fn new_stores_get_their_models_prefixes() {
        let minilm = new_store_settings("minilm", None).unwrap();
        assert_eq!((minilm.query_prefix.as_str(), minilm.document_prefix.as_str()), ("", ""));
        let hash = new_store_settings("hash", None).unwrap();
        assert_eq!((hash.query_prefix.as_str(), hash.document_prefix.as_str()), ("query: ", "passage: "));
        let potion = new_store_settings(DEFAULT_EMBEDDER, None).unwrap();
        assert_eq!(
            (potion.embedder.as_str(), potion.dimension, potion.query_prefix.as_str(), potion.document_prefix.as_str()),
            ("potion", 256, "", "")
        );
        assert_eq!(
            new_store_settings("e5", None).unwrap_err().to_string(),
            "unknown embedder \"e5\"; valid choices: potion, hash, minilm, openai"
        );
        assert_eq!(
            new_store_settings("openai", None).unwrap_err().to_string(),
            "the openai embedder needs an embedding API URL and model"
        );
        let endpoint = EmbeddingEndpoint { api_url: "http://127.0.0.1:8081".into(), model: "e5-small".into() };
        let openai = new_store_settings("openai", Some(endpoint.clone())).unwrap();
        assert_eq!(
            (openai.embedder.as_str(), openai.dimension, openai.query_prefix.as_str(), openai.endpoint),
            ("openai", 0, "query: ", Some(endpoint))
        );
    }

    #[test]
    fn an_endpoint_is_only_for_the_openai_embedder() {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = EmbeddingEndpoint { api_url: "http://127.0.0.1:8081".into(), model: "m".into() };
        let err = choose_settings(dir.path(), Some("hash"), None, None, Some(endpoint), false).unwrap_err();
        assert_eq!(err.to_string(), "an embedding API URL and model are for the openai embedder, not \"hash\"");
        let err = choose_settings(dir.path(), Some("openai"), None, None, None, false).unwrap_err();
        assert_eq!(err.to_string(), "the openai embedder needs an embedding API URL and model");
        assert!(read_settings(dir.path()).unwrap().is_none(), "nothing is written");
        // A settings file edited to lose its endpoint is refused when the store is opened.
        let edited = StoreSettings { embedder: "openai".into(), dimension: 0, ..StoreSettings::default() };
        let err = embedder_for(&edited).err().expect("no endpoint, no embedder");
        assert_eq!(err.to_string(), "the openai embedder needs an embedding API URL and model");
    }

    #[test]
    fn messages_leave_out_the_credentials_of_an_endpoint() {
        assert_eq!(without_userinfo("https://user:secret@example.com/v1"), "https://example.com/v1");
        assert_eq!(without_userinfo("http://127.0.0.1:8081"), "http://127.0.0.1:8081");
        assert_eq!(without_userinfo("http://token@127.0.0.1:8081"), "http://127.0.0.1:8081/");
        assert_eq!(without_userinfo("http://host/path@x"), "http://host/path@x");
        assert_eq!(without_userinfo("secret@host:1/v1 x"), "an unparseable URL");
    }
}
