//! The records built for `testdata/corpus` must equal, field by field, the 89
//! records the reference indexer (`chromadb-repo-indexer` 1.2.0) wrote for it
//! (`testdata/records.jsonl`; identity acme/widgets@main at a fixed commit,
//! default chunking).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rr_indexer::{Identity, IndexOptions, build};
use serde_json::Value;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// Shortens a long value for a readable report.
fn show(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 160 { format!("{}…", text.chars().take(160).collect::<String>()) } else { text }
}

/// First differing line of two documents, for the report.
fn first_difference(expected: &str, actual: &str) -> String {
    for (n, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
        if e != a {
            return format!("line {}: expected {e:?}, got {a:?}", n + 1);
        }
    }
    format!("lengths differ: expected {} lines, got {}", expected.lines().count(), actual.lines().count())
}

#[test]
fn records_equal_the_reference_field_by_field() {
    let jsonl = std::fs::read_to_string(testdata().join("records.jsonl")).expect("read testdata/records.jsonl");
    let mut expected: BTreeMap<(String, i64), Value> = BTreeMap::new();
    for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
        let record: Value = serde_json::from_str(line).expect("valid JSON line");
        let metadata = &record["metadata"];
        let key = (metadata["path"].as_str().unwrap().to_owned(), metadata["chunk_index"].as_i64().unwrap());
        expected.insert(key, record);
    }
    assert_eq!(expected.len(), 89, "the fixture holds 89 records");

    let identity = Identity::new("acme", "widgets", "main", COMMIT);
    let built = build(&testdata().join("corpus"), &identity, &IndexOptions::default()).expect("build the corpus");
    let mut actual: BTreeMap<(String, i64), Value> = BTreeMap::new();
    for record in &built.records {
        let key = (record.metadata.path.clone(), record.metadata.chunk_index);
        let value = serde_json::json!({
            "id": record.id,
            "document": record.document,
            "metadata": serde_json::to_value(&record.metadata).unwrap(),
        });
        assert!(actual.insert(key.clone(), value).is_none(), "duplicate record {key:?}");
    }

    let mut mismatches = Vec::new();
    let mut equal = 0;
    for (key, want) in &expected {
        let Some(got) = actual.get(key) else {
            mismatches.push(format!("{}#{}: missing from our records", key.0, key.1));
            continue;
        };
        let before = mismatches.len();
        if want["id"] != got["id"] {
            mismatches.push(format!("{}#{}: id: expected {}, got {}", key.0, key.1, want["id"], got["id"]));
        }
        if want["document"] != got["document"] {
            let (e, a) = (want["document"].as_str().unwrap_or(""), got["document"].as_str().unwrap_or(""));
            mismatches.push(format!("{}#{}: document: {}", key.0, key.1, first_difference(e, a)));
        }
        let (want_meta, got_meta) = (want["metadata"].as_object().unwrap(), got["metadata"].as_object().unwrap());
        for (field, value) in want_meta {
            match got_meta.get(field) {
                Some(ours) if ours == value => {}
                Some(ours) => mismatches.push(format!(
                    "{}#{}: metadata.{field}: expected {}, got {}",
                    key.0,
                    key.1,
                    show(value),
                    show(ours)
                )),
                None => mismatches.push(format!("{}#{}: metadata.{field} missing", key.0, key.1)),
            }
        }
        for field in got_meta.keys().filter(|f| !want_meta.contains_key(*f)) {
            mismatches.push(format!("{}#{}: metadata.{field} is not in the reference", key.0, key.1));
        }
        if mismatches.len() == before {
            equal += 1;
        }
    }
    for key in actual.keys().filter(|k| !expected.contains_key(*k)) {
        mismatches.push(format!("{}#{}: not in the reference records", key.0, key.1));
    }
    assert!(
        mismatches.is_empty(),
        "{equal}/{} records equal; {} mismatches:\n{}",
        expected.len(),
        mismatches.len(),
        mismatches.join("\n")
    );
    assert_eq!(equal, 89);
}

#[test]
fn build_counts_match_the_reference_summary() {
    let identity = Identity::new("acme", "widgets", "main", COMMIT);
    let built = build(&testdata().join("corpus"), &identity, &IndexOptions::default()).expect("build the corpus");
    let stats = built.stats;
    // 17 files: the empty file yields no record, the PNG is binary.
    assert_eq!(stats.files_scanned, 17);
    assert_eq!(stats.files_eligible, 17);
    assert_eq!(stats.files_indexed, 15);
    assert_eq!(stats.files_binary_skipped, 1);
    assert_eq!(stats.files_other_skipped, 0);
}
