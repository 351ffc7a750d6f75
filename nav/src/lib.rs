//! Repository navigation: the seven CodeSage tools and two resources over
//! our own index (seed 003).
//!
//! Agents use `search` to find a passage and these tools to move from it to
//! the whole file, the definitions around it and the repository's shape.
//! Everything is read through a [`NavSource`](source::NavSource), and
//! `add_repository` writes through a
//! [`RepositoryIndexer`](source::RepositoryIndexer): traits this crate
//! defines and the engine implements over the embedded store (whole files
//! from its `files` table) and a Chroma collection filled by the reference
//! indexer (files rebuilt from their chunks, [`reassemble`]), so this crate
//! names no backend.
//! Definitions are derived from the chunks' `symbol`/`section` metadata
//! into the catalogue (`catalog.rs`), which also numbers the repositories.
//! The tools run on the blocking pool: each is a handful of SQLite reads
//! and, for `find_patterns`, a scan bounded by time budgets.

pub mod add_repository;
pub mod address;
pub mod analyze;
pub mod args;
pub mod catalog;
pub mod dispatch;
pub mod entities;
pub mod error;
pub mod files;
pub mod find_patterns;
pub mod get_file;
pub mod limits;
pub mod list_definitions;
pub mod reassemble;
pub mod repos;
pub mod schema;
pub mod search_code;
pub mod service;
pub mod source;

pub use error::NavError;
pub(crate) use files::counts;
pub use files::{FileText, extension_language};
pub(crate) use service::pretty;
pub use service::{ADD_UNAVAILABLE, NavConfig, NavService, SCHEME, TOOLS, ToolResult};
