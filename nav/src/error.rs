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
    /// The source (a store, a collection) could not be read; its own words.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
    /// The catalogue's database refused a read or a write.
    #[error(transparent)]
    Catalogue(#[from] rusqlite::Error),
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

impl NavError {
    /// A source's failure, in its own words.
    pub fn from_source(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        NavError::Source(error.into())
    }
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
            (NavError::from_source(std::io::Error::other("disk gone")), "disk gone".to_owned()),
            (
                NavError::OpenCatalogue { path: path.clone(), source: sqlite() },
                format!("cannot open the repository catalogue in /s: {}", sqlite()),
            ),
            (NavError::CreateCatalogue(sqlite()), format!("cannot create the repository catalogue: {}", sqlite())),
            (
                NavError::FirstRefresh(Box::new(NavError::from_source("the reader has stopped"))),
                "cannot read the store's repositories: the reader has stopped".to_owned(),
            ),
            (NavError::Catalogue(sqlite()), sqlite().to_string()),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
        assert_eq!(String::from(NavError::from_source("gone")), "gone");
    }
}
