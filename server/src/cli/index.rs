//! `repo-retriever index`: a folder into the embedded store, into a
//! Chroma collection as `chromadb-repo-indexer` writes it, or into a Qdrant
//! collection with dense and sparse BM25 vectors.

use std::path::{Path, PathBuf};

use clap::{Args, Parser};
use rr_engine::local::{ChromaTarget, IndexRequest};
use rr_engine::qdrant::QdrantTarget;

use super::args::{ChromaArgs, StoreArg};
use crate::index_config::IndexConfig;

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
    /// Leave out a file larger than this many bytes, listed in the summary's `files_skipped` (0: no
    /// limit; with --no-ignore, the reference indexer's selection).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
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
    #[arg(long, value_parser = ["potion", "hash", "minilm", "openai"])]
    pub embedder: Option<String>,
    /// Prepended to queries before embedding, for a new store [default: the embedder's: "query: " for
    /// hash and openai, none for potion and minilm].
    #[arg(long)]
    pub query_prefix: Option<String>,
    /// Prepended to documents before embedding, for a new store [default: the embedder's: "passage: "
    /// for hash and openai, none for potion and minilm].
    #[arg(long)]
    pub document_prefix: Option<String>,
    /// With --chroma-url: the folder of the lexical index kept beside the collection (the same
    /// records, the files' texts and the embedder, as an embedded store keeps them). The collection's
    /// vectors then come from the index's embedder (--embedder for a new index, potion by default) and
    /// its chunking (semantic for a new index); `serve --chroma-url … --lexical-index DIR` searches
    /// both as the embedded store is searched.
    #[arg(long, value_name = "DIR", requires = "chroma_url")]
    pub lexical_index: Option<PathBuf>,
    #[command(flatten)]
    pub chroma: ChromaArgs,
    /// Qdrant gRPC endpoint (e.g. http://127.0.0.1:6334): writes to the Qdrant collection --collection
    /// names instead of the embedded store, creating it when absent, each chunk with its dense vector
    /// and a sparse BM25 vector; the collection records its embedder (API key from QDRANT_API_KEY).
    #[arg(long, value_name = "URL", requires = "collection", conflicts_with_all = ["chroma_url", "lexical_index"])]
    pub qdrant_url: Option<String>,
    /// The Qdrant collection to index into.
    #[arg(long, value_name = "NAME", requires = "qdrant_url")]
    pub collection: Option<String>,
    /// Shards of a new Qdrant collection [default: one per node].
    #[arg(long, value_name = "N", requires = "qdrant_url", value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: Option<u32>,
    /// Copies of each shard of a new Qdrant collection, on as many nodes [default: 1].
    #[arg(long, value_name = "N", requires = "qdrant_url", value_parser = clap::value_parser!(u32).range(1..))]
    pub replication_factor: Option<u32>,
}

/// The largest file `index` and `serve --watch` read by default: as
/// `add_repository`'s, 1 MiB. A bigger text file is generated or data
/// (a 30 MB log makes tens of thousands of chunks) rather than code.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 20;

/// `index` alone, to parse its command line.
#[derive(Parser)]
#[command(name = "index")]
struct IndexCommandLine {
    #[command(flatten)]
    args: IndexArgs,
}

/// `index DIR --store STORE [--embedder NAME]` as the command line would
/// run it: what `eval suite` indexes and `serve --watch` follows.
pub fn for_store(dir: &Path, store: &Path, embedder: Option<&str>) -> Result<IndexArgs, String> {
    let mut words: Vec<&std::ffi::OsStr> =
        vec!["index".as_ref(), dir.as_os_str(), "--store".as_ref(), store.as_os_str()];
    if let Some(embedder) = embedder {
        words.extend([std::ffi::OsStr::new("--embedder"), std::ffi::OsStr::new(embedder)]);
    }
    IndexCommandLine::try_parse_from(words).map(|line| line.args).map_err(|e| e.to_string())
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
pub fn request(args: &IndexArgs) -> Result<IndexRequest, String> {
    let file = match &args.config {
        Some(path) => crate::index_config::load(path)?,
        None => IndexConfig::default(),
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
    options.selection.max_file_bytes = args.max_file_bytes;
    options.chunking.chunk_size = args.chunk_size.or(file.chunking.chunk_size).unwrap_or(512);
    options.chunking.chunk_overlap = args.chunk_overlap.or(file.chunking.chunk_overlap).unwrap_or(64);
    // A Qdrant collection records its embedder itself (see `qdrant_target`).
    let to_qdrant = args.qdrant_url.is_some();
    if to_qdrant && file.chroma.server_url.is_some() {
        return Err("--qdrant-url and a Chroma target in --config: index into one of them".into());
    }
    let to_chroma = args.chroma.chroma_url.is_some() || file.chroma.server_url.is_some();
    if to_chroma
        && args.lexical_index.is_none()
        && let Some(flag) = embedder_flag(args)
    {
        return Err(format!(
            "{flag} chooses the embedder of an embedded store or of a lexical index; with --chroma-url the \
             vectors come from --embedding-api-url unless --lexical-index is given"
        ));
    }
    let chroma = if to_qdrant { None } else { chroma_target(args, &file)? };
    let store = args.lexical_index.clone().unwrap_or_else(|| args.store.dir());
    if !to_qdrant {
        choose_embedder(args, &file, &store)?;
    }
    Ok(IndexRequest {
        root: args.dir.clone(),
        store,
        identity: identity(args),
        options,
        batch_size: args.batch_size.or(file.sync.batch_size).unwrap_or(100),
        dry_run: args.dry_run,
        output_manifest: args.output_manifest.clone(),
        progress: None,
        chunking: args.chunking.as_deref().map(str::parse).transpose()?,
        lexical_index: args.lexical_index.is_some(),
        chroma,
    })
}

/// The first flag that chooses a new store's embedder, if any is given.
fn embedder_flag(args: &IndexArgs) -> Option<&'static str> {
    [
        (args.embedder.is_some(), "--embedder"),
        (args.query_prefix.is_some(), "--query-prefix"),
        (args.document_prefix.is_some(), "--document-prefix"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// A new store's embedder and prefixes, when the flags name them (an
/// existing store refuses others).
fn choose_embedder(args: &IndexArgs, file: &IndexConfig, store: &Path) -> Result<(), String> {
    if embedder_flag(args).is_none() {
        return Ok(());
    }
    let endpoint = match args.embedder.as_deref() {
        Some("openai") => {
            let api_url = args.chroma.embedding_api_url.clone().or(file.embedding.api_url.clone());
            let model = args.chroma.embedding_model.clone().or(file.embedding.model.clone());
            match (api_url.filter(|u| !u.is_empty()), model.filter(|m| !m.is_empty())) {
                (Some(api_url), Some(model)) => Some(rr_engine::local::EmbeddingEndpoint { api_url, model }),
                _ => return Err("--embedder openai needs --embedding-api-url and --embedding-model".into()),
            }
        }
        _ => None,
    };
    rr_engine::local::choose_settings(
        store,
        args.embedder.as_deref(),
        args.query_prefix.as_deref(),
        args.document_prefix.as_deref(),
        endpoint,
        args.dry_run,
    )
    .map(drop)
    .map_err(|e| e.to_string())
}

/// The Chroma collection `--chroma-url` (or the YAML file) names, if any.
fn chroma_target(args: &IndexArgs, file: &IndexConfig) -> Result<Option<ChromaTarget>, String> {
    let Some(server_url) = args.chroma.chroma_url.clone().or(file.chroma.server_url.clone()) else {
        return Ok(None);
    };
    let chroma = &args.chroma;
    let target = ChromaTarget {
        server_url,
        collection_name: chroma.collection_name.clone().or(file.chroma.collection_name.clone()).unwrap_or_default(),
        tenant: file.chroma.tenant.clone().unwrap_or_else(|| chroma.tenant.clone()),
        database: file.chroma.database.clone().unwrap_or_else(|| chroma.database.clone()),
        // Secrets only from the environment, never from the command line or a file.
        bearer_token: std::env::var("CHROMA_REPO_SEARCH_BEARER_TOKEN").ok().filter(|s| !s.is_empty()),
        embedding_api_url: chroma.embedding_api_url.clone().or(file.embedding.api_url.clone()).unwrap_or_default(),
        embedding_model: chroma.embedding_model.clone().or(file.embedding.model.clone()).unwrap_or_default(),
        embedding_api_key: std::env::var("CHROMA_REPO_SEARCH_EMBEDDING_API_KEY").ok().filter(|s| !s.is_empty()),
    };
    if target.collection_name.is_empty() {
        return Err("a Chroma target needs a collection name".into());
    }
    // With a lexical index, the index's embedder makes the vectors.
    if args.lexical_index.is_none() && (target.embedding_api_url.is_empty() || target.embedding_model.is_empty()) {
        return Err("a Chroma target needs a collection name, an embedding API URL and an embedding model".into());
    }
    Ok(Some(target))
}

/// The Qdrant collection `--qdrant-url` names, if any, with the embedder a
/// new collection gets.
pub fn qdrant_target(args: &IndexArgs) -> Result<Option<QdrantTarget>, String> {
    let Some(url) = args.qdrant_url.clone() else { return Ok(None) };
    let collection = args.collection.clone().unwrap_or_default();
    if collection.is_empty() {
        return Err("--collection must name a Qdrant collection".into());
    }
    let endpoint = match args.embedder.as_deref() {
        Some("openai") => match (&args.chroma.embedding_api_url, &args.chroma.embedding_model) {
            (Some(api_url), Some(model)) if !api_url.is_empty() && !model.is_empty() => {
                Some(rr_engine::local::EmbeddingEndpoint { api_url: api_url.clone(), model: model.clone() })
            }
            _ => return Err("--embedder openai needs --embedding-api-url and --embedding-model".into()),
        },
        _ => None,
    };
    Ok(Some(QdrantTarget {
        url,
        collection,
        // Secrets only from the environment, never from the command line or a file.
        api_key: std::env::var(rr_engine::qdrant::API_KEY_ENV).ok().filter(|s| !s.is_empty()),
        embedder: args.embedder.clone(),
        endpoint,
        query_prefix: args.query_prefix.clone(),
        document_prefix: args.document_prefix.clone(),
        shards: args.shards,
        replication_factor: args.replication_factor,
    }))
}

/// Indexes, with a progress bar on a terminal, and prints the summary.
pub async fn run(args: IndexArgs) -> Result<bool, String> {
    let qdrant = qdrant_target(&args)?;
    let mut request = request(&args)?;
    let bar = super::output::progress_bar(&format!("indexing {}", args.dir.display()));
    if let Some(bar) = &bar {
        let bar = bar.clone();
        request.progress = Some(std::sync::Arc::new(move |p: rr_indexer::sync::SyncProgress| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(format!("{:?}", p.phase).to_lowercase());
        }));
    }
    let summary = match &qdrant {
        Some(target) => rr_engine::qdrant::index(request, target).await.map_err(|e| e.to_string()),
        None => rr_engine::local::index(request).await.map_err(|e| e.to_string()),
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let summary = summary?;
    for skipped in &summary.files_skipped {
        eprintln!("skipped {}: {}", skipped.path, skipped.reason);
    }
    super::output::stdout(&format!("{}\n", summary.to_json()))?;
    Ok(true)
}
