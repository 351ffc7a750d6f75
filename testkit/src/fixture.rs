//! The workspace's test data: `testdata/`, and the records the reference indexer wrote for its corpus.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

/// The number of records in `testdata/records.jsonl`.
pub const FIXTURE_RECORDS: usize = 89;

/// The workspace root (the folder holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("testkit/ has a parent folder").to_path_buf()
}

/// `<workspace>/testdata`.
pub fn testdata_dir() -> PathBuf {
    workspace_root().join("testdata")
}

/// `testdata/corpus`, the fixture repository (the records of `testdata/records.jsonl` are its chunks).
pub fn corpus() -> PathBuf {
    testdata_dir().join("corpus")
}

/// The records of `testdata/records.jsonl`, each `{id, document, metadata, embedding}`, in file order.
pub fn fixture_records() -> &'static [Value] {
    static RECORDS: OnceLock<Vec<Value>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let path = testdata_dir().join("records.jsonl");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let records: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("records.jsonl line is JSON"))
            .collect();
        assert_eq!(records.len(), FIXTURE_RECORDS, "records.jsonl record count");
        records
    })
}

/// A fixture record's `embedding`, as the `f32`s stores hold.
pub fn record_embedding(record: &Value) -> Vec<f32> {
    let values = record["embedding"].as_array().expect("record has an embedding array");
    values.iter().map(|v| v.as_f64().expect("embedding values are numbers") as f32).collect()
}

/// Copies the folder `from` into `to` (created if missing), recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", entry.path().display(), target.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_has_every_record_with_its_fields() {
        let records = fixture_records();
        assert_eq!(records.len(), FIXTURE_RECORDS);
        for r in records {
            assert!(r["id"].is_string() && r["document"].is_string(), "{r}");
            assert!(r["metadata"].is_object() && r["embedding"].is_array(), "{r}");
        }
    }

    #[test]
    fn copy_dir_copies_nested_files() {
        let from = tempdir("from");
        std::fs::create_dir_all(from.join("a/b")).unwrap();
        std::fs::write(from.join("top.txt"), "top").unwrap();
        std::fs::write(from.join("a/b/deep.txt"), "deep").unwrap();
        let to = tempdir("to").join("copy");
        copy_dir(&from, &to);
        assert_eq!(std::fs::read_to_string(to.join("top.txt")).unwrap(), "top");
        assert_eq!(std::fs::read_to_string(to.join("a/b/deep.txt")).unwrap(), "deep");
        std::fs::remove_dir_all(&from).unwrap();
        std::fs::remove_dir_all(to.parent().unwrap()).unwrap();
    }

    fn tempdir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rr-testkit-{what}-{}-{}", std::process::id(), line!()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
