//! Checks on the shape of a Chroma reply.
//!
//! Chroma answers a query with parallel lists (ids, documents, metadatas,
//! distances), one list per query embedding. A reply whose lists do not line
//! up, or whose metadata is not what the indexer writes, cannot be rendered
//! faithfully: read leniently it shows up as "no results" or as a result
//! with an empty repository (`/@`). So it is an error that says what was
//! wrong, without quoting the reply (which stays in the debug log).

use rr_core::Metadata;
use rr_http::HttpError;
use serde_json::Value;

/// The schema fields of a record's metadata (see `rr_core::Metadata`).
const SCHEMA_FIELDS: [&str; 22] = [
    "schema_version",
    "namespace_id",
    "organization",
    "repository",
    "branch",
    "path",
    "file_name",
    "file_extension",
    "file_type",
    "language",
    "document_id",
    "file_hash",
    "chunk_hash",
    "chunk_index",
    "chunk_count",
    "chunking_strategy",
    "chunking_version",
    "start_line",
    "end_line",
    "section",
    "symbol",
    "indexed_commit_sha",
];

pub(crate) fn malformed(operation: &str, detail: impl Into<String>) -> HttpError {
    HttpError::Malformed { operation: operation.to_owned(), detail: detail.into() }
}

/// `fields` (name, length) must each be as long as the ids.
pub(crate) fn same_lengths(operation: &str, ids: usize, fields: &[(&str, usize)]) -> Result<(), HttpError> {
    match fields.iter().find(|(_, len)| *len != ids) {
        Some((name, len)) => Err(malformed(operation, format!("{ids} ids but {len} {name}"))),
        None => Ok(()),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// One metadata entry: an object (or `null`, a record without metadata)
/// whose schema fields have their schema types.
pub(crate) fn metadata(operation: &str, index: usize, value: Value) -> Result<Metadata, HttpError> {
    let map = match value {
        Value::Null => return Ok(Metadata::default()),
        Value::Object(map) => map,
        other => return Err(malformed(operation, format!("metadata {index} is {}, not an object", kind(&other)))),
    };
    let metadata = Metadata::from_map(map);
    // `from_map` keeps a schema field of the wrong type in `extra`.
    if let Some(field) = SCHEMA_FIELDS.iter().find(|f| metadata.extra.contains_key(**f)) {
        let found = kind(&metadata.extra[*field]);
        let wanted = if field.ends_with("_version")
            || field.ends_with("_index")
            || field.ends_with("_count")
            || field.ends_with("_line")
        {
            "a number"
        } else {
            "a string"
        };
        return Err(malformed(operation, format!("metadata {index} field `{field}` is {found}, not {wanted}")));
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_of_the_wrong_type_is_named() {
        let op = "Chroma query";
        assert_eq!(metadata(op, 0, Value::Null).unwrap(), Metadata::default());
        let ok = metadata(op, 0, json!({"organization": "acme", "start_line": 3, "custom": [1]})).unwrap();
        assert_eq!((ok.organization.as_str(), ok.start_line), ("acme", 3));
        let err = |v: Value| metadata(op, 2, v).unwrap_err().to_string();
        assert_eq!(err(json!("x")), "Chroma query returned a malformed reply: metadata 2 is a string, not an object");
        assert_eq!(err(json!([1])), "Chroma query returned a malformed reply: metadata 2 is a list, not an object");
        assert_eq!(
            err(json!({"organization": 5})),
            "Chroma query returned a malformed reply: metadata 2 field `organization` is a number, not a string"
        );
        assert_eq!(
            err(json!({"start_line": "3"})),
            "Chroma query returned a malformed reply: metadata 2 field `start_line` is a string, not a number"
        );
        assert_eq!(SCHEMA_FIELDS.len(), 22);
    }
}
