//! Errors of the embedded store. Each message names the operation first, the
//! way the HTTP backends do ("Chroma query failed: ..."), because it reaches a
//! client verbatim.

/// The operation name of opening (and migrating) a store.
pub const OPEN_OPERATION: &str = "embedded store open";
/// The operation name of a vector, lexical or hybrid search.
pub const QUERY_OPERATION: &str = "embedded store query";
/// The operation name of an upsert, delete or file write.
pub const WRITE_OPERATION: &str = "embedded store write";
/// The operation name of a read of ids, files or store statistics.
pub const READ_OPERATION: &str = "embedded store read";

/// What can go wrong in the embedded store.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// SQLite reported an error.
    #[error("{operation} failed: {source}")]
    Sqlite {
        operation: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// The store's folder could not be created.
    #[error("{operation} failed: {path}: {source}")]
    Io {
        operation: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A vector's length differs from the store's (fixed by its first write).
    #[error("{operation} failed: embedding of {got} dimensions, the store holds {expected}-dimensional vectors")]
    Dimension { operation: &'static str, expected: usize, got: usize },
    /// A record to write carries no embedding.
    #[error("{operation} failed: record {id:?} has an empty embedding")]
    EmptyEmbedding { operation: &'static str, id: String },
    /// The store was written by a newer build with a schema this one does not know.
    #[error("{OPEN_OPERATION} failed: schema version {found} is newer than this build supports ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
    /// A stored row could not be decoded (the file was edited by hand or damaged).
    #[error("{operation} failed: corrupt row {pk}: {detail}")]
    Corrupt { operation: &'static str, pk: i64, detail: String },
    /// The blocking task running the operation panicked or was cancelled.
    #[error("{operation} failed: background task: {detail}")]
    Task { operation: &'static str, detail: String },
}

impl EmbeddedError {
    pub(crate) fn sqlite(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> Self {
        move |source| EmbeddedError::Sqlite { operation, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_exact() {
        let e = EmbeddedError::Dimension { operation: QUERY_OPERATION, expected: 256, got: 3 };
        assert_eq!(
            e.to_string(),
            "embedded store query failed: embedding of 3 dimensions, the store holds 256-dimensional vectors"
        );
        let e = EmbeddedError::SchemaTooNew { found: 9, supported: 1 };
        assert_eq!(e.to_string(), "embedded store open failed: schema version 9 is newer than this build supports (1)");
        let e = EmbeddedError::EmptyEmbedding { operation: WRITE_OPERATION, id: "a".into() };
        assert_eq!(e.to_string(), "embedded store write failed: record \"a\" has an empty embedding");
    }
}
