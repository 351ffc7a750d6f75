//! The repo-retriever MCP server.
//!
//! Started with the flags, environment and YAML of `mcp-chromadb-repo-search`
//! it answers exactly as that server does; the modules split the work the way
//! a request flows: configuration, the MCP tool, the two transports and the
//! byte-level wire encoding they share.

pub mod app;
pub mod cli;
pub mod config;
pub mod goflag;
pub mod http;
pub mod index_config;
pub mod local;
pub mod nav;
pub mod protocol;
pub mod stdio;
pub mod stores;
pub mod tool;
pub mod wire;

// Registered through `inventory` only: nothing names the crate, so keep it
// linked for `plugins` and `serve --stores` to find the `qdrant` store kind.
use rr_qdrant as _;
