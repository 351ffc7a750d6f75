//! The repo-retriever MCP server.
//!
//! Started with the flags, environment and YAML of `mcp-chromadb-repo-search`
//! it answers exactly as that server does. The MCP surface (tools, stdio and
//! Streamable HTTP) is the `rr-mcp` crate; this crate is the command line,
//! the configuration and the wiring of engines and navigation into it.

pub mod app;
pub mod cli;
pub mod config;
pub mod eval;
pub mod index_config;
pub mod limits;
pub mod local;
pub mod mcp_nav;
pub mod nav;
pub mod stores;

// Registered through `inventory` only: nothing names these crates, so keep
// them linked for `plugins` and `serve --stores` to find their kinds.
use rr_cross_encoder as _;
use rr_qdrant as _;
use rr_rerank_apis as _;
use rr_rerank_lexical as _;
