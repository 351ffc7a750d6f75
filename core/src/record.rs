//! Records as the reference indexer writes them.
//!
//! [`Metadata`] types the 22 fields of the record schema and keeps anything
//! else in [`Metadata::extra`]. Reading is lenient on purpose: a field of the
//! wrong JSON type reads as empty (or zero), exactly as the reference server
//! treats it, so a collection with a few odd records still renders instead of
//! failing the whole search.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The metadata of one chunk (record schema version 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metadata {
    pub schema_version: i64,
    pub namespace_id: String,
    pub organization: String,
    pub repository: String,
    pub branch: String,
    pub path: String,
    pub file_name: String,
    pub file_extension: String,
    pub file_type: String,
    pub language: String,
    pub document_id: String,
    pub file_hash: String,
    pub chunk_hash: String,
    pub chunk_index: i64,
    pub chunk_count: i64,
    pub chunking_strategy: String,
    pub chunking_version: i64,
    pub start_line: i64,
    pub end_line: i64,
    pub section: String,
    pub symbol: String,
    pub indexed_commit_sha: String,
    /// Fields outside the schema, and schema fields whose value had the wrong type.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A JSON string, or `""` for any other value.
fn text(value: Value, key: &str, extra: &mut BTreeMap<String, Value>) -> String {
    match value {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => {
            extra.insert(key.to_owned(), other);
            String::new()
        }
    }
}

/// A JSON number truncated toward zero, or `0` for any other value.
fn int(value: Value, key: &str, extra: &mut BTreeMap<String, Value>) -> i64 {
    match &value {
        Value::Number(n) => n.as_i64().unwrap_or_else(|| n.as_f64().map_or(0, |f| f as i64)),
        Value::Null => 0,
        _ => {
            extra.insert(key.to_owned(), value);
            0
        }
    }
}

impl Metadata {
    /// Builds metadata from a JSON object, leniently (see the module docs).
    pub fn from_map(map: Map<String, Value>) -> Self {
        let mut m = Metadata::default();
        let mut extra = BTreeMap::new();
        for (key, value) in map {
            match key.as_str() {
                "schema_version" => m.schema_version = int(value, &key, &mut extra),
                "namespace_id" => m.namespace_id = text(value, &key, &mut extra),
                "organization" => m.organization = text(value, &key, &mut extra),
                "repository" => m.repository = text(value, &key, &mut extra),
                "branch" => m.branch = text(value, &key, &mut extra),
                "path" => m.path = text(value, &key, &mut extra),
                "file_name" => m.file_name = text(value, &key, &mut extra),
                "file_extension" => m.file_extension = text(value, &key, &mut extra),
                "file_type" => m.file_type = text(value, &key, &mut extra),
                "language" => m.language = text(value, &key, &mut extra),
                "document_id" => m.document_id = text(value, &key, &mut extra),
                "file_hash" => m.file_hash = text(value, &key, &mut extra),
                "chunk_hash" => m.chunk_hash = text(value, &key, &mut extra),
                "chunk_index" => m.chunk_index = int(value, &key, &mut extra),
                "chunk_count" => m.chunk_count = int(value, &key, &mut extra),
                "chunking_strategy" => m.chunking_strategy = text(value, &key, &mut extra),
                "chunking_version" => m.chunking_version = int(value, &key, &mut extra),
                "start_line" => m.start_line = int(value, &key, &mut extra),
                "end_line" => m.end_line = int(value, &key, &mut extra),
                "section" => m.section = text(value, &key, &mut extra),
                "symbol" => m.symbol = text(value, &key, &mut extra),
                "indexed_commit_sha" => m.indexed_commit_sha = text(value, &key, &mut extra),
                _ => {
                    extra.insert(key, value);
                }
            }
        }
        m.extra = extra;
        m
    }

    /// `org/repo@branch:path`, the key that limits results per file.
    pub fn file_key(&self) -> String {
        format!("{}/{}@{}:{}", self.organization, self.repository, self.branch, self.path)
    }

    /// `path`, then `#L<start>` when start > 0 and `-L<end>` when end > start.
    pub fn path_with_lines(&self) -> String {
        let mut out = self.path.clone();
        out.push_str(&self.line_anchor());
        out
    }

    /// `#L<start>[-L<end>]`, or empty when the start line is unknown.
    pub fn line_anchor(&self) -> String {
        if self.start_line <= 0 {
            return String::new();
        }
        if self.end_line > self.start_line {
            format!("#L{}-L{}", self.start_line, self.end_line)
        } else {
            format!("#L{}", self.start_line)
        }
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Option::<Map<String, Value>>::deserialize(deserializer)?;
        Ok(Metadata::from_map(value.unwrap_or_default()))
    }
}

/// One stored chunk: its id, the full document text (with the indexer's
/// context prefix) and its metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub document: String,
    #[serde(default)]
    pub metadata: Metadata,
}

/// A chunk returned by a store for one query, in relevance order. The score is
/// kept for fusion and evaluation only; it never reaches rendered output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidate {
    pub chunk: Chunk,
    /// Store-specific distance (lower is closer) when the store reports one.
    pub distance: Option<f64>,
}

impl From<Chunk> for Candidate {
    fn from(chunk: Chunk) -> Self {
        Candidate { chunk, distance: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_schema_fields_and_keeps_the_rest() {
        let map = json!({
            "path": "src/lib.rs", "start_line": 3, "end_line": 9.7,
            "section": 5, "custom": "x", "language": null
        });
        let m = Metadata::from_map(map.as_object().unwrap().clone());
        assert_eq!(m.path, "src/lib.rs");
        assert_eq!(m.start_line, 3);
        assert_eq!(m.end_line, 9);
        assert_eq!(m.section, "");
        assert_eq!(m.language, "");
        assert_eq!(m.extra.get("custom"), Some(&json!("x")));
        assert_eq!(m.extra.get("section"), Some(&json!(5)));
    }

    #[test]
    fn line_anchor_follows_the_contract() {
        let mut m = Metadata { path: "a.go".into(), ..Default::default() };
        assert_eq!(m.path_with_lines(), "a.go");
        m.start_line = 4;
        assert_eq!(m.path_with_lines(), "a.go#L4");
        m.end_line = 4;
        assert_eq!(m.path_with_lines(), "a.go#L4");
        m.end_line = 2;
        assert_eq!(m.path_with_lines(), "a.go#L4");
        m.end_line = 9;
        assert_eq!(m.path_with_lines(), "a.go#L4-L9");
    }

    #[test]
    fn null_metadata_reads_as_empty() {
        let c: Chunk = serde_json::from_value(json!({"id": "x", "document": "d", "metadata": null})).unwrap();
        assert_eq!(c.metadata, Metadata::default());
    }
}
