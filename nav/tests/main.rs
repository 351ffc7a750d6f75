//! The integration tests of `rr-nav`, one test binary with a module per area (Cargo.toml sets
//! `autotests = false` and names this file). One module runs with a filter on its path:
//!
//! ```sh
//! cargo test -p rr-nav --test integration chroma::
//! ```
//!
//! The services the Chroma tests start (Chroma, the embed server; see [`support`]) are shared by
//! every module.

mod support;

mod add_repository;
mod chroma;
mod source;
