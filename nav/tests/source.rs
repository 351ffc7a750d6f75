//! The navigation service over a source of the test's own, through the traits
//! the engine implements for its stores: what the tools see of a source's
//! repositories, its changes and its failures, with no store behind it.

use std::sync::{Arc, Mutex, PoisonError};

use rr_core::Metadata;
use rr_nav::source::{NamespaceInfo, NavSource, RepositoryIndexer};
use rr_nav::{ADD_UNAVAILABLE, FileText, NavConfig, NavError, NavService};
use serde_json::{Value, json};

const NAMESPACE: &str = "ns-widgets";

/// One repository of whole files, which the test may change or break.
#[derive(Default)]
struct MemorySource {
    /// Path and text of each file, sorted by path.
    files: Mutex<Vec<(String, String)>>,
    /// When set, every read fails with this message.
    broken: Mutex<Option<String>>,
    /// Whether the service checks the fingerprint before every call.
    changes_underneath: bool,
}

impl MemorySource {
    fn with(files: &[(&str, &str)], changes_underneath: bool) -> Arc<Self> {
        let files = files.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())).collect();
        Arc::new(MemorySource { files: Mutex::new(files), changes_underneath, ..Default::default() })
    }

    fn set_file(&self, path: &str, text: &str) {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        files.retain(|(p, _)| p != path);
        files.push((path.to_owned(), text.to_owned()));
        files.sort();
    }

    fn break_with(&self, message: &str) {
        *self.broken.lock().unwrap_or_else(PoisonError::into_inner) = Some(message.to_owned());
    }

    fn check(&self) -> Result<(), NavError> {
        match self.broken.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            Some(message) => Err(NavError::from_source(message)),
            None => Ok(()),
        }
    }

    fn snapshot(&self) -> Vec<(String, String)> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl NavSource for MemorySource {
    fn name(&self) -> &str {
        "memory"
    }

    fn namespaces(&self) -> Result<Vec<NamespaceInfo>, NavError> {
        self.check()?;
        Ok(vec![NamespaceInfo {
            namespace_id: NAMESPACE.into(),
            organization: "acme".into(),
            repository: "widgets".into(),
            branch: "main".into(),
        }])
    }

    fn fingerprint(&self, _: &str) -> Result<String, NavError> {
        self.check()?;
        Ok(self.snapshot().iter().map(|(p, t)| format!("{p}\0{t}\n")).collect())
    }

    fn metadata(&self, namespace_id: &str) -> Result<Vec<Metadata>, NavError> {
        self.check()?;
        Ok(self
            .snapshot()
            .iter()
            .map(|(path, text)| Metadata {
                namespace_id: namespace_id.to_owned(),
                organization: "acme".into(),
                repository: "widgets".into(),
                branch: "main".into(),
                path: path.clone(),
                start_line: 1,
                end_line: text.lines().count() as i64,
                ..Default::default()
            })
            .collect())
    }

    fn files(&self, _: &str, _: &[Metadata]) -> Result<Vec<FileText>, NavError> {
        self.check()?;
        Ok(self
            .snapshot()
            .into_iter()
            .map(|(path, content)| FileText {
                line_count: content.lines().count(),
                language: rr_nav::extension_language(&path),
                path,
                content,
                missing_lines: Vec::new(),
            })
            .collect())
    }

    fn file_count(&self, _: &str) -> Result<usize, NavError> {
        self.check()?;
        Ok(self.snapshot().len())
    }

    fn indexer(&self) -> Option<Arc<dyn RepositoryIndexer>> {
        None
    }

    fn changes_underneath(&self) -> bool {
        self.changes_underneath
    }
}

async fn open(source: &Arc<MemorySource>) -> Arc<NavService> {
    let config = NavConfig { allow_loopback_git: false, ..NavConfig::default() };
    NavService::open_in_memory(source.clone(), config).await.unwrap()
}

async fn call(nav: &Arc<NavService>, tool: &str, arguments: Value) -> Result<String, String> {
    nav.call(tool, Some(&arguments)).await.expect("a navigation tool")
}

async fn content(nav: &Arc<NavService>, path: &str) -> String {
    let text = call(nav, "get_file", json!({"repository": "acme/widgets", "path": path})).await.unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_sources_namespaces_are_listed_and_its_files_read() {
    let source = MemorySource::with(&[("README.md", "# Widgets\n"), ("src/lib.rs", "fn widget() {}\n")], false);
    let nav = open(&source).await;
    let list: Value = serde_json::from_str(&call(&nav, "list_repositories", json!({})).await.unwrap()).unwrap();
    let repositories = list["repositories"].as_array().unwrap();
    assert_eq!(repositories.len(), 1, "{list}");
    assert_eq!(repositories[0]["name"], "acme/widgets");
    assert_eq!(repositories[0]["status"], "completed");
    assert_eq!(repositories[0]["total_files"], 2);
    assert!(content(&nav, "src/lib.rs").await.contains("fn widget() {}"));
    let missing = call(&nav, "get_file", json!({"repository": "acme/widgets", "path": "src/lob.rs"})).await;
    assert_eq!(missing.unwrap_err(), "File 'src/lob.rs' not found in acme/widgets. Close paths: src/lib.rs");
}

#[tokio::test]
async fn a_source_that_changes_underneath_is_read_again_before_a_call() {
    let source = MemorySource::with(&[("src/lib.rs", "fn widget() {}\n")], true);
    let nav = open(&source).await;
    assert!(content(&nav, "src/lib.rs").await.contains("fn widget() {}"));
    source.set_file("src/lib.rs", "fn gadget() {}\n");
    let now = content(&nav, "src/lib.rs").await;
    assert!(now.contains("fn gadget() {}") && !now.contains("widget"), "{now}");
}

#[tokio::test]
async fn a_sources_failure_reaches_the_tool_in_its_own_words() {
    let source = MemorySource::with(&[("src/lib.rs", "fn widget() {}\n")], true);
    let nav = open(&source).await;
    source.break_with("cannot read the collection: HTTP 503");
    let failed = call(&nav, "get_file", json!({"repository": "acme/widgets", "path": "src/lib.rs"})).await;
    assert_eq!(failed.unwrap_err(), "cannot read the collection: HTTP 503");
}

#[tokio::test]
async fn opening_over_a_broken_source_says_what_it_could_not_read() {
    let source = MemorySource::with(&[], false);
    source.break_with("disk gone");
    let config = NavConfig::default();
    let err = NavService::open_in_memory(source.clone(), config).await.unwrap_err();
    assert_eq!(err.to_string(), "cannot read the store's repositories: disk gone");
}

#[tokio::test]
async fn add_repository_is_refused_without_an_indexer() {
    let source = MemorySource::with(&[("src/lib.rs", "fn widget() {}\n")], false);
    let nav = open(&source).await;
    let refused = call(&nav, "add_repository", json!({"url": "https://github.com/acme/gadgets"})).await;
    assert_eq!(refused.unwrap_err(), ADD_UNAVAILABLE);
}
