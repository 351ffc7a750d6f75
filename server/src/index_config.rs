//! The YAML file of `chromadb-repo-indexer` (version 1), read by `index
//! --config`: its `files`, `chunking` and `sync` keys select and cut files
//! exactly as the reference does; `chroma` and `embedding` describe a Chroma
//! target. Command-line flags override the file.
//!
//! The drop-in server reads the same file ([`parse`], for `--config`); both
//! go through `serde-saphyr` with unknown keys refused, and its errors name
//! the line and column.

use std::path::Path;

use serde::{Deserialize, Deserializer};

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexConfig {
    pub version: Option<i64>,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub chroma: ChromaSection,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub files: FilesSection,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub chunking: ChunkingSection,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub sync: SyncSection,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub embedding: EmbeddingSection,
}

/// A section written with no keys (`chroma:` alone, or `chroma: ~`) is an
/// empty section, as the reference reads it.
fn null_is_empty<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChromaSection {
    pub server_url: Option<String>,
    pub collection_name: Option<String>,
    pub tenant: Option<String>,
    pub database: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesSection {
    pub include_paths: Option<Vec<String>>,
    pub exclude_paths: Option<Vec<String>>,
    pub include_extensions: Option<Vec<String>>,
    pub exclude_extensions: Option<Vec<String>>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkingSection {
    pub chunk_size: Option<usize>,
    pub chunk_overlap: Option<usize>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncSection {
    pub batch_size: Option<usize>,
    /// Signed: the drop-in refuses a value below 1 with its own message.
    pub retry_attempts: Option<i64>,
}

/// `api_key` is accepted for compatibility with the reference's files but
/// never read: secrets come from the environment only.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSection {
    pub api_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
}

/// Reads and checks a version 1 file.
pub fn load(path: &Path) -> Result<IndexConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read config file: {}: {e}", path.display()))?;
    let config = parse(&text).map_err(|e| format!("parse config file {}: {e}", path.display()))?;
    if config.version != Some(1) {
        return Err("config version must be 1".into());
    }
    Ok(config)
}

/// Decodes the file's text; the version is the caller's to check. The
/// message names the line and column. No source snippet is quoted: the
/// lines around a mistake may hold an API key.
pub fn parse(text: &str) -> Result<IndexConfig, String> {
    let options = || serde_saphyr::options! { with_snippet: false };
    // Syntax first: the typed pass stops at the first value of a wrong type,
    // which can lie before a syntax error (the reference reports the latter).
    serde_saphyr::from_str_with_options::<serde::de::IgnoredAny>(text, options()).map_err(|e| e.to_string())?;
    match serde_saphyr::from_str_with_options::<Option<IndexConfig>>(text, options()) {
        Ok(Some(config)) => Ok(config),
        Ok(None) => Err("EOF: the file holds no YAML document".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<IndexConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, text).unwrap();
        load(&path)
    }

    #[test]
    fn reads_the_reference_keys() {
        let c = parse(
            "version: 1\nfiles:\n  include_paths: [\"src/**\"]\n  exclude_extensions: [.md]\nchunking:\n  chunk_size: 256\n  chunk_overlap: 32\nsync:\n  batch_size: 50\n  retry_attempts: 2\nchroma:\n  server_url: http://c\n  collection_name: repo\nembedding:\n  api_url: http://e\n  model: m\n",
        )
        .unwrap();
        assert_eq!(c.files.include_paths, Some(vec!["src/**".to_owned()]));
        assert_eq!(c.files.exclude_extensions, Some(vec![".md".to_owned()]));
        assert_eq!(c.chunking.chunk_size, Some(256));
        assert_eq!(c.sync.batch_size, Some(50));
        assert_eq!(c.chroma.collection_name.as_deref(), Some("repo"));
        assert_eq!(c.embedding.model.as_deref(), Some("m"));
    }

    #[test]
    fn refuses_other_versions_and_unknown_keys() {
        assert_eq!(parse("version: 2\n").unwrap_err(), "config version must be 1");
        assert_eq!(parse("files: {}\n").unwrap_err(), "config version must be 1");
        let err = parse("version: 1\nchunking:\n  size: 3\n").unwrap_err();
        assert!(err.contains("unknown field `size`"), "{err}");
        let err = parse("version: 1\nchroma:\n  bearer_token: x\n").unwrap_err();
        assert!(err.contains("unknown field `bearer_token`"), "{err}");
    }
}
