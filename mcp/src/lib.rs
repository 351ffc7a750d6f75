//! The MCP surface of repo-retriever, on rmcp (the official Rust SDK).
//!
//! rmcp owns the protocol: message types, the `initialize` handshake and
//! version negotiation, request concurrency, `notifications/cancelled`, and
//! the Streamable HTTP service. This crate adds what a drop-in for the
//! reference server needs on top of it:
//!
//! - [`server::McpServer`], the `ServerHandler`: the `search` tool and, when
//!   a [`server::Navigation`] is attached, the navigation tools and
//!   resources, routed through an rmcp `ToolRouter` whose input schemas are
//!   derived from typed argument structs;
//! - [`frame`], a check in front of rmcp's typed decoding: every message
//!   rmcp would refuse without an answer (broken JSON, invalid UTF-8, ids
//!   beyond 64 bits or fractional, a wrong `jsonrpc` tag, batches) gets a
//!   JSON-RPC error carrying the request's id when it can be read, and ids
//!   rmcp cannot hold travel through it as their original text;
//! - [`auth`], the bearer tokens and allowed origins of `serve --http`;
//! - [`telemetry`], the Prometheus metrics of tool calls and the health and
//!   readiness answers;
//! - [`stdio`], newline-delimited JSON-RPC framing with a length cap and the
//!   session gate of the reference (one `initialize`, then requests);
//! - [`http`], rmcp's stateless Streamable HTTP service (JSON responses) in
//!   axum, behind tower layers for the Host guard, the per-request log line,
//!   the body cap and read timeouts, the rate limit, and the framing check;
//!   the plain requests among them (a tool call, a listing, a ping) reach
//!   the handler directly, without the service rmcp starts per request.

pub mod auth;
mod direct;
pub mod frame;
pub mod http;
pub mod ratelimit;
pub mod search;
pub mod server;
pub mod stdio;
pub mod telemetry;
mod timer;

pub use rr_core::{SHOWN_CHARS, shown};
pub use search::{ErrorText, ToolLog, ToolOutcome};
pub use server::{McpServer, Navigation};
