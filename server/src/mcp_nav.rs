//! The navigation tools as the MCP layer serves them: [`rr_mcp::Navigation`]
//! over a [`NavService`].

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::Value;

use rr_nav::{self as nav, NavService};

/// A [`NavService`] behind the MCP layer's trait.
#[derive(Debug, Clone)]
pub struct NavTools(pub Arc<NavService>);

/// The navigation tools' `tools/list` entries, in their order.
pub fn tool_definitions() -> Vec<Tool> {
    nav::TOOLS
        .iter()
        .map(|def| {
            let schema = input_schema(def.name);
            let mut tool = Tool::new(def.name, def.description, Arc::new(schema));
            tool.title = Some(def.title.into());
            let mut annotations = ToolAnnotations::default();
            annotations.destructive_hint = Some(false);
            annotations.idempotent_hint = Some(def.read_only);
            annotations.open_world_hint = Some(!def.read_only);
            annotations.read_only_hint = Some(def.read_only);
            tool.annotations = Some(annotations);
            tool
        })
        .collect()
}

#[async_trait]
impl rr_mcp::Navigation for NavTools {
    fn tools(&self) -> Vec<Tool> {
        tool_definitions()
    }

    async fn call(&self, name: &str, arguments: Option<&Value>) -> Option<Result<String, String>> {
        self.0.call(name, arguments).await
    }

    fn resources(&self) -> Value {
        nav::repos::resources_list()
    }

    fn resource_templates(&self) -> Value {
        nav::repos::resource_templates()
    }

    async fn read_resource(&self, uri: &str) -> Result<String, String> {
        let nav = self.0.clone();
        let uri = uri.to_owned();
        tokio::task::spawn_blocking(move || nav::repos::read_resource(&nav, &uri))
            .await
            .unwrap_or_else(|e| Err(e.to_string()))
    }
}

/// The advertised input schema of navigation tool `name`, derived from its
/// argument type ([`nav::args`]) as the `search` tool's is.
pub fn input_schema(name: &str) -> serde_json::Map<String, Value> {
    use nav::args::{
        AddRepository, AnalyzeRepository, FindPatterns, GetFile, ListDefinitions, ListRepositories, SearchCode,
    };
    use rr_mcp::search::input_schema as derived;
    let schema = match name {
        "list_repositories" => derived::<ListRepositories>(),
        "search_code" => derived::<SearchCode>(),
        "get_file" => derived::<GetFile>(),
        "list_definitions" => derived::<ListDefinitions>(),
        "analyze_repository" => derived::<AnalyzeRepository>(),
        "find_patterns" => derived::<FindPatterns>(),
        "add_repository" => derived::<AddRepository>(),
        _ => return serde_json::Map::new(),
    };
    let mut schema = schema.as_ref().clone();
    // Every tool lists its required arguments, none included.
    schema.entry("required").or_insert_with(|| serde_json::json!([]));
    schema.entry("properties").or_insert_with(|| serde_json::json!({}));
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived schemas are the table's, as parsed JSON: nothing a client sees changed.
    #[test]
    fn derived_schemas_equal_the_tables() {
        for def in &nav::TOOLS {
            assert_eq!(Value::Object(input_schema(def.name)), def.input_schema(), "{}", def.name);
        }
    }
}
