//! Chroma's v2 HTTP API as a [`VectorStore`].
//!
//! A search is two requests, as in the reference server: resolve the
//! collection's id from its name (`GET .../collections/<name>`), then query it
//! (`POST .../collections/<id>/query`) with the metadata equalities in `where`
//! and the path glob as a `$regex` on the document text in `where_document`,
//! so Chroma filters *before* ranking.
//!
//! # The collection id is cached, without changing any answer
//!
//! The reference looks the id up on every search. We keep it after the first
//! successful lookup, which saves a round trip per search, but a client must
//! not be able to tell: every error text has to be the one the reference
//! would have produced. So when a query made with a *cached* id fails in any
//! way (an HTTP status, a transport error, a bad body), the cache is dropped
//! and the lookup redone, which is the request the reference would have made
//! first:
//!
//! - the lookup fails → its error is returned, exactly what the reference
//!   would have said;
//! - the id changed (the collection was deleted and recreated) → the query
//!   runs again with the new id and its outcome is the answer;
//! - the id is the same → the original query error is returned, which is
//!   what the reference's query would have returned too.
//!
//! A query that fails right after a fresh lookup is returned as it is: the
//! reference would not have looked up twice either.
//!
//! # Writing
//!
//! [`ChromaStore`] is also the indexer's [`rr_core::IndexStore`] (module
//! `index`): it creates the collection as the reference indexer does, lists a
//! namespace's ids page by page, and upserts and deletes by id. See
//! [`ChromaStore::namespace_ids`](rr_core::IndexStore::namespace_ids) for the
//! order in which it learns the server's batch limit.
//!
//! # Reading a collection back
//!
//! [`ChromaStore::all_ids`] and [`ChromaStore::all_records`] (module `read`)
//! page through the whole collection, for the navigation tools, which
//! rebuild files from the chunks.

mod index;
mod query;
mod read;
mod registry;
mod reply;
mod store;

pub use index::{
    CREATE_OPERATION, DEFAULT_MAX_BATCH_SIZE, DELETE_OPERATION, MAX_BATCH_SIZE_OPERATION, NAMESPACE_OPERATION,
    UPSERT_OPERATION,
};
pub use query::{QUERY_OPERATION, where_clause, where_document};
pub use read::READ_OPERATION;
pub use store::{ChromaConfig, ChromaError, ChromaStore, DEFAULT_PAGE_SIZE, LOOKUP_OPERATION, STORE_NAME};
