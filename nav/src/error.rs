//! Why the navigation service could not read its source or its catalogue.
//!
//! These are the failures under the tools; a tool that meets one answers
//! with its message as an error result (the tools' own refusals, such as an
//! unknown repository or a bad argument, are their texts, not these).

use std::path::PathBuf;

/// A failure of the navigation service, worded for the operator or, through
/// a tool's error result, the client.
#[derive(Debug, thiserror::Error)]
pub enum NavError {
    /// The embedded store refused a read.
    #[error(transparent)]
    Store(#[from] rr_embedded::EmbeddedError),
    /// The Chroma collection could not be read (its client-safe summary:
    /// no URL, no body).
    #[error("cannot read the Chroma collection: {}", .0.summary())]
    Chroma(rr_chroma::ChromaError),
    /// The Chroma reader's runtime could not be started.
    #[error("cannot start the Chroma reader: {0}")]
    ChromaReader(#[source] std::io::Error),
    /// The Chroma reader's runtime is gone (the process is ending).
    #[error("the Chroma reader has stopped")]
    ReaderStopped,
    /// The catalogue's database refused a read or a write.
    #[error(transparent)]
    Catalogue(#[from] rusqlite::Error),
    /// The embedded store's folder could not be opened.
    #[error("cannot open the store at {}: {source}", path.display())]
    OpenStore { path: PathBuf, source: rr_embedded::EmbeddedError },
    /// The catalogue beside the store could not be opened.
    #[error("cannot open the repository catalogue in {}: {source}", path.display())]
    OpenCatalogue { path: PathBuf, source: rusqlite::Error },
    /// The in-memory catalogue of a Chroma collection could not be created.
    #[error("cannot create the repository catalogue: {0}")]
    CreateCatalogue(#[source] rusqlite::Error),
    /// The first refresh, when the service opens.
    #[error("cannot read the store's repositories: {0}")]
    FirstRefresh(#[source] Box<NavError>),
    /// A task of the blocking pool panicked or was cancelled.
    #[error("internal error: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A tool answers a failure underneath it with the failure's message.
impl From<NavError> for String {
    fn from(e: NavError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_the_operator_sees_them() {
        let sqlite = || rusqlite::Error::InvalidQuery;
        let path = PathBuf::from("/s");
        let cases = [
            (NavError::ReaderStopped, "the Chroma reader has stopped".to_owned()),
            (
                NavError::ChromaReader(std::io::Error::other("no threads")),
                "cannot start the Chroma reader: no threads".to_owned(),
            ),
            (
                NavError::OpenCatalogue { path: path.clone(), source: sqlite() },
                format!("cannot open the repository catalogue in /s: {}", sqlite()),
            ),
            (NavError::CreateCatalogue(sqlite()), format!("cannot create the repository catalogue: {}", sqlite())),
            (
                NavError::FirstRefresh(Box::new(NavError::ReaderStopped)),
                "cannot read the store's repositories: the Chroma reader has stopped".to_owned(),
            ),
            (NavError::Catalogue(sqlite()), sqlite().to_string()),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
        assert_eq!(String::from(NavError::ReaderStopped), "the Chroma reader has stopped");
    }
}
