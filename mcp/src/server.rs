//! The `ServerHandler`: `search` alone (the drop-in), or with the navigation
//! tools and resources, behind one rmcp `ToolRouter`.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, ContentBlock, ErrorCode,
    ErrorData, Implementation, InitializeResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerCapabilities, Tool, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use rr_core::{ArgLimits, CallContext, SearchEngine};
use serde_json::Value;

use std::time::Instant;

use crate::auth::Role;
use crate::search::{self, ErrorText, ToolLog, quote};
use crate::telemetry::{self, ErrorClass, ErrorSlot};

/// The navigation tools and resources, as the MCP layer sees them. The
/// implementation validates its own arguments: its texts are the contract's.
#[async_trait]
pub trait Navigation: Send + Sync + 'static {
    /// The tool definitions, in `tools/list` order (after `search`).
    fn tools(&self) -> Vec<Tool>;
    /// Runs tool `name`: its result text, or a tool-error text. `None` when
    /// `name` is not one of [`Navigation::tools`].
    async fn call(&self, name: &str, arguments: Option<&Value>) -> Option<Result<String, String>>;
    /// The `resources/list` result.
    fn resources(&self) -> Value;
    /// The `resources/templates/list` result.
    fn resource_templates(&self) -> Value;
    /// The JSON text of resource `uri`, or why it cannot be read.
    async fn read_resource(&self, uri: &str) -> Result<String, String>;
}

/// Where the HTTP layer collects the log fields of a tool call: put into
/// the request's extensions by the log layer, filled by the handler.
#[derive(Debug, Clone, Default)]
pub struct ToolLogSlot(pub Arc<Mutex<Option<ToolLog>>>);

impl ToolLogSlot {
    pub fn take(&self) -> Option<ToolLog> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
    fn put(&self, log: ToolLog) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(log);
    }
    /// Changes the log fields, an empty set when none were put.
    fn amend(&self, change: impl FnOnce(&mut ToolLog)) {
        change(self.0.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(ToolLog::default));
    }
}

/// The version answered when the client asks for one this server does not
/// speak (the reference's newest).
pub const FALLBACK_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

struct Inner {
    engine: SearchEngine,
    name: String,
    version: String,
    limits: ArgLimits,
    errors: ErrorText,
    nav: Option<Arc<dyn Navigation>>,
    log_durations: bool,
    /// How long a search may take in all, backends' attempts included.
    deadline: Option<std::time::Duration>,
    /// When set, `search` takes `language` and `kind` (see [`search::SearchFacets`]).
    facets: Option<Arc<dyn search::SearchFacets>>,
    /// `tools/list` order: `search`, then the navigation tools.
    tools: Vec<Tool>,
    router: ToolRouter<McpServer>,
}

/// The MCP server of one search engine. Cheap to clone: HTTP builds one
/// rmcp service per request from it.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("name", &self.inner.name).field("tools", &self.inner.tools.len()).finish()
    }
}

/// Builds an [`McpServer`].
pub struct McpServerBuilder {
    engine: SearchEngine,
    name: String,
    version: String,
    limits: ArgLimits,
    errors: ErrorText,
    nav: Option<Arc<dyn Navigation>>,
    log_durations: bool,
    deadline: Option<std::time::Duration>,
    facets: Option<Arc<dyn search::SearchFacets>>,
}

impl McpServerBuilder {
    /// Every tool call gets its fields in the HTTP request log line, with its
    /// duration (`mcp.duration_ms`); without it only `search` is logged, with
    /// the reference's fields (the drop-in).
    pub fn log_tool_durations(mut self, on: bool) -> Self {
        self.log_durations = on;
        self
    }

    /// Lets `search` be narrowed by language and kind of file, among the
    /// values `facets` holds (`serve` over the embedded store; never the
    /// drop-in, whose schema is pinned).
    pub fn facets(mut self, facets: Arc<dyn search::SearchFacets>) -> Self {
        self.facets = Some(facets);
        self
    }

    /// How failed searches read (the reference's wording by default).
    pub fn error_text(mut self, errors: ErrorText) -> Self {
        self.errors = errors;
        self
    }

    /// One deadline for each search as a whole, whatever the time-outs and
    /// attempts of its backends (none by default: the drop-in's searches
    /// take what the reference's take).
    pub fn search_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Caps on the `search` arguments (see [`ArgLimits`]).
    pub fn limits(mut self, limits: ArgLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Adds the navigation tools and resources.
    pub fn navigation(mut self, nav: Arc<dyn Navigation>) -> Self {
        self.nav = Some(nav);
        self
    }

    pub fn build(self) -> McpServer {
        let mut tools = vec![search::definition()];
        let mut router = ToolRouter::new().with_route(ToolRoute::new_dyn(
            search::definition(),
            |ctx: ToolCallContext<'_, McpServer>| {
                Box::pin(async move { ctx.service.call_search(ctx.arguments, ctx.request_context).await })
            },
        ));
        if let Some(nav) = &self.nav {
            for tool in nav.tools() {
                let name = tool.name.to_string();
                tools.push(tool.clone());
                router = router.with_route(ToolRoute::new_dyn(tool, move |ctx: ToolCallContext<'_, McpServer>| {
                    let name = name.clone();
                    Box::pin(
                        async move { ctx.service.call_navigation(&name, ctx.arguments, ctx.request_context).await },
                    )
                }));
            }
        }
        McpServer {
            inner: Arc::new(Inner {
                engine: self.engine,
                name: self.name,
                version: self.version,
                limits: self.limits,
                errors: self.errors,
                nav: self.nav,
                log_durations: self.log_durations,
                deadline: self.deadline,
                facets: self.facets,
                tools,
                router,
            }),
        }
    }
}

/// A tool result with one text item; `isError` only on errors, as the
/// reference writes it.
pub fn text_result(text: String, is_error: bool) -> CallToolResult {
    if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.is_error = None;
        result
    }
}

/// The error of a request whose client cancelled it (rmcp sends none: a
/// cancelled request is not answered).
fn cancelled() -> ErrorData {
    ErrorData::new(ErrorCode(-32800), "request cancelled", None)
}

/// What an HTTP request carries into a tool call: the `Authorization`
/// header (passed through to Chroma) and the log slot.
fn http_parts(context: &RequestContext<RoleServer>) -> (CallContext, Option<ToolLogSlot>) {
    let Some(parts) = context.extensions.get::<http::request::Parts>() else {
        return (CallContext::default(), None);
    };
    let authorization = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    (CallContext { authorization }, parts.extensions.get::<ToolLogSlot>().cloned())
}

/// The role of the token an HTTP request came with (`None`: no
/// authentication, as over stdio).
fn role(context: &RequestContext<RoleServer>) -> Option<Role> {
    context.extensions.get::<http::request::Parts>()?.extensions.get::<Role>().copied()
}

impl McpServer {
    /// Whether tool `name` is marked read-only (what a read-only token may call).
    fn is_read_only(&self, name: &str) -> bool {
        self.inner
            .tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.annotations.as_ref())
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false)
    }

    /// `version` is reported as `serverInfo.version`.
    pub fn builder(engine: SearchEngine, name: impl Into<String>, version: impl Into<String>) -> McpServerBuilder {
        McpServerBuilder {
            engine,
            name: name.into(),
            version: version.into(),
            limits: ArgLimits::default(),
            errors: ErrorText::Reference,
            nav: None,
            log_durations: false,
            deadline: None,
            facets: None,
        }
    }

    /// The tools in `tools/list` order, `search`'s enums as of now.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = self.inner.tools.clone();
        if let (Some(facets), Some(search)) = (&self.inner.facets, tools.first_mut()) {
            *search = search::definition_with(facets.as_ref());
        }
        tools
    }

    /// Whether the navigation tools and resources are served.
    pub fn has_navigation(&self) -> bool {
        self.inner.nav.is_some()
    }

    /// A resource listing of the navigation, or an empty `key` list without it.
    fn listed<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        list: impl FnOnce(&dyn Navigation) -> Value,
    ) -> Result<T, ErrorData> {
        from_json(self.inner.nav.as_deref().map_or_else(|| serde_json::json!({ key: [] }), list))
    }

    async fn call_search(
        &self,
        arguments: Option<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (ctx, slot) = http_parts(&context);
        let errors = context.extensions.get::<ErrorSlot>().cloned().unwrap_or_default();
        let args = match search::validate_arguments_with(arguments.as_ref(), self.inner.facets.as_deref()) {
            Ok(args) => args,
            Err(text) => {
                errors.set(ErrorClass::InvalidArguments);
                return Ok(text_result(text, true).into());
            }
        };
        let inner = &self.inner;
        // Dropping the search future stops it: its backend requests are
        // aborted and nothing is rendered for a client that has gone.
        let timed_out = inner.deadline.map(|deadline| (deadline, args.clone()));
        let search = search::call_with(&inner.engine, args, &ctx, &inner.limits, inner.errors);
        let search = async {
            match timed_out {
                None => search.await,
                Some((deadline, args)) => {
                    tokio::time::timeout(deadline, search).await.unwrap_or_else(|_| search::timed_out(&args, deadline))
                }
            }
        };
        let outcome = tokio::select! {
            outcome = search => outcome,
            _ = context.ct.cancelled() => return Err(cancelled()),
        };
        if outcome.is_error {
            let backend = outcome.log.error == search::BACKEND_FAILURE;
            errors.set(if backend { ErrorClass::Backend } else { ErrorClass::InvalidArguments });
        }
        if let Some(slot) = slot {
            slot.put(outcome.log);
        }
        Ok(text_result(outcome.text, outcome.is_error).into())
    }

    async fn call_navigation(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(nav) = &self.inner.nav else { return Err(unknown_tool(name)) };
        let errors = context.extensions.get::<ErrorSlot>().cloned().unwrap_or_default();
        let arguments = arguments.map(Value::Object);
        let result = tokio::select! {
            result = nav.call(name, arguments.as_ref()) => result,
            _ = context.ct.cancelled() => return Err(cancelled()),
        };
        match result {
            Some(Ok(text)) => Ok(text_result(text, false).into()),
            Some(Err(text)) => {
                errors.set(ErrorClass::Tool);
                Ok(text_result(text, true).into())
            }
            None => Err(unknown_tool(name)),
        }
    }
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool {}", quote(name)), None)
}

/// MCP's "resource not found".
pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(format!("resource listing: {e}"), None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        let mut capabilities = ServerCapabilities::default();
        capabilities.logging = Some(JsonObject::new());
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        if self.inner.nav.is_some() {
            capabilities.resources = Some(Default::default());
        }
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(self.inner.name.clone(), self.inner.version.clone()))
            .with_protocol_version(FALLBACK_VERSION)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(&[
            ProtocolVersion::V_2024_11_05,
            ProtocolVersion::V_2025_03_26,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
        ])
    }

    // Deprecated by the newest MCP revision, still sent by clients of the older
    // ones the reference speaks: accepted and answered `{}`, as it does.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _: rmcp::model::SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::with_all_items(self.tools());
        // The reference marks the list fresh for no time and shareable.
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Public);
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.router.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        if !self.inner.router.has_route(&request.name) {
            // Not the client's name: a label per unknown name would grow without bound.
            telemetry::record_tool_call("(unknown)", started.elapsed(), Some(ErrorClass::Protocol));
            return Err(unknown_tool(&request.name));
        }
        let role = role(&context);
        if role.is_none() && !self.inner.log_durations && !telemetry::enabled() {
            // The drop-in: nothing to check, count or log beyond the search's own fields.
            return self.inner.router.call(ToolCallContext::new(self, request, context)).await;
        }
        let tool = request.name.to_string();
        let log_slot = if self.inner.log_durations { http_parts(&context).1 } else { None };
        let response = if role == Some(Role::ReadOnly) && !self.is_read_only(&tool) {
            let text =
                format!("{} changes the index: it needs an admin token, and this token is read-only", quote(&tool));
            Err(text_result(text, true))
        } else {
            Ok(())
        };
        let (response, error) = match response {
            Err(refusal) => (Ok(refusal.into()), Some(ErrorClass::Forbidden)),
            Ok(()) => {
                let errors = ErrorSlot::default();
                let mut context = context;
                context.extensions.insert(errors.clone());
                let response = self.inner.router.call(ToolCallContext::new(self, request, context)).await;
                let error = match &response {
                    Err(e) if e.code == cancelled().code => Some(ErrorClass::Cancelled),
                    Err(_) => Some(ErrorClass::Protocol),
                    Ok(_) => errors.take(),
                };
                (response, error)
            }
        };
        let elapsed = started.elapsed();
        telemetry::record_tool_call(&tool, elapsed, error);
        if let Some(log_slot) = log_slot {
            log_slot.amend(|log| {
                if log.tool.is_empty() {
                    log.tool = tool.clone();
                    log.outcome = if error.is_some() { "error" } else { "success" };
                    if let Ok(CallToolResponse::Complete(result)) = &response {
                        log.response_content_bytes =
                            result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.len()).sum();
                    }
                }
                log.duration_ms = Some(elapsed.as_secs_f64() * 1000.0);
            });
        }
        response
    }

    // The drop-in has no resources and no prompts; it still answers the
    // list methods with empty lists, as the reference does.
    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.listed("resources", |nav| nav.resources())
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.listed("resourceTemplates", |nav| nav.resource_templates())
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        // Over HTTP rmcp decodes first: a method it types whose params did not
        // fit arrives here, and gets what the framing check answers on stdio.
        let typed = match crate::frame::typed_fallback(&request.method, request.params.as_ref()) {
            None => {
                let message = format!("method not found: {}", quote(&request.method));
                return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, message, None));
            }
            Some(Err((code, message))) => return Err(ErrorData::new(ErrorCode(code as i32), message, None)),
            Some(Ok(typed)) => typed,
        };
        let result = match typed {
            ClientRequest::InitializeRequest(r) => serde_json::to_value(self.initialize(r.params, context).await?),
            ClientRequest::CallToolRequest(r) => {
                serde_json::to_value(rmcp::model::ServerResult::from(self.call_tool(r.params, context).await?))
            }
            other => {
                let message = format!("method not found: {}", quote(other.method()));
                return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, message, None));
            }
        };
        result
            .map(rmcp::model::CustomResult)
            .map_err(|e| ErrorData::new(ErrorCode::INTERNAL_ERROR, format!("internal error: {e}"), None))
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(Vec::new()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let Some(nav) = &self.inner.nav else {
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, "method not found: \"resources/read\"", None));
        };
        let text = tokio::select! {
            text = nav.read_resource(&uri) => text,
            _ = context.ct.cancelled() => return Err(cancelled()),
        };
        match text {
            Ok(text) => {
                let body =
                    serde_json::json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]});
                Ok(from_json::<ReadResourceResult>(body)?.into())
            }
            Err(message) => Err(ErrorData::new(RESOURCE_NOT_FOUND, message, None)),
        }
    }
}
