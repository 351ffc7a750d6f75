//! Search engines and indexes built from what an operator configures.
//!
//! Every store, embedder and reranker is created by kind through the plugin
//! registry ([`rr_core::Registry`]), defaults included, so a backend a third
//! party registers is as reachable as the built-in ones. Two configurations
//! live here because the CLI, the navigation tools and the eval harness all
//! read them: an embedded store folder ([`local`]: index a folder, open it,
//! search it) and a `serve --stores` file ([`stores`]: several named stores
//! searched as one). The drop-in's flags, environment and YAML stay in the
//! server binary, which builds its Chroma engine through the same registry.

pub mod beside;
pub mod copied;
pub mod local;
pub mod nav_chroma;
pub mod nav_embedded;
pub mod qdrant;
pub mod retrieval;
pub mod stores;
pub mod watch;

// Registered through `inventory` only: nothing names these crates, so keep
// them linked for the registry (and `plugins`, `serve --stores`, `eval`) to
// find their kinds.
use rr_cross_encoder as _;
use rr_hash_embed as _;
use rr_potion as _;
use rr_qdrant as _;
use rr_rerank_apis as _;
use rr_rerank_lexical as _;
use rr_rerank_openai as _;

/// The name every backend request and `serverInfo` carry.
pub const NAME: &str = "repo-retriever";

/// `repo-retriever/<version>`, sent as the User-Agent.
pub fn user_agent() -> String {
    format!("{NAME}/{}", env!("CARGO_PKG_VERSION"))
}
