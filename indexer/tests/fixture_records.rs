//! The records built for the fixture corpora must equal, field by field, the
//! records the reference indexer (`chromadb-repo-indexer` 1.2.0) wrote for
//! them with default chunking:
//!
//! - `testdata/corpus`: 89 records, identity acme/widgets@main;
//! - `testdata/polyglot/corpus`: 222 records in all 24 languages the
//!   reference splits by syntax tree, identity acme/polyglot@main.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rr_indexer::{Identity, IndexOptions, build};
use serde_json::Value;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const POLYGLOT_COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

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

/// A record's key: path and chunk index.
type Key = (String, i64);

/// The outcome of comparing our records with the reference's.
struct Comparison {
    /// The reference records, by key.
    expected: BTreeMap<Key, Value>,
    /// Keys of reference records we reproduced exactly.
    equal: Vec<Key>,
    /// What differs, one line each, prefixed with `path#chunk:`.
    mismatches: Vec<String>,
}

impl Comparison {
    /// `language → (records, identical)`, with `text` and `markdown` for the files the reference
    /// gives no language.
    fn per_language(&self) -> BTreeMap<String, (usize, usize)> {
        let mut table: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (key, record) in &self.expected {
            let metadata = &record["metadata"];
            let language = metadata["language"].as_str().filter(|l| !l.is_empty());
            let language = language.or(metadata["file_type"].as_str()).unwrap_or("?").to_owned();
            let row = table.entry(language).or_default();
            row.0 += 1;
            row.1 += usize::from(self.equal.contains(key));
        }
        table
    }
}

/// Builds `corpus` under `identity` and compares every record with `records` (a records.jsonl).
fn compare(corpus: &Path, records: &Path, identity: &Identity) -> Comparison {
    let jsonl = std::fs::read_to_string(records).unwrap_or_else(|e| panic!("read {}: {e}", records.display()));
    let mut expected: BTreeMap<Key, Value> = BTreeMap::new();
    for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
        let record: Value = serde_json::from_str(line).expect("valid JSON line");
        let metadata = &record["metadata"];
        let key = (metadata["path"].as_str().unwrap().to_owned(), metadata["chunk_index"].as_i64().unwrap());
        expected.insert(key, record);
    }

    let built = build(corpus, identity, &IndexOptions::default()).expect("build the corpus");
    let mut actual: BTreeMap<Key, Value> = BTreeMap::new();
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
    let mut equal = Vec::new();
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
            equal.push(key.clone());
        }
    }
    for key in actual.keys().filter(|k| !expected.contains_key(*k)) {
        mismatches.push(format!("{}#{}: not in the reference records", key.0, key.1));
    }
    Comparison { expected, equal, mismatches }
}

impl Comparison {
    /// Asserts that exactly the records in `expected_differences` differ, and all others are equal.
    /// A listed record that matches fails too, so that the list never outlives its reason.
    fn assert_equal_except(&self, total: usize, expected_differences: &[(&str, &str)]) {
        assert_eq!(self.expected.len(), total, "the fixture holds {total} records");
        let mut differing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for line in &self.mismatches {
            differing.entry(line.split(": ").next().unwrap_or_default()).or_default().push(line);
        }
        let listed: BTreeMap<&str, &str> = expected_differences.iter().copied().collect();
        let unexpected: Vec<&str> = differing
            .iter()
            .filter(|(record, _)| !listed.contains_key(*record))
            .flat_map(|(_, lines)| lines.clone())
            .collect();
        let now_equal: Vec<&str> = listed.keys().copied().filter(|record| !differing.contains_key(record)).collect();
        assert!(
            unexpected.is_empty() && now_equal.is_empty(),
            "{}/{total} records equal.\nunexpected differences:\n{}\nlisted as different but equal now: {now_equal:?}",
            self.equal.len(),
            unexpected.join("\n"),
        );
        assert_eq!(self.equal.len(), total - expected_differences.len());
    }
}

#[test]
fn records_equal_the_reference_field_by_field() {
    let identity = Identity::new("acme", "widgets", "main", COMMIT);
    let result = compare(&testdata().join("corpus"), &testdata().join("records.jsonl"), &identity);
    result.assert_equal_except(89, &[]);
}

/// Records of the polyglot fixture that we knowingly do not reproduce, with the reason (none: every
/// grammar difference listed in indexer/README.md leaves this corpus's records unchanged).
const POLYGLOT_EXPECTED_DIFFERENCES: [(&str, &str); 0] = [];

#[test]
fn polyglot_records_equal_the_reference_in_every_language() {
    let identity = Identity::new("acme", "polyglot", "main", POLYGLOT_COMMIT);
    let polyglot = testdata().join("polyglot");
    let result = compare(&polyglot.join("corpus"), &polyglot.join("records.jsonl"), &identity);
    let table: Vec<String> = result
        .per_language()
        .iter()
        .map(|(language, (records, equal))| format!("{language:<12} {equal:>3}/{records:<3}"))
        .collect();
    eprintln!("polyglot records identical per language:\n{}", table.join("\n"));
    // Every language of the reference's table, and Markdown and plain text, is in the fixture.
    assert_eq!(table.len(), 26, "{table:?}");
    result.assert_equal_except(222, &POLYGLOT_EXPECTED_DIFFERENCES);
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
