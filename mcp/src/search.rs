//! The `search` tool: its advertised definition (the input schema derived
//! from [`SearchInput`]), the argument checks and one call's execution.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use rmcp::schemars::{self, JsonSchema};
use rr_core::federated::skipped_line;
use rr_core::render::render;
use rr_core::{ArgLimits, CallContext, SearchArgs, SearchEngine, SearchOutcome};
use serde::Serialize;
use serde_json::{Map, Value};

use rr_core::shown;

pub const TOOL_NAME: &str = "search";
pub const TITLE: &str = "Search Repository Content";
pub const DESCRIPTION: &str = "Search indexed GitHub repository content by meaning. Use this when you need implementation details, documentation, configuration, symbols, or examples from the indexed codebases. Write one specific natural-language query with the relevant names or error text. Omit source when you do not know which repository contains the answer; set it when the user identifies a repository or branch.";

// The arguments of `search` as the schema advertises them (a doc comment
// here would become the schema's description). Calls are checked against
// this schema by `validate_arguments` rather than by deserialising into it:
// a wrong argument is a tool error that names it, which a model can act on,
// not a protocol error.
#[derive(Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)] // only its schema is used
pub struct SearchInput {
    /// A focused natural-language search query. Include exact identifiers, filenames, or error text when known; semantic matching also finds related wording.
    query: String,
    /// Optional repository scope in owner/repository or owner/repository@branch form. Omit it to search every indexed repository.
    #[schemars(schema_with = "optional_string")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    /// Optional repository-relative path pattern. * and ** match across folders and ? matches one character; examples: docs/*, **/*.go, README.md.
    #[schemars(schema_with = "optional_string")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    /// Maximum excerpts to return, from 1 through 20. Use the default for most questions; increase only when broader evidence is needed.
    #[schemars(schema_with = "optional_integer")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<i64>,
}

fn optional_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string"})
}

fn optional_integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer"})
}

/// The input schema of a tool's argument type: the object schema without
/// the generator's `$schema` and `title` (noise to a model, and not what the
/// reference advertises). Properties without a `schema_with` are generated
/// from their type.
pub fn input_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = rmcp::handler::server::common::schema_for_type::<T>().as_ref().clone();
    schema.remove("$schema");
    schema.remove("title");
    Arc::new(schema)
}

/// The `tools/list` entry of `search`.
pub fn definition() -> Tool {
    let mut annotations = ToolAnnotations::default();
    annotations.destructive_hint = Some(false);
    annotations.idempotent_hint = Some(true);
    annotations.open_world_hint = Some(true);
    annotations.read_only_hint = Some(true);
    let mut tool = Tool::new(TOOL_NAME, DESCRIPTION, input_schema::<SearchInput>());
    tool.title = Some(TITLE.into());
    tool.annotations = Some(annotations);
    tool
}

/// What a `search` over the embedded store can be narrowed to: the
/// languages and kinds of file its index holds. Read whenever the tool list
/// or a call needs them, since an index that follows a checkout changes.
/// The drop-in has none: its schema is the reference's.
pub trait SearchFacets: Send + Sync + 'static {
    /// The `language` values with at least one chunk, sorted.
    fn languages(&self) -> Vec<String>;
    /// The `kind` values ([`rr_core::PathClass`] names) with at least one
    /// chunk, in [`rr_core::paths::PATH_CLASSES`] order.
    fn kinds(&self) -> Vec<String>;
}

/// The description of the `language` argument.
const LANGUAGE_DESCRIPTION: &str = "Optional language of the excerpts, one of those the index holds (listed here). Use it when only one language can hold the answer.";
/// The description of the `kind` argument.
const KIND_DESCRIPTION: &str = "Optional kind of file, from its path: source, test, example, bench, docs, generated or vendored (those the index holds are listed here). Use test to find how something is exercised, docs for prose, source to leave tests and examples out.";

/// The `tools/list` entry of `search` with the `language` and `kind`
/// arguments, each an enum of what `facets` holds now.
pub fn definition_with(facets: &dyn SearchFacets) -> Tool {
    let mut tool = definition();
    let mut schema = tool.input_schema.as_ref().clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (name, description, values) in
            [("language", LANGUAGE_DESCRIPTION, facets.languages()), ("kind", KIND_DESCRIPTION, facets.kinds())]
        {
            props.insert(
                name.to_owned(),
                serde_json::json!({ "type": "string", "enum": values, "description": description }),
            );
        }
    }
    tool.input_schema = Arc::new(schema);
    tool
}

/// Checks a `language` and a `kind`, each `None` when not given, against
/// what `facets` holds: a value given must be one of them exactly (`""`
/// and `"go\n"` are no language), else the error lists the valid ones.
pub fn check_facets(language: Option<&str>, kind: Option<&str>, facets: &dyn SearchFacets) -> Result<(), String> {
    for (what, plural, value, valid) in
        [("language", "languages", language, facets.languages()), ("kind", "kinds", kind, facets.kinds())]
    {
        if let Some(value) = value
            && !valid.iter().any(|v| v == value)
        {
            let list = if valid.is_empty() { "none, the index is empty".to_owned() } else { valid.join(", ") };
            return Err(format!("unknown {what} {}; valid {plural}: {list}", quote(&shown(value))));
        }
    }
    Ok(())
}

/// What the request log records of a tool call (HTTP transport only).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolLog {
    pub tool: String,
    /// `search`'s arguments (the only tool the drop-in serves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<SearchArgs>,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub response_content_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents_found: Option<usize>,
    /// The tool call's own time in milliseconds (`serve`; the drop-in's line has the request's only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
}

/// The log's `error` for a search whose backend failed: the backend's text
/// may quote a response body, and stays out of logs.
pub const BACKEND_FAILURE: &str = "repository content search failed";

fn is_zero(v: &usize) -> bool {
    *v == 0
}

/// The result of one call: the text content, whether it is a tool error, and
/// the log fields.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    pub text: String,
    pub is_error: bool,
    pub log: ToolLog,
}

/// The answer to a search that did not finish within `deadline` (the
/// backends are slow or do not answer): a backend failure, as the client
/// and the log see it.
pub fn timed_out(args: &SearchArgs, deadline: std::time::Duration) -> ToolOutcome {
    let text = format!("repository content search failed: the search did not finish within {deadline:?}");
    let log = ToolLog {
        tool: TOOL_NAME.into(),
        parameters: Some(args.normalized()),
        outcome: "error",
        error: BACKEND_FAILURE.into(),
        response_content_bytes: text.len(),
        ..Default::default()
    };
    ToolOutcome { text, is_error: true, log }
}

/// How a failed search reads to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorText {
    /// The reference's wording (the drop-in): a status error quotes the
    /// backend's reply, a transport error the URL.
    Reference,
    /// The operation, what failed and the backend's name; URLs and replies
    /// go to the debug log only (every `serve` mode).
    Summary,
}

/// The histogram of each stage's time of a search that answered
/// ([`rr_core::StageTimings`]), by `stage`.
pub const SEARCH_STAGE_DURATION: &str = "repo_retriever_search_stage_duration_seconds";

/// Records the time each stage of one search took; nothing without a
/// metrics recorder ([`crate::telemetry`]).
fn record_stages(timings: &rr_core::StageTimings) {
    for (stage, elapsed) in timings.stages() {
        metrics::histogram!(SEARCH_STAGE_DURATION, "stage" => stage).record(elapsed.as_secs_f64());
    }
}

/// Runs one `search` call. Never fails: every problem becomes a tool error
/// whose text is the contract's message. The arguments are held to `limits`
/// after the reference's checks.
pub async fn call_with(
    engine: &SearchEngine,
    args: SearchArgs,
    ctx: &CallContext,
    limits: &ArgLimits,
    errors: ErrorText,
) -> ToolOutcome {
    let mut log = ToolLog { tool: TOOL_NAME.into(), parameters: Some(args.normalized()), ..Default::default() };
    let request = match args.validate_within(limits) {
        Ok(r) => r,
        Err(e) => {
            let text = e.to_string();
            log.outcome = "error";
            log.error = text.clone();
            log.response_content_bytes = text.len();
            return ToolOutcome { text, is_error: true, log };
        }
    };
    match engine.search_outcome(&request, ctx).await {
        Ok(SearchOutcome { results, skipped, timings }) => {
            record_stages(&timings);
            let mut text = render(&results, &request.source);
            if !skipped.is_empty() {
                // Federated search only: one line at the end names what is missing.
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push('\n');
                text.push_str(&skipped_line(&skipped));
            }
            log.outcome = "success";
            log.response_content_bytes = text.len();
            log.documents_found = Some(results.len());
            ToolOutcome { text, is_error: false, log }
        }
        Err(e) => {
            tracing::debug!(error = %e, "search failed");
            let text = match errors {
                ErrorText::Reference => e.client_message(),
                ErrorText::Summary => e.summary_message(),
            };
            log.outcome = "error";
            // The backend's text may quote a response body: keep it out of logs.
            log.error = BACKEND_FAILURE.into();
            log.response_content_bytes = text.len();
            ToolOutcome { text, is_error: true, log }
        }
    }
}

/// The advertised properties and their JSON types, in schema order.
fn properties(schema: &JsonObject) -> Vec<(&str, &str)> {
    let Some(Value::Object(props)) = schema.get("properties") else { return Vec::new() };
    props.iter().map(|(name, p)| (name.as_str(), p.get("type").and_then(Value::as_str).unwrap_or(""))).collect()
}

/// Checks `arguments` against the advertised schema, then decodes them.
/// Failures are tool-error texts naming the argument and the type it needs.
pub fn validate_arguments(arguments: Option<&JsonObject>) -> Result<SearchArgs, String> {
    validate_arguments_with(arguments, None)
}

/// [`validate_arguments`] for the schema of [`definition_with`] when
/// `facets` is set: `language` and `kind` are strings, and must be values
/// the index holds ([`check_facets`]).
pub fn validate_arguments_with(
    arguments: Option<&JsonObject>,
    facets: Option<&dyn SearchFacets>,
) -> Result<SearchArgs, String> {
    let empty = Map::new();
    let obj = arguments.unwrap_or(&empty);
    // Derived once: every call reads it.
    static SCHEMA: std::sync::LazyLock<Arc<JsonObject>> = std::sync::LazyLock::new(input_schema::<SearchInput>);
    let mut props = properties(&SCHEMA);
    if facets.is_some() {
        props.extend([("language", "string"), ("kind", "string")]);
    }
    let wrap = |inner: String| format!("validating \"arguments\": validating root: {inner}");
    for (name, kind) in &props {
        if let Some(value) = obj.get(*name)
            && !has_schema_type(value, kind)
        {
            return Err(wrap(format!(
                "validating /properties/{name}: type: {} has type {}, want {}",
                shown(&display(value)),
                quote(schema_type_of(value)),
                quote(kind)
            )));
        }
    }
    // Names are quoted; a long one is cut and a long list ends after ten, so
    // the message stays short whatever was sent.
    let extra: Vec<String> =
        obj.keys().filter(|k| !props.iter().any(|(n, _)| n == k)).map(|k| quote(&shown(k))).collect();
    if !extra.is_empty() {
        let more = extra.len().saturating_sub(10);
        let mut list = extra[..extra.len().min(10)].join(" ");
        if more > 0 {
            list.push_str(&format!(" and {more} more"));
        }
        return Err(wrap(format!("unexpected additional properties [{list}]")));
    }
    if !obj.contains_key("query") {
        return Err(wrap("required: missing properties: [\"query\"]".into()));
    }
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let limit = match obj.get("limit") {
        None => 0,
        Some(v) => {
            let f = v.as_f64().unwrap_or(0.0);
            if f.abs() >= 9.223_372_036_854_776e18 {
                return Err(format!("limit {} is out of range: it must be an integer from 1 through 20", display(v)));
            }
            v.as_i64().unwrap_or(f as i64)
        }
    };
    let args = SearchArgs {
        query: text("query"),
        source: text("source"),
        path: text("path"),
        limit,
        language: text("language"),
        kind: text("kind"),
    };
    if let Some(facets) = facets {
        let given = |k: &str| obj.get(k).and_then(Value::as_str);
        check_facets(given("language"), given("kind"), facets)?;
    }
    Ok(args)
}

fn has_schema_type(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0 && f.is_finite()),
        _ => true,
    }
}

/// The JSON Schema type name of a value.
fn schema_type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                "integer"
            } else {
                "number"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as an error message shows it: strings unquoted, the rest as JSON.
fn display(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A string as JSON quotes it.
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reference's `search` tool entry of `tools/list`.
    const REFERENCE_TOOL: &str = r#"{"annotations":{"destructiveHint":false,"idempotentHint":true,"openWorldHint":true,"readOnlyHint":true},"description":"Search indexed GitHub repository content by meaning. Use this when you need implementation details, documentation, configuration, symbols, or examples from the indexed codebases. Write one specific natural-language query with the relevant names or error text. Omit source when you do not know which repository contains the answer; set it when the user identifies a repository or branch.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"A focused natural-language search query. Include exact identifiers, filenames, or error text when known; semantic matching also finds related wording."},"source":{"type":"string","description":"Optional repository scope in owner/repository or owner/repository@branch form. Omit it to search every indexed repository."},"path":{"type":"string","description":"Optional repository-relative path pattern. * and ** match across folders and ? matches one character; examples: docs/*, **/*.go, README.md."},"limit":{"type":"integer","description":"Maximum excerpts to return, from 1 through 20. Use the default for most questions; increase only when broader evidence is needed."}},"required":["query"],"additionalProperties":false},"name":"search","title":"Search Repository Content"}"#;

    #[test]
    fn the_definition_is_the_references_as_parsed_json() {
        let ours = serde_json::to_value(definition()).unwrap();
        assert_eq!(ours, serde_json::from_str::<Value>(REFERENCE_TOOL).unwrap());
    }

    fn bad(args: Value) -> String {
        let Value::Object(obj) = args else { panic!("arguments must be an object") };
        validate_arguments(Some(&obj)).unwrap_err()
    }

    #[test]
    fn argument_validation_texts() {
        assert_eq!(
            validate_arguments(None).unwrap_err(),
            r#"validating "arguments": validating root: required: missing properties: ["query"]"#
        );
        assert_eq!(
            bad(json!({"query":"x","limit":"5"})),
            r#"validating "arguments": validating root: validating /properties/limit: type: 5 has type "string", want "integer""#
        );
        assert_eq!(
            bad(json!({"query":"x","limit":2.5})),
            r#"validating "arguments": validating root: validating /properties/limit: type: 2.5 has type "number", want "integer""#
        );
        assert_eq!(
            bad(json!({"query":"x","limit":null})),
            r#"validating "arguments": validating root: validating /properties/limit: type: null has type "null", want "integer""#
        );
        assert_eq!(
            bad(json!({"query":5})),
            r#"validating "arguments": validating root: validating /properties/query: type: 5 has type "integer", want "string""#
        );
        assert_eq!(
            bad(json!({"query":"x","foo":1})),
            r#"validating "arguments": validating root: unexpected additional properties ["foo"]"#
        );
        assert_eq!(
            bad(json!({"query":"x","limit":1e300})),
            "limit 1e+300 is out of range: it must be an integer from 1 through 20"
        );
        let Value::Object(ok) = json!({"query":"x","limit":3.0,"source":"a/b","path":"p"}) else { unreachable!() };
        assert_eq!(
            validate_arguments(Some(&ok)).unwrap(),
            SearchArgs { query: "x".into(), source: "a/b".into(), path: "p".into(), limit: 3, ..Default::default() }
        );
        // The drop-in's schema has no language or kind.
        assert_eq!(
            bad(json!({"query":"x","language":"rust"})),
            r#"validating "arguments": validating root: unexpected additional properties ["language"]"#
        );
    }

    struct Held;

    impl SearchFacets for Held {
        fn languages(&self) -> Vec<String> {
            vec!["python".into(), "rust".into()]
        }
        fn kinds(&self) -> Vec<String> {
            vec!["source".into(), "test".into()]
        }
    }

    fn with_facets(args: Value) -> Result<SearchArgs, String> {
        let Value::Object(obj) = args else { panic!("arguments must be an object") };
        validate_arguments_with(Some(&obj), Some(&Held))
    }

    #[test]
    fn language_and_kind_are_enums_of_what_the_index_holds() {
        let tool = serde_json::to_value(definition_with(&Held)).unwrap();
        let props = &tool["inputSchema"]["properties"];
        assert_eq!(props["language"]["enum"], json!(["python", "rust"]));
        assert_eq!(props["kind"]["enum"], json!(["source", "test"]));
        assert_eq!(props["language"]["type"], "string");
        assert_eq!(tool["inputSchema"]["required"], json!(["query"]));
        let args = with_facets(json!({"query":"x","language":"rust","kind":"test"})).unwrap();
        assert_eq!((args.language.as_str(), args.kind.as_str()), ("rust", "test"));
        assert_eq!(
            with_facets(json!({"query":"x","language":"cobol"})).unwrap_err(),
            r#"unknown language "cobol"; valid languages: python, rust"#
        );
        assert_eq!(
            with_facets(json!({"query":"x","kind":"docs"})).unwrap_err(),
            r#"unknown kind "docs"; valid kinds: source, test"#
        );
        for (argument, value) in [("language", ""), ("language", " "), ("language", "rust\n"), ("kind", "")] {
            let error = with_facets(json!({"query":"x", argument: value})).unwrap_err();
            assert!(error.starts_with(&format!("unknown {argument} ")), "{value:?}: {error}");
        }
        assert_eq!(
            with_facets(json!({"query":"x","language":""})).unwrap_err(),
            r#"unknown language ""; valid languages: python, rust"#
        );
        assert_eq!(
            with_facets(json!({"query":"x","kind":7})).unwrap_err(),
            r#"validating "arguments": validating root: validating /properties/kind: type: 7 has type "integer", want "string""#
        );
    }
}
