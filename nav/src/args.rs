//! The argument types of the navigation tools, from which the MCP layer derives the advertised
//! input schemas (schemars). Types, nullability and which arguments are required come
//! from the Rust types; the descriptions are the tool table's (the one text the validation
//! messages also use); the bounds are written here and held equal to the table's by the test
//! below. The table still validates calls: its messages are the contract's.

use schemars::JsonSchema;
use serde_json::{Value, json};

use crate::limits::{
    MAX_DESCRIPTION_CHARS, MAX_GLOB_CHARS, MAX_NAME_CHARS, MAX_PATH_CHARS, MAX_REPOSITORY_CHARS, MAX_URL_CHARS,
};
use crate::{TOOLS, entities::ENTITY_TYPES};

/// The table's description of `param` of `tool`.
fn desc(tool: &str, param: &str) -> &'static str {
    TOOLS
        .iter()
        .find(|t| t.name == tool)
        .and_then(|t| t.params.iter().find(|p| p.name == param))
        .map_or("", |p| p.description)
}

fn entity_types() -> Value {
    let mut choices: Vec<Value> = ENTITY_TYPES.iter().map(|c| json!(c)).collect();
    choices.push(Value::Null);
    Value::Array(choices)
}

// Integers and booleans that may be omitted but not sent as null: one JSON type, no
// `format` (schemars' `int64` is not part of what the tools advertise).
fn integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer"})
}
fn nullable_integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["integer", "null"]})
}
fn boolean(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "boolean"})
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ListRepositories {}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SearchCode {
    #[schemars(description = desc("search_code", "query"), length(min = 1))]
    pub query: String,
    #[schemars(description = desc("search_code", "repository"), length(min = 0, max = MAX_REPOSITORY_CHARS))]
    pub repository: Option<String>,
    #[schemars(description = desc("search_code", "language"), length(min = 0, max = MAX_NAME_CHARS))]
    pub language: Option<String>,
    #[schemars(description = desc("search_code", "entity_type"), extend("enum" = entity_types()))]
    pub entity_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer", description = desc("search_code", "limit"), range(min = 1, max = 50), extend("default" = 10))]
    pub limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer", description = desc("search_code", "page"), range(min = 0), extend("default" = 0))]
    pub page: Option<i64>,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GetFile {
    #[schemars(description = desc("get_file", "repository"), length(min = 0, max = MAX_REPOSITORY_CHARS))]
    pub repository: String,
    #[schemars(description = desc("get_file", "path"), length(min = 0, max = MAX_PATH_CHARS))]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "nullable_integer", description = desc("get_file", "start_line"), range(min = 1))]
    pub start_line: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "nullable_integer", description = desc("get_file", "end_line"), range(min = 1))]
    pub end_line: Option<i64>,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ListDefinitions {
    #[schemars(description = desc("list_definitions", "repository"), length(min = 0, max = MAX_REPOSITORY_CHARS))]
    pub repository: String,
    #[schemars(description = desc("list_definitions", "path_prefix"), length(min = 0, max = MAX_PATH_CHARS))]
    pub path_prefix: Option<String>,
    #[schemars(description = desc("list_definitions", "entity_type"), extend("enum" = entity_types()))]
    pub entity_type: Option<String>,
    #[schemars(description = desc("list_definitions", "name"), length(min = 0, max = MAX_NAME_CHARS))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer", description = desc("list_definitions", "limit"), range(min = 1, max = 500), extend("default" = 100))]
    pub limit: Option<i64>,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AnalyzeRepository {
    #[schemars(description = desc("analyze_repository", "repository"), length(min = 0, max = MAX_REPOSITORY_CHARS))]
    pub repository: String,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FindPatterns {
    #[schemars(description = desc("find_patterns", "repository"), length(min = 0, max = MAX_REPOSITORY_CHARS))]
    pub repository: String,
    #[schemars(description = desc("find_patterns", "pattern"), length(min = 1, max = 200))]
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "boolean", description = desc("find_patterns", "regex"), extend("default" = false))]
    pub regex: Option<bool>,
    #[schemars(description = desc("find_patterns", "path_glob"), length(min = 0, max = MAX_GLOB_CHARS))]
    pub path_glob: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer", description = desc("find_patterns", "max_results"), range(min = 1, max = 500), extend("default" = 100))]
    pub max_results: Option<i64>,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AddRepository {
    #[schemars(description = desc("add_repository", "url"), length(min = 1, max = MAX_URL_CHARS))]
    pub url: String,
    #[schemars(description = desc("add_repository", "branch"))]
    pub branch: Option<String>,
    #[schemars(description = desc("add_repository", "description"), length(min = 0, max = MAX_DESCRIPTION_CHARS))]
    pub description: Option<String>,
}
