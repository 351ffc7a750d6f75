//! MCP over JSON-RPC, encoded byte for byte as the reference server's SDK
//! encodes it.
//!
//! Why not a general MCP SDK: the drop-in promise is that a client cannot tell
//! the servers apart on the wire, and that pins details an SDK's typed models
//! decide for us — key order (`{"capabilities",…,"protocolVersion",…}`,
//! `{"annotations",…,"name","title"}`), the `ttlMs`/`cacheScope` fields of
//! `tools/list`, version negotiation, which strings are HTML-escaped (tool
//! result text is, the envelope is not), and which failures are tool results
//! rather than JSON-RPC errors. The protocol surface of a tools-only server is
//! small, so this module owns it and every byte is tested.

use std::fmt::Write as _;

use rr_core::{ArgLimits, CallContext, SearchArgs, SearchEngine};
use serde_json::{Map, Value};

use std::net::IpAddr;
use std::sync::Arc;

use crate::nav::{self, NavService, ratelimit::RateLimiter};
use crate::tool::{self, ToolLog};
use crate::wire;

/// Protocol versions echoed back when a client asks for them.
pub const ECHOED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Every version the `Mcp-Protocol-Version` header may carry.
pub const SUPPORTED_VERSIONS: [&str; 5] = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Answered to any other requested version.
pub const FALLBACK_VERSION: &str = "2025-11-25";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC id: integers and strings are echoed; other numbers truncate.
#[derive(Debug, Clone, PartialEq)]
pub enum Id {
    Int(i64),
    Str(String),
}

impl Id {
    fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => Some(Id::Int(n.as_i64().unwrap_or_else(|| n.as_f64().map_or(0, |f| f as i64)))),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    fn encode(&self) -> String {
        match self {
            Id::Int(i) => i.to_string(),
            Id::Str(s) => json_string(s),
        }
    }
}

/// One decoded JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response from the client; servers of this kind never ask, so it is ignored.
    Response,
}

/// Why a frame is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// Decodes one JSON value as a JSON-RPC 2.0 message.
pub fn decode(value: &Value) -> Result<Message, Malformed> {
    let obj = value.as_object().ok_or_else(|| Malformed("message is not a JSON object".into()))?;
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Malformed("invalid message version tag; expected \"2.0\"".into()));
    }
    let id = obj.get("id").and_then(Id::from_value);
    let params = obj.get("params").cloned();
    match (obj.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => Ok(Message::Request { id, method: method.to_owned(), params }),
        (Some(method), None) => Ok(Message::Notification { method: method.to_owned(), params }),
        (None, Some(_)) => Ok(Message::Response),
        (None, None) => Err(Malformed("invalid message: neither a request nor a response".into())),
    }
}

/// A JSON string literal, with the line separators escaped as Go escapes them.
pub fn json_string(s: &str) -> String {
    let encoded = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    wire::escape_line_separators(&encoded)
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`
pub fn result_frame(id: &Id, result: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{result}}}", id.encode())
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}`; `id` is
/// omitted when unknown.
pub fn error_frame(id: Option<&Id>, code: i64, message: &str) -> String {
    let id = id.map(|i| format!(",\"id\":{}", i.encode())).unwrap_or_default();
    format!("{{\"jsonrpc\":\"2.0\"{id},\"error\":{{\"code\":{code},\"message\":{}}}}}", json_string(message))
}

/// Methods this server answers; anything else is "method not found".
pub fn is_known_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "tools/list"
            | "tools/call"
            | "logging/setLevel"
            | "resources/list"
            | "resources/templates/list"
            | "prompts/list"
    )
}

/// The result of a list method that the drop-in answers with nothing to
/// list, as the reference does: it has no resources and no prompts.
fn empty_list_result(method: &str) -> Option<&'static str> {
    match method {
        "resources/list" => Some(r#"{"resources":[]}"#),
        "resources/templates/list" => Some(r#"{"resourceTemplates":[]}"#),
        "prompts/list" => Some(r#"{"prompts":[]}"#),
        _ => None,
    }
}

/// Methods whose params must be present.
pub fn requires_params(method: &str) -> bool {
    matches!(method, "initialize" | "tools/call" | "logging/setLevel")
}

/// The checks a request passes before dispatch, in the reference's wording.
pub fn check_request(msg: &Message) -> Result<(), String> {
    match msg {
        Message::Request { method, params, .. } => {
            if method.starts_with("notifications/") {
                return Err(format!("invalid request: unexpected id for {}", go_quote(method)));
            }
            if is_known_method(method) && requires_params(method) && params.is_none() {
                return Err("invalid request: missing required \"params\"".into());
            }
            Ok(())
        }
        Message::Notification { method, .. } => {
            if is_known_method(method) {
                return Err(format!("invalid request: missing id for {}", go_quote(method)));
            }
            Ok(())
        }
        Message::Response => Ok(()),
    }
}

/// Go's `%q` for the strings that appear in protocol errors.
pub fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The protocol state of one MCP session. Over stdio a session lives as long
/// as the process; over stateless HTTP every request gets a fresh,
/// already-initialised one.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// Requests other than `initialize` and `ping` are refused until set.
    pub initialized: bool,
    /// A second `initialize` in one session is refused.
    pub initialize_seen: bool,
}

impl Session {
    /// A stateless HTTP request: usable at once, and may still initialize.
    pub fn stateless() -> Self {
        Session { initialized: true, initialize_seen: false }
    }
}

/// What one request produced: the encoded response frame, and the tool log
/// when the `search` handler ran.
#[derive(Debug, Clone)]
pub struct Reply {
    pub frame: String,
    pub tool_log: Option<ToolLog>,
}

/// The MCP surface of one search engine: `search` alone (the drop-in, byte
/// for byte the reference), or with the navigation tools and resources.
#[derive(Debug)]
pub struct McpService {
    engine: SearchEngine,
    name: String,
    version: String,
    tools_list: String,
    nav: Option<Arc<NavService>>,
    rate_limit: Option<RateLimiter>,
    limits: ArgLimits,
    errors: tool::ErrorText,
}

impl McpService {
    /// `version` is reported as `serverInfo.version`.
    pub fn new(engine: SearchEngine, name: impl Into<String>, version: impl Into<String>) -> Self {
        McpService {
            engine,
            name: name.into(),
            version: version.into(),
            tools_list: tools_list_result(),
            nav: None,
            rate_limit: None,
            limits: ArgLimits::default(),
            errors: tool::ErrorText::Reference,
        }
    }

    /// How failed searches read (the reference's wording by default).
    pub fn with_error_text(mut self, errors: tool::ErrorText) -> Self {
        self.errors = errors;
        self
    }

    /// Caps on the `search` arguments (see [`ArgLimits`]).
    pub fn with_limits(mut self, limits: ArgLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Adds the navigation tools and resources (`tools/list` then shows
    /// `search` and the seven tools).
    pub fn with_navigation(mut self, nav: Arc<NavService>) -> Self {
        self.tools_list = extended_tools_list_result();
        self.nav = Some(nav);
        self
    }

    /// Limits tool calls per client address (HTTP only: the address is
    /// what `handle_request_from` is given).
    pub fn with_rate_limit(mut self, per_minute: u32) -> Self {
        self.rate_limit = (per_minute > 0).then(|| RateLimiter::new(per_minute));
        self
    }

    /// Whether this service answers `method` (`resources/read` only with
    /// navigation: the drop-in lists no resources).
    pub fn knows_method(&self, method: &str) -> bool {
        is_known_method(method) || (self.nav.is_some() && method == "resources/read")
    }

    /// Handles one request from a known client address (HTTP): tool calls
    /// count toward the rate limit when one is set.
    pub async fn handle_request_from(
        &self,
        session: &mut Session,
        id: &Id,
        method: &str,
        params: Option<&Value>,
        ctx: &CallContext,
        client: Option<IpAddr>,
    ) -> Reply {
        if method == "tools/call"
            && session.initialized
            && let (Some(limiter), Some(ip)) = (&self.rate_limit, client)
            && let Err(text) = limiter.check(ip)
        {
            return Reply { frame: result_frame(id, &call_result(&text, true)), tool_log: None };
        }
        self.handle_request(session, id, method, params, ctx).await
    }

    /// Handles one request. `session` is updated by `initialize`.
    pub async fn handle_request(
        &self,
        session: &mut Session,
        id: &Id,
        method: &str,
        params: Option<&Value>,
        ctx: &CallContext,
    ) -> Reply {
        let reply = |frame| Reply { frame, tool_log: None };
        if method == "initialize" {
            if session.initialize_seen {
                return reply(error_frame(Some(id), 0, "duplicate \"initialize\" received"));
            }
            return match params {
                Some(Value::Null) | None => reply(error_frame(Some(id), 0, "missing required \"params\"")),
                Some(p) => {
                    session.initialized = true;
                    session.initialize_seen = true;
                    reply(result_frame(id, &self.initialize_result(p)))
                }
            };
        }
        if !session.initialized && method != "ping" {
            return reply(error_frame(
                Some(id),
                0,
                &format!("method {} is invalid during session initialization", go_quote(method)),
            ));
        }
        match method {
            "ping" | "logging/setLevel" => reply(result_frame(id, "{}")),
            "tools/list" => reply(result_frame(id, &self.tools_list)),
            "tools/call" => self.call_tool(id, params, ctx).await,
            "resources/list" | "resources/read" | "resources/templates/list" if self.nav.is_some() => {
                reply(self.resources(id, method, params).await)
            }
            other => reply(match empty_list_result(other) {
                Some(result) => result_frame(id, result),
                None => error_frame(Some(id), METHOD_NOT_FOUND, &format!("method not found: {}", go_quote(other))),
            }),
        }
    }

    fn initialize_result(&self, params: &Value) -> String {
        let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
        let version = if ECHOED_VERSIONS.contains(&requested) { requested } else { FALLBACK_VERSION };
        let resources = if self.nav.is_some() { "\"resources\":{}," } else { "" };
        format!(
            "{{\"capabilities\":{{\"logging\":{{}},{resources}\"tools\":{{\"listChanged\":true}}}},\"protocolVersion\":{},\"serverInfo\":{{\"name\":{},\"version\":{}}}}}",
            json_string(version),
            json_string(&self.name),
            json_string(&self.version)
        )
    }

    async fn call_tool(&self, id: &Id, params: Option<&Value>, ctx: &CallContext) -> Reply {
        let Some(Value::Object(params)) = params else {
            let shown = params.map(|p| p.to_string()).unwrap_or_else(|| "null".into());
            return Reply {
                frame: error_frame(
                    Some(id),
                    INVALID_PARAMS,
                    &format!(
                        "handling 'tools/call': invalid params: unmarshaling {} into a *mcp.CallToolParamsRaw: json: cannot unmarshal into Go value",
                        go_quote(&shown)
                    ),
                ),
                tool_log: None,
            };
        };
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(nav) = &self.nav
            && name != tool::TOOL_NAME
            && let Some(result) = nav.call(name, params.get("arguments")).await
        {
            let frame = match result {
                Ok(text) => result_frame(id, &call_result(&text, false)),
                Err(text) => result_frame(id, &call_result(&text, true)),
            };
            return Reply { frame, tool_log: None };
        }
        if name != tool::TOOL_NAME {
            return Reply {
                frame: error_frame(Some(id), INVALID_PARAMS, &format!("unknown tool {}", go_quote(name))),
                tool_log: None,
            };
        }
        let args = match validate_arguments(params.get("arguments")) {
            Ok(args) => args,
            Err(text) => return Reply { frame: result_frame(id, &call_result(&text, true)), tool_log: None },
        };
        let outcome = tool::call_with(&self.engine, args, ctx, &self.limits, self.errors).await;
        Reply { frame: result_frame(id, &call_result(&outcome.text, outcome.is_error)), tool_log: Some(outcome.log) }
    }
}

impl McpService {
    async fn resources(&self, id: &Id, method: &str, params: Option<&Value>) -> String {
        let Some(nav) = self.nav.clone() else {
            return error_frame(Some(id), METHOD_NOT_FOUND, &format!("method not found: {}", go_quote(method)));
        };
        match method {
            "resources/list" => result_frame(id, &nav::repos::resources_list().to_string()),
            "resources/templates/list" => result_frame(id, &nav::repos::resource_templates().to_string()),
            _ => {
                let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or("").to_owned();
                let read_uri = uri.clone();
                let result = tokio::task::spawn_blocking(move || nav::repos::read_resource(&nav, &read_uri))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()));
                match result {
                    Ok(text) => {
                        let body = serde_json::json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]});
                        result_frame(id, &body.to_string())
                    }
                    Err(message) => error_frame(Some(id), RESOURCE_NOT_FOUND, &message),
                }
            }
        }
    }
}

/// MCP's "resource not found" error code.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// `tools/list` with `search` followed by the navigation tools; every
/// schema has `additionalProperties: false`.
pub fn extended_tools_list_result() -> String {
    let base = tools_list_result();
    let tools: Vec<String> = nav::TOOLS.iter().map(|t| t.definition().to_string()).collect();
    // Insert after the search tool, keeping its exact bytes.
    match base.strip_suffix("]}") {
        Some(head) => format!("{head},{}]}}", tools.join(",")),
        None => base,
    }
}

/// `{"content":[{"type":"text","text":…}]}` plus `"isError":true` on errors.
/// The text is HTML-escaped: the reference encodes tool results with Go's
/// default JSON encoder.
pub fn call_result(text: &str, is_error: bool) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str("{\"content\":[{\"type\":\"text\",\"text\":");
    out.push_str(&wire::go_escape(&json_string(text)));
    out.push_str("}]");
    if is_error {
        out.push_str(",\"isError\":true");
    }
    out.push('}');
    out
}

/// The `tools/list` result, in the reference's key order.
pub fn tools_list_result() -> String {
    let schema = tool::input_schema_ordered();
    let mut props = String::new();
    for (i, (name, kind, description)) in schema.iter().enumerate() {
        if i > 0 {
            props.push(',');
        }
        let _ = write!(
            props,
            "{}:{{\"type\":{},\"description\":{}}}",
            json_string(name),
            json_string(kind),
            wire::go_escape(&json_string(description))
        );
    }
    format!(
        "{{\"ttlMs\":0,\"cacheScope\":\"public\",\"tools\":[{{\"annotations\":{{\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":true,\"readOnlyHint\":true}},\"description\":{},\"inputSchema\":{{\"type\":\"object\",\"properties\":{{{props}}},\"required\":[\"query\"],\"additionalProperties\":false}},\"name\":{},\"title\":{}}}]}}",
        json_string(tool::DESCRIPTION),
        json_string(tool::TOOL_NAME),
        json_string(tool::TITLE)
    )
}

/// Checks `arguments` against the input schema as the reference's schema
/// validator does, then decodes them. Failures are tool-error texts.
pub fn validate_arguments(arguments: Option<&Value>) -> Result<SearchArgs, String> {
    let empty = Map::new();
    let obj = match arguments {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(other) => {
            return Err(format!(
                "validating \"arguments\": unmarshaling arguments: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_json_kind(other)
            ));
        }
    };
    let wrap = |inner: String| format!("validating \"arguments\": validating root: {inner}");
    for (name, kind, _) in tool::input_schema_ordered() {
        if let Some(value) = obj.get(name)
            && !has_schema_type(value, kind)
        {
            return Err(wrap(format!(
                "validating /properties/{name}: type: {} has type {}, want {}",
                crate::limits::shown(&go_value(value)),
                go_quote(schema_type_of(value)),
                go_quote(kind)
            )));
        }
    }
    let known: Vec<&str> = tool::input_schema_ordered().iter().map(|(n, _, _)| *n).collect();
    // Names are quoted as the reference quotes them; a long one is cut and a
    // long list ends after ten, so the message stays short whatever was sent.
    let extra: Vec<String> =
        obj.keys().filter(|k| !known.contains(&k.as_str())).map(|k| go_quote(&crate::limits::shown(k))).collect();
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
                return Err(format!(
                    "json: cannot unmarshal number {} into Go struct field searchInput.limit of type int",
                    go_value(v)
                ));
            }
            v.as_i64().unwrap_or(f as i64)
        }
    };
    Ok(SearchArgs { query: text("query"), source: text("source"), path: text("path"), limit })
}

fn has_schema_type(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0 && f.is_finite()),
        _ => true,
    }
}

/// The JSON Schema type name the validator reports for a value.
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

fn go_json_kind(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        _ => "object",
    }
}

/// Go's `%v` of a decoded JSON value (numbers are float64).
pub fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<invalid reflect.Value>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys.iter().map(|k| format!("{k}:{}", go_value(&map[*k]))).collect();
            format!("map[{}]", inner.join(" "))
        }
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`: shortest round-trip digits, in
/// exponent form when the decimal exponent is below -4 or at least 6.
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Shortest round-trip digits and decimal exponent from Rust's formatter.
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    if exp < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize));
    }
    let point = exp as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reference's `tools/list` answer, captured from its SDK.
    const REFERENCE_TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"ttlMs":0,"cacheScope":"public","tools":[{"annotations":{"destructiveHint":false,"idempotentHint":true,"openWorldHint":true,"readOnlyHint":true},"description":"Search indexed GitHub repository content by meaning. Use this when you need implementation details, documentation, configuration, symbols, or examples from the indexed codebases. Write one specific natural-language query with the relevant names or error text. Omit source when you do not know which repository contains the answer; set it when the user identifies a repository or branch.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"A focused natural-language search query. Include exact identifiers, filenames, or error text when known; semantic matching also finds related wording."},"source":{"type":"string","description":"Optional repository scope in owner/repository or owner/repository@branch form. Omit it to search every indexed repository."},"path":{"type":"string","description":"Optional repository-relative path pattern. * and ** match across folders and ? matches one character; examples: docs/*, **/*.go, README.md."},"limit":{"type":"integer","description":"Maximum excerpts to return, from 1 through 20. Use the default for most questions; increase only when broader evidence is needed."}},"required":["query"],"additionalProperties":false},"name":"search","title":"Search Repository Content"}]}}"#;

    #[test]
    fn tools_list_is_byte_identical() {
        assert_eq!(result_frame(&Id::Int(2), &tools_list_result()), REFERENCE_TOOLS_LIST);
    }

    #[test]
    fn frames_and_ids() {
        assert_eq!(result_frame(&Id::Str("a\u{2028}".into()), "{}"), r#"{"jsonrpc":"2.0","id":"a\u2028","result":{}}"#);
        assert_eq!(
            error_frame(Some(&Id::Int(7)), METHOD_NOT_FOUND, "method not found: \"x<y\""),
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found: \"x<y\""}}"#
        );
        assert_eq!(Id::from_value(&json!(1.9)), Some(Id::Int(1)));
        assert_eq!(
            decode(&json!({"jsonrpc":"2.0","id":null,"method":"m"})).unwrap(),
            Message::Notification { method: "m".into(), params: None }
        );
        assert!(decode(&json!({"jsonrpc":"1.0","id":1,"method":"m"})).is_err());
        assert!(decode(&json!([1])).is_err());
        assert!(decode(&json!({"jsonrpc":"2.0"})).is_err());
    }

    #[test]
    fn tool_results_escape_html_but_not_the_envelope() {
        assert_eq!(call_result("a<b>&c", false), r#"{"content":[{"type":"text","text":"a\u003cb\u003e\u0026c"}]}"#);
        assert_eq!(call_result("bad", true), r#"{"content":[{"type":"text","text":"bad"}],"isError":true}"#);
    }

    fn bad(args: Value) -> String {
        validate_arguments(Some(&args)).unwrap_err()
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
            r#"validating "arguments": validating root: validating /properties/limit: type: <invalid reflect.Value> has type "null", want "integer""#
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
            bad(json!({"foo":1})),
            r#"validating "arguments": validating root: unexpected additional properties ["foo"]"#
        );
        let ok = validate_arguments(Some(&json!({"query":"x","limit":3.0,"source":"a/b","path":"p"}))).unwrap();
        assert_eq!(ok, SearchArgs { query: "x".into(), source: "a/b".into(), path: "p".into(), limit: 3 });
    }

    #[test]
    fn go_float_matches_strconv_g_shortest() {
        for (f, s) in [
            (5.0, "5"),
            (2.5, "2.5"),
            (1e20, "1e+20"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-3.25, "-3.25"),
            (1e6, "1e+06"),
        ] {
            assert_eq!(go_float(f), s, "{f}");
        }
    }
}
