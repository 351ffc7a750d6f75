//! The record schema, which both the records and the chunking key name.

/// The record schema version (metadata `schema_version`).
pub const SCHEMA_VERSION: i64 = 1;
