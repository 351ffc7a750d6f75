//! The backend-neutral heart of repo-retriever.
//!
//! A search runs through one fixed pipeline: validate the arguments, embed the
//! query, retrieve candidates from a [`VectorStore`] (filters applied *before*
//! ranking; dense, lexical or hybrid, see [`retrieval`]), optionally rerank them, then [`select`] and [`render`]. Only the
//! three I/O steps are traits; validation, selection and rendering are pure
//! functions, because they carry the output contract that clients depend on and
//! must behave identically whatever store or model sits behind them.
//!
//! This crate deliberately knows nothing about HTTP, Chroma or any model: the
//! backends depend on it, never the other way round.

pub mod code_rank;
pub mod error;
pub mod evidence;
pub mod federated;
pub mod filter;
pub mod paths;
pub mod pipeline;
pub mod query;
pub mod quote;
pub mod record;
pub mod registry;
pub mod render;
pub mod request;
pub mod rerank;
pub mod retrieval;
pub mod select;
pub mod text;
pub mod traits;

pub use code_rank::CodeRank;
pub use error::{BackendError, SearchError};
pub use federated::{FederatedStore, SkippedStore, SourcePattern};
pub use filter::{PathGlob, SearchFilter};
pub use paths::PathClass;
pub use pipeline::{PipelineOptions, RerankOptions, SearchEngine, SearchOutcome, StageTimings};
pub use query::Query;
pub use quote::{SHOWN_CHARS, shown};
pub use record::{Candidate, Chunk, Metadata};
pub use registry::{FactoryContext, FactoryError, PluginKind, Registry, RegistryError};
pub use request::{ArgLimits, SearchArgs, SearchRequest, ValidationError};
pub use rerank::{EmptyChain, RerankChain};
pub use retrieval::{HybridOptions, LexicalQuery, LexicalStore, RetrievalMode, Retriever};
pub use traits::{CallContext, DistanceKind, EmbeddedChunk, Embedder, IndexStore, Reranker, VectorQuery, VectorStore};
