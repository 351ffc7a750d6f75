//! The `search` tool: its advertised definition and one call's execution.

use rr_core::federated::skipped_line;
use rr_core::render::render;
use rr_core::{ArgLimits, CallContext, SearchArgs, SearchEngine, SearchOutcome};
use serde::Serialize;

pub const TOOL_NAME: &str = "search";
pub const TITLE: &str = "Search Repository Content";
pub const DESCRIPTION: &str = "Search indexed GitHub repository content by meaning. Use this when you need implementation details, documentation, configuration, symbols, or examples from the indexed codebases. Write one specific natural-language query with the relevant names or error text. Omit source when you do not know which repository contains the answer; set it when the user identifies a repository or branch.";

/// What the request log records of a tool call (HTTP transport only).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolLog {
    pub tool: String,
    pub parameters: SearchArgs,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub response_content_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents_found: Option<usize>,
}

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

/// The input schema's properties in declaration order: name, JSON type,
/// description.
pub fn input_schema_ordered() -> [(&'static str, &'static str, &'static str); 4] {
    [
        (
            "query",
            "string",
            "A focused natural-language search query. Include exact identifiers, filenames, or error text when known; semantic matching also finds related wording.",
        ),
        (
            "source",
            "string",
            "Optional repository scope in owner/repository or owner/repository@branch form. Omit it to search every indexed repository.",
        ),
        (
            "path",
            "string",
            "Optional repository-relative path pattern. * and ** match across folders and ? matches one character; examples: docs/*, **/*.go, README.md.",
        ),
        (
            "limit",
            "integer",
            "Maximum excerpts to return, from 1 through 20. Use the default for most questions; increase only when broader evidence is needed.",
        ),
    ]
}

/// Runs one `search` call. Never fails: every problem becomes a tool error
/// whose text is the contract's message. The arguments are held to `limits`
/// after the reference's checks.
pub async fn call(engine: &SearchEngine, args: SearchArgs, ctx: &CallContext, limits: &ArgLimits) -> ToolOutcome {
    call_with(engine, args, ctx, limits, ErrorText::Reference).await
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

/// [`call`], with the error wording chosen.
pub async fn call_with(
    engine: &SearchEngine,
    args: SearchArgs,
    ctx: &CallContext,
    limits: &ArgLimits,
    errors: ErrorText,
) -> ToolOutcome {
    let mut log = ToolLog { tool: TOOL_NAME.into(), parameters: args.normalized(), ..Default::default() };
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
        Ok(SearchOutcome { results, skipped }) => {
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
            log.error = "repository content search failed".into();
            log.response_content_bytes = text.len();
            ToolOutcome { text, is_error: true, log }
        }
    }
}
