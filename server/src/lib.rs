//! The repo-retriever MCP server.
//!
//! Started with the flags, environment and YAML of `mcp-chromadb-repo-search`
//! it answers exactly as that server does; the modules split the work the way
//! a request flows: configuration, the MCP tool, the two transports and the
//! byte-level wire encoding they share.

pub mod app;
pub mod cli;
pub mod config;
pub mod eval;
pub mod http;
pub mod index_config;
pub mod limits;
pub mod local;
pub mod nav;
pub mod protocol;
pub mod stdio;
pub mod stores;
pub mod tool;
pub mod wire;

// Registered through `inventory` only: nothing names these crates, so keep
// them linked for `plugins` and `serve --stores` to find their kinds.
use rr_cross_encoder as _;
use rr_qdrant as _;
use rr_rerank_apis as _;
use rr_rerank_lexical as _;
