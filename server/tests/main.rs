//! The integration tests of `repo-retriever`, one test binary with a module per area (Cargo.toml sets
//! `autotests = false` and names this file). One module runs with a filter on its path:
//!
//! ```sh
//! cargo test -p repo-retriever --test integration e2e_local::
//! ```
//!
//! The services the tests start (Chroma, the embed server; see [`support`]) are shared by every module.

mod support;

mod config;
mod e2e_cli;
mod e2e_eval;
mod e2e_federation;
mod e2e_http;
mod e2e_local;
mod e2e_rerank;
mod e2e_stdio;
mod fuzz;
mod harness;
mod hostile;
mod logging;
mod nav_tools;
mod serve_chroma;
mod serve_http;
