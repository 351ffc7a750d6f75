//! The repo-retriever MCP server.
//!
//! Started with the flags, environment and YAML of `mcp-chromadb-repo-search`
//! it answers exactly as that server does; the modules split the work the way
//! a request flows: configuration, the MCP tool, the two transports and the
//! byte-level wire encoding they share.

pub mod app;
pub mod cli;
pub mod config;
pub mod http;
pub mod index_config;
pub mod protocol;
pub mod stdio;
pub mod tool;
pub mod wire;

// The libraries the binary wires together, under the paths its modules and
// tests name them by.
pub use rr_engine::{local, stores};
pub use rr_nav as nav;
pub use rr_nav::limits;
