//! The navigation tools as `tools/list` shows them, and the dispatch of
//! one call to its tool on the blocking pool.

use std::sync::Arc;

use serde_json::Value;

use crate::entities;
use crate::limits::{
    MAX_DESCRIPTION_CHARS, MAX_GLOB_CHARS, MAX_NAME_CHARS, MAX_PATH_CHARS, MAX_REPOSITORY_CHARS, MAX_URL_CHARS,
};
use crate::schema::{Kind, Param, ToolDef};
use crate::service::{ADD_UNAVAILABLE, NavService, ToolResult};
use crate::source::IndexTarget;
use crate::{add_repository, analyze, find_patterns, get_file, list_definitions, repos, search_code};

impl NavService {
    /// Runs one tool call on the blocking pool. `None` when `name` is not a
    /// navigation tool.
    pub async fn call(self: &Arc<Self>, name: &str, arguments: Option<&Value>) -> Option<ToolResult> {
        let def = TOOLS.iter().find(|t| t.name == name)?;
        let args = match def.validate(arguments) {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        };
        if name == "add_repository" {
            if matches!(self.source().index_target(), IndexTarget::Unavailable) {
                return Some(Err(ADD_UNAVAILABLE.into()));
            }
            return Some(add_repository::call(self.clone(), args).await);
        }
        let this = self.clone();
        let name = name.to_owned();
        let result = tokio::task::spawn_blocking(move || {
            // list_repositories refreshes on its own, and lists what it has when that fails.
            if name != "list_repositories" {
                this.sync_source()?;
            }
            match name.as_str() {
                "list_repositories" => repos::list_repositories(&this),
                "search_code" => search_code::call(&this, &args),
                "get_file" => get_file::call(&this, &args),
                "list_definitions" => list_definitions::call(&this, &args),
                "analyze_repository" => analyze::call(&this, &args),
                "find_patterns" => find_patterns::call(&this, &args),
                _ => Err(format!("unknown tool '{name}'")),
            }
        })
        .await
        .unwrap_or_else(|e| Err(format!("internal error: {e}")));
        Some(result)
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
