//! The integration tests of `rr-indexer`, one test binary with a module per area (Cargo.toml sets
//! `autotests = false` and names this file). One module runs with a filter on its path:
//!
//! ```sh
//! cargo test -p rr-indexer --test integration sync::
//! ```

mod fixture_records;
mod selection;
mod sync;
