//! The dispatch of one navigation tool call to its tool, on the blocking
//! pool (the tools' modules depend on the service, so the dispatch is a
//! file of its own rather than part of it).

use std::sync::Arc;

use serde_json::Value;

use crate::service::{ADD_UNAVAILABLE, NavService, TOOLS, ToolResult};
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
            if self.source().indexer().is_none() {
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
