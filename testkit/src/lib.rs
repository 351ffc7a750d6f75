//! Support code for the workspace's tests and benches, used only as a dev-dependency.
//!
//! The integration tests run against the real thing (a Chroma 1.5.9 server, the deterministic embed
//! server of `testdata/embed_server.py`, the records the reference indexer wrote), and several
//! crates need them. Starting them right is subtle enough (a watchdog that outlives no test process,
//! retries on a taken port, one remembered failure instead of one timeout per test) that it is
//! written once, here.
//!
//! Beside them: Chroma's REST API as the tests use it, the fixture collection set up once per test
//! binary ([`fixture`]), and a loopback `git daemon` serving a small repository ([`serve_git`]).
//!
//! The kit depends on no workspace crate, so any of them (the indexer and the stores included) can
//! take it as a dev-dependency without a cycle. Everything here panics on failure: it is test code.

mod bench;
mod chroma_api;
mod fixture;
mod git;
mod services;

pub use bench::{Rng, vm_rss_mib};
pub use chroma_api::{
    DATABASE, FIXTURE_COLLECTION, Fixture, TENANT, chroma_query, collection_count, collection_get, collections_url,
    create_tenant_database, delete_collection, delete_collection_in, fixture, load_fixture, load_fixture_subset,
    load_records, load_records_in, send_json,
};
pub use fixture::{FIXTURE_RECORDS, copy_dir, corpus, fixture_records, record_embedding, testdata_dir, workspace_root};
pub use git::{Daemon, git, serve_git};
pub use services::{EMBED_MODEL, Service, chroma, chroma_bin, embed_server, free_port, init_once, panic_message};
