//! The navigation service of one source: the catalogue kept up to date
//! with the store, the whole files the scans read (cached per repository
//! fingerprint), and the tools as `tools/list` shows them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

use crate::catalog::{Catalogue, NewRepository, Repository};
use crate::entities;
use crate::error::NavError;
use crate::files::{self, FileText};
use crate::limits::{
    MAX_DESCRIPTION_CHARS, MAX_GLOB_CHARS, MAX_NAME_CHARS, MAX_PATH_CHARS, MAX_REPOSITORY_CHARS, MAX_URL_CHARS,
};
use crate::schema::{Kind, Param, ToolDef};
use crate::source::NavSource;

/// The resource scheme.
pub const SCHEME: &str = "repo-retriever";

/// Operator settings of the navigation tools.
#[derive(Debug, Clone)]
pub struct NavConfig {
    /// Regex time per file in `find_patterns`.
    pub regex_file_budget: Duration,
    /// Regex time per call in `find_patterns`.
    pub regex_call_budget: Duration,
    /// Let `add_repository` fetch from loopback addresses (tests only; off by
    /// default): loopback hosts may then use a port and `http://`/`git://`.
    pub allow_loopback_git: bool,
    /// Time limit of the pre-flight check.
    pub preflight_timeout: Duration,
    /// Time limit of the clone.
    pub clone_timeout: Duration,
}

impl Default for NavConfig {
    fn default() -> Self {
        NavConfig {
            regex_file_budget: Duration::from_secs(1),
            regex_call_budget: Duration::from_secs(10),
            allow_loopback_git: std::env::var("REPO_RETRIEVER_ALLOW_LOOPBACK_GIT").is_ok_and(|v| v == "1"),
            preflight_timeout: Duration::from_secs(10),
            clone_timeout: Duration::from_secs(120),
        }
    }
}

/// A tool result: JSON text, or a one-line error.
pub type ToolResult = Result<String, String>;

/// A repository's files and the fingerprint they were read at.
type CachedFiles = (String, Arc<Vec<FileText>>);

/// The navigation service of one source.
pub struct NavService {
    source: Arc<dyn NavSource>,
    catalogue: Mutex<Catalogue>,
    config: NavConfig,
    /// Whole files per repository id and fingerprint, for scans.
    files: Mutex<HashMap<i64, CachedFiles>>,
    /// Serialises catalogue refreshes.
    refresh_lock: Mutex<()>,
}

impl std::fmt::Debug for NavService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NavService").field("source", &self.source.name()).finish_non_exhaustive()
    }
}

pub(crate) fn pretty<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".into())
}

/// The tool error of `add_repository` over a source it cannot index into
/// (a Chroma collection opened without an embedding endpoint).
pub const ADD_UNAVAILABLE: &str =
    "add_repository is not available on this server: it has no embedding endpoint to index the collection with.";

impl NavService {
    /// A service over `source` with its catalogue in `dir` (repository ids
    /// hold across runs).
    pub fn open(source: Arc<dyn NavSource>, dir: &Path, config: NavConfig) -> Result<Arc<Self>, NavError> {
        let catalogue =
            Catalogue::open(dir).map_err(|source| NavError::OpenCatalogue { path: dir.to_owned(), source })?;
        Self::open_source(source, catalogue, config)
    }

    /// A service over `source` with the catalogue in memory (repository ids
    /// hold while the server runs). The first read runs on the blocking pool.
    pub async fn open_in_memory(source: Arc<dyn NavSource>, config: NavConfig) -> Result<Arc<Self>, NavError> {
        let catalogue = Catalogue::in_memory().map_err(NavError::CreateCatalogue)?;
        tokio::task::spawn_blocking(move || Self::open_source(source, catalogue, config)).await?
    }

    /// A service over `source` with `catalogue`, brought up to date.
    pub fn open_source(
        source: Arc<dyn NavSource>,
        catalogue: Catalogue,
        config: NavConfig,
    ) -> Result<Arc<Self>, NavError> {
        let service = Arc::new(NavService {
            source,
            catalogue: Mutex::new(catalogue),
            config,
            files: Mutex::new(HashMap::new()),
            refresh_lock: Mutex::new(()),
        });
        service.refresh().map_err(|e| NavError::FirstRefresh(Box::new(e)))?;
        Ok(service)
    }

    pub fn config(&self) -> &NavConfig {
        &self.config
    }

    pub fn source(&self) -> &dyn NavSource {
        self.source.as_ref()
    }

    /// The catalogue, locked.
    pub fn catalogue(&self) -> std::sync::MutexGuard<'_, Catalogue> {
        self.catalogue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Refreshes before a call when the source changes underneath.
    pub(crate) fn sync_source(&self) -> Result<(), NavError> {
        if self.source.changes_underneath() { self.refresh() } else { Ok(()) }
    }

    /// Registers namespaces the catalogue has not seen, rebuilds the
    /// definitions of those whose files changed, and drops repositories
    /// whose namespace left the store (unless `add_repository` is on them).
    pub fn refresh(&self) -> Result<(), NavError> {
        let _guard = self.refresh_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let namespaces = self.source.namespaces()?;
        let known = self.catalogue().repositories()?;
        for ns in &namespaces {
            let existing = known.iter().find(|r| r.namespace_id == ns.namespace_id);
            // A namespace met for the first time is named from its records,
            // which its first rebuild then reuses rather than reading again.
            let mut read = None;
            let id = match existing {
                Some(r) if r.status == "pending" || r.status == "processing" => continue,
                Some(r) => r.id,
                None => {
                    if ns.organization.is_empty() {
                        continue;
                    }
                    let metadata = self.source.metadata(&ns.namespace_id)?;
                    let (name, url) = listed(&ns.organization, &ns.repository, metadata.first());
                    read = Some(metadata);
                    self.catalogue().insert(&NewRepository {
                        namespace_id: ns.namespace_id.clone(),
                        organization: ns.organization.clone(),
                        repository: ns.repository.clone(),
                        index_branch: ns.branch.clone(),
                        name,
                        url,
                        branch: Some(ns.branch.clone()),
                        description: None,
                        status: "processing".into(),
                        managed: false,
                    })?
                }
            };
            self.rebuild_from(id, &ns.namespace_id, None, read)?;
        }
        for r in known {
            if !r.managed && !namespaces.iter().any(|n| n.namespace_id == r.namespace_id) {
                self.catalogue().delete(r.id)?;
            }
        }
        Ok(())
    }

    /// Rebuilds one repository's definitions from the store when its
    /// fingerprint changed, and marks it completed.
    pub fn rebuild(&self, id: i64, namespace_id: &str, note: Option<&str>) -> Result<(), NavError> {
        self.rebuild_from(id, namespace_id, note, None)
    }

    /// [`NavService::rebuild`] with the namespace's metadata when the caller
    /// has just read it.
    fn rebuild_from(
        &self,
        id: i64,
        namespace_id: &str,
        note: Option<&str>,
        metadata: Option<Vec<rr_core::Metadata>>,
    ) -> Result<(), NavError> {
        let fingerprint = self.source.fingerprint(namespace_id)?;
        let current = self.catalogue().repository(id)?;
        if current.as_ref().is_some_and(|r| r.status == "completed" && r.fingerprint == fingerprint) && note.is_none() {
            return Ok(());
        }
        let metadata = match metadata {
            Some(m) => m,
            None => self.source.metadata(namespace_id)?,
        };
        let files = self.source.files(namespace_id, &metadata)?;
        let texts: HashMap<&str, &str> = files.iter().map(|f| (f.path.as_str(), f.content.as_str())).collect();
        let entities = entities::namespace_entities(&metadata, |p| texts.get(p).copied());
        let commit = metadata.iter().map(|m| m.indexed_commit_sha.as_str()).find(|s| !s.is_empty());
        let language = files::primary_language(&files);
        let framework = files::framework(&files);
        self.catalogue().complete(
            id,
            &entities,
            files.len() as i64,
            commit,
            language.as_deref(),
            framework.as_deref(),
            &fingerprint,
            note,
        )?;
        self.files.lock().unwrap_or_else(PoisonError::into_inner).insert(id, (fingerprint, Arc::new(files)));
        Ok(())
    }

    /// The stored files of a completed repository (cached per fingerprint).
    pub(crate) fn files_of(&self, repo: &Repository) -> Result<Arc<Vec<FileText>>, NavError> {
        if let Some((fp, files)) = self.files.lock().unwrap_or_else(PoisonError::into_inner).get(&repo.id)
            && *fp == repo.fingerprint
        {
            return Ok(files.clone());
        }
        let metadata = self.source.metadata(&repo.namespace_id)?;
        let files = Arc::new(self.source.files(&repo.namespace_id, &metadata)?);
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(repo.id, (repo.fingerprint.clone(), files.clone()));
        Ok(files)
    }
}

const REPOSITORY_DESC: &str = "Repository: numeric ID, name (owner/name) or <host>/<path>; must be completed";

/// The navigation tools, in `tools/list` order after `search`.
pub static TOOLS: [ToolDef; 7] = [
    ToolDef {
        name: "list_repositories",
        title: "List Repositories",
        description: "List every repository in the index with its numeric ID, name, status (pending, processing, completed, failed) and size. Use it to find IDs and names for the other tools and to follow indexing progress.",
        params: &[],
        read_only: true,
    },
    ToolDef {
        name: "search_code",
        title: "Search Code Definitions",
        description: "Full-text search over definitions (functions, classes, Markdown sections) of the indexed repositories, ranked by relevance, with file locations, snippets and source links. Imports are searched only when entity_type is import.",
        params: &[
            Param::new("query", Kind::Str, "Words or identifiers to look for; part of a camelCase name matches").required().len(1, None),
            Param::new("repository", Kind::Str, "Only this repository: ID, name or owner/name; must be completed").len(0, Some(MAX_REPOSITORY_CHARS)),
            Param::new("language", Kind::Str, "Exact language label, e.g. python, typescript, go, rust").len(0, Some(MAX_NAME_CHARS)),
            Param::new("entity_type", Kind::Str, "One of function, class, import, doc_section, terraform_block").choices(&entities::ENTITY_TYPES),
            Param::new("limit", Kind::Int, "Results per page, 1 to 50").not_null().range(1, Some(50)).default("10"),
            Param::new("page", Kind::Int, "Zero-based page").not_null().range(0, None).default("0"),
        ],
        read_only: true,
    },
    ToolDef {
        name: "get_file",
        title: "Get File",
        description: "Read one stored file with line numbers, at most 400 lines per call. Use start_line and end_line to page through longer files.",
        params: &[
            Param::new("repository", Kind::Str, REPOSITORY_DESC).required().len(0, Some(MAX_REPOSITORY_CHARS)),
            Param::new("path", Kind::Str, "Exact path relative to the repository root, case-sensitive").required().len(0, Some(MAX_PATH_CHARS)),
            Param::new("start_line", Kind::Int, "First line, 1 or more (default 1)").range(1, None),
            Param::new("end_line", Kind::Int, "Last line, 1 or more (default: end of file)").range(1, None),
        ],
        read_only: true,
    },
    ToolDef {
        name: "list_definitions",
        title: "List Definitions",
        description: "List the definitions of one repository ordered by file and line, with optional filters; total counts every match.",
        params: &[
            Param::new("repository", Kind::Str, REPOSITORY_DESC).required().len(0, Some(MAX_REPOSITORY_CHARS)),
            Param::new("path_prefix", Kind::Str, "Only files whose path starts with this text (literal)").len(0, Some(MAX_PATH_CHARS)),
            Param::new("entity_type", Kind::Str, "function, class, import, doc_section or terraform_block").choices(&entities::ENTITY_TYPES),
            Param::new("name", Kind::Str, "Case-insensitive substring of the definition's name (literal)").len(0, Some(MAX_NAME_CHARS)),
            Param::new("limit", Kind::Int, "At most this many definitions, 1 to 500").not_null().range(1, Some(500)).default("100"),
        ],
        read_only: true,
    },
    ToolDef {
        name: "analyze_repository",
        title: "Analyze Repository",
        description: "Measured counts and layout of one repository: files, lines, definitions by type and language, top directories and largest files.",
        params: &[Param::new("repository", Kind::Str, REPOSITORY_DESC).required().len(0, Some(MAX_REPOSITORY_CHARS))],
        read_only: true,
    },
    ToolDef {
        name: "find_patterns",
        title: "Find Patterns",
        description: "Find lines in the stored files matching a literal string (case-sensitive) or a regular expression, in path order. Use it to find every use of a name.",
        params: &[
            Param::new("repository", Kind::Str, REPOSITORY_DESC).required().len(0, Some(MAX_REPOSITORY_CHARS)),
            Param::new("pattern", Kind::Str, "Literal text, or a regular expression when regex is true; 1 to 200 characters").required().len(1, Some(200)),
            Param::new("regex", Kind::Bool, "Treat pattern as a regular expression (unanchored; (?i) for case-insensitive)").not_null().default("false"),
            Param::new("path_glob", Kind::Str, "Glob matched against the whole path; * also matches /").len(0, Some(MAX_GLOB_CHARS)),
            Param::new("max_results", Kind::Int, "At most this many matches, 1 to 500").not_null().range(1, Some(500)).default("100"),
        ],
        read_only: true,
    },
    ToolDef {
        name: "add_repository",
        title: "Add Repository",
        description: "Add a repository by https URL and index it in the background. Poll list_repositories until its status is completed.",
        params: &[
            Param::new("url", Kind::Str, "https repository URL; http:// and git@host:path are rewritten to https://; .../tree/<branch> is understood").required().len(1, Some(MAX_URL_CHARS)),
            Param::new("branch", Kind::Str, "Branch to index (default: the default branch); at most 100 characters"),
            Param::new("description", Kind::Str, "Free text note").len(0, Some(MAX_DESCRIPTION_CHARS)),
        ],
        read_only: false,
    },
];

/// The name and web address of a repository the catalogue meets in the
/// store. Records of another host than GitHub (`source_host`, written for
/// checkouts of GitLab and other hosts, and by `add_repository`) are named
/// `<host>/<owner>/<name>` as `add_repository` names them, with their host's
/// address; records naming no host (a folder with no remote) get no address;
/// others are `owner/name`, on GitHub when that looks like a GitHub name.
fn listed(organization: &str, repository: &str, first: Option<&rr_core::Metadata>) -> (String, Option<String>) {
    let name = format!("{organization}/{repository}");
    match first.and_then(|m| m.extra.get(rr_core::render::SOURCE_HOST)) {
        Some(serde_json::Value::String(host)) if !host.is_empty() && !host.contains(['/', '?', '#', '@']) => {
            let host = host.to_ascii_lowercase();
            (format!("{host}/{name}"), Some(format!("https://{host}/{name}")))
        }
        Some(_) => (name, None),
        None => {
            let url =
                (organization != "local" && !organization.contains('.')).then(|| format!("https://github.com/{name}"));
            (name, url)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::listed;

    fn hosted(host: serde_json::Value) -> rr_core::Metadata {
        let mut m = rr_core::Metadata::default();
        m.extra.insert(rr_core::render::SOURCE_HOST.into(), host);
        m
    }

    fn owned(name: &str, url: Option<&str>) -> (String, Option<String>) {
        (name.to_owned(), url.map(str::to_owned))
    }

    #[test]
    fn listed_names_follow_the_records_host() {
        let gitlab = hosted("GitLab.com".into());
        assert_eq!(
            listed("group/sub", "tool", Some(&gitlab)),
            owned("gitlab.com/group/sub/tool", Some("https://gitlab.com/group/sub/tool"))
        );
        assert_eq!(
            listed("octo", "demo", Some(&hosted("".into()))),
            owned("octo/demo", None),
            "a folder with no remote"
        );
        assert_eq!(listed("octo", "demo", Some(&hosted(serde_json::json!(3)))), owned("octo/demo", None));
        assert_eq!(listed("octo", "demo", Some(&hosted("evil.example/x".into()))), owned("octo/demo", None));
        let plain = rr_core::Metadata::default();
        assert_eq!(listed("octo", "demo", Some(&plain)), owned("octo/demo", Some("https://github.com/octo/demo")));
        assert_eq!(listed("octo", "demo", None), owned("octo/demo", Some("https://github.com/octo/demo")));
        assert_eq!(listed("local", "demo", None), owned("local/demo", None));
        assert_eq!(listed("gitlab.com/group", "x", None), owned("gitlab.com/group/x", None));
    }
}
