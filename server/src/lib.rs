//! The repo-retriever MCP server.
//!
//! Started with the flags, environment and YAML of `mcp-chromadb-repo-search`
//! it answers exactly as that server does. The MCP surface (tools, stdio and
//! Streamable HTTP) is the `rr-mcp` crate; this crate is the command line,
//! the configuration and the wiring of engines and navigation into it.

pub mod app;
pub mod cli;
pub mod config;
pub mod index_config;
pub mod limits;
pub mod logging;
pub mod mcp_nav;
