//! Support code for the workspace's tests and benches, used only as a dev-dependency.
//!
//! The integration tests run against the real thing (a Chroma 1.5.9 server, the deterministic embed
//! server of `testdata/embed_server.py`, the records the reference indexer wrote), and several
//! crates need them. Starting them right is subtle enough (a watchdog that outlives no test process,
//! retries on a taken port, one remembered failure instead of one timeout per test) that it is
//! written once, here.
//!
//! The kit depends on no workspace crate, so any of them (the indexer and the stores included) can
//! take it as a dev-dependency without a cycle. Everything here panics on failure: it is test code.

mod bench;
mod fixture;
mod git;
mod services;

pub use bench::{Rng, vm_rss_mib};
pub use fixture::{FIXTURE_RECORDS, copy_dir, fixture_records, record_embedding, testdata_dir, workspace_root};
pub use git::git;
pub use services::{Service, chroma, chroma_bin, embed_server, free_port, init_once, panic_message};
