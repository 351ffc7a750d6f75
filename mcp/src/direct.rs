//! Stateless POSTs served by the `ServerHandler` directly, without a
//! service per request.
//!
//! rmcp's stateless Streamable HTTP service starts a service for every
//! POST: a serve loop and a one-shot transport, with the handler, the
//! response and the loop's end each on a task of its own. On a
//! multi-threaded runtime those hand-offs wake the other worker several
//! times per request (futex and eventfd writes, context switches), which
//! costs more CPU than the protocol work itself. Yet rmcp's stateless path
//! for a plain request is simple: build a [`RequestContext`] whose peer
//! knows the protocol version of the `MCP-Protocol-Version` header, call
//! [`rmcp::Service::handle_request`], answer the one message as JSON with
//! status 200. This module does exactly that, inline on the connection's
//! task, for the requests where rmcp would do nothing else; every other
//! message (notifications, `initialize`, per-request protocol versions,
//! custom methods, unusual headers) still goes to rmcp's service.
//!
//! A [`Peer`] only comes out of a running rmcp service, so each protocol
//! version gets one long-lived service whose transport never delivers a
//! message: it exists to lend its peer, with the same peer info rmcp builds
//! for a stateless request. The handlers of this crate never send to the
//! peer (no progress, logging or sampling from a tool call); a message sent
//! to it would be dropped, where rmcp's per-request service would stream it
//! as SSE.

use std::sync::OnceLock;

use http::{HeaderMap, header};
use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientRequest, GetExtensions as _, GetMeta as _, Implementation,
    InitializeRequestParams, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RunningService};
use rmcp::transport::Transport;

use crate::server::McpServer;

/// The header a stateless request's protocol version comes in.
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// The version rmcp assumes when that header is absent.
const DEFAULT_VERSION: ProtocolVersion = ProtocolVersion::V_2025_03_26;

/// The direct path of one [`McpServer`].
pub struct Direct {
    server: McpServer,
    /// The versions served directly, each with the service lending its peer.
    /// Only versions before the standard-headers and per-request-metadata
    /// revision: rmcp checks nothing more for them.
    peers: Vec<(ProtocolVersion, OnceLock<RunningService<RoleServer, McpServer>>)>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct").field("versions", &self.peers.len()).finish()
    }
}

/// What [`Direct::serve`] gives back: the reply, or the request for rmcp.
pub enum Served {
    /// The JSON-RPC reply (HTTP 200, `application/json`).
    Reply(Vec<u8>),
    /// Not one for the direct path: rmcp's service answers it.
    ToRmcp(http::request::Parts),
    /// A reply serde_json cannot encode (none of this crate's handlers
    /// returns one): HTTP 500 with rmcp's text.
    Unencodable(String),
}

impl Direct {
    pub fn new(server: McpServer) -> Self {
        // The revision that brings standard headers and per-request metadata,
        // which rmcp checks against the body.
        let newest_plain = ProtocolVersion::STANDARD_HEADERS.as_str().min(ProtocolVersion::V_2026_07_28.as_str());
        let supported = rmcp::ServerHandler::supported_protocol_versions(&server);
        let peers = supported
            .iter()
            .filter(|v| ProtocolVersion::KNOWN_VERSIONS.contains(v) && v.as_str() < newest_plain)
            .map(|v| (v.clone(), OnceLock::new()))
            .collect();
        Direct { server, peers }
    }

    /// Serves `body` (what the framing check forwards) when rmcp's
    /// stateless service would only run the handler on it; `method` is the
    /// method the check read.
    pub async fn serve(&self, parts: http::request::Parts, body: &[u8], method: Option<&str>) -> Served {
        if method.is_none_or(|m| m == "initialize" || m == "server/discover" || m.starts_with("notifications/")) {
            return Served::ToRmcp(parts);
        }
        let Some(peer) = self.peer_for(&parts.headers) else { return Served::ToRmcp(parts) };
        let decoded = std::str::from_utf8(body).map(|text| crate::frame::decode_message(text, method));
        let request = match decoded {
            Ok(Ok(ClientJsonRpcMessage::Request(request))) if plain(&request.request) => request,
            _ => return Served::ToRmcp(parts),
        };
        // As rmcp's serve loop does: the HTTP parts go into the context's
        // extensions, the request's `_meta` into its meta.
        let (id, mut request) = (request.id, request.request);
        request.extensions_mut().insert(parts);
        let mut context = RequestContext::new(id.clone(), peer);
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let message = match rmcp::Service::handle_request(&self.server, request, context).await {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
        };
        match serde_json::to_vec(&message) {
            Ok(reply) => Served::Reply(reply),
            Err(e) => Served::Unencodable(format!("Encounter an error when serialize json response: {e}")),
        }
    }

    /// The peer of the request's protocol version, when its headers are
    /// ones rmcp's stateless service accepts without a further check.
    fn peer_for(&self, headers: &HeaderMap) -> Option<Peer<RoleServer>> {
        if !plain_headers(headers) {
            return None;
        }
        let version = match headers.get(PROTOCOL_VERSION_HEADER) {
            None => DEFAULT_VERSION,
            Some(value) => {
                let text = value.to_str().ok()?;
                self.peers.iter().find(|(v, _)| v.as_str() == text)?.0.clone()
            }
        };
        let (_, slot) = self.peers.iter().find(|(v, _)| *v == version)?;
        let service = slot.get_or_init(|| {
            let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
                .with_protocol_version(version);
            rmcp::service::serve_directly(self.server.clone(), Idle, Some(info))
        });
        Some(service.peer().clone())
    }
}

/// A request rmcp's stateless service hands to the handler with nothing
/// else to do: not `initialize` (its handler sets the peer's info), not a
/// discovery or a request naming its own protocol version (rmcp negotiates
/// those), not a method rmcp does not type.
fn plain(request: &ClientRequest) -> bool {
    !matches!(
        request,
        ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_) | ClientRequest::CustomRequest(_)
    ) && request.get_meta().protocol_version().is_none()
}

/// The headers of a POST that rmcp's stateless service serves without a
/// further check: a well-formed `Host`, an `Accept` listing JSON and SSE
/// without parameters (a `q=0` would exclude one), a JSON `Content-Type`,
/// and no MCP header other than the protocol version.
fn plain_headers(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if host.is_none_or(|h| http::uri::Authority::try_from(h).is_err()) {
        return false;
    }
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { return false };
        if value.contains([';', '"']) {
            return false;
        }
        for entry in value.split(',').map(str::trim) {
            json |= entry.eq_ignore_ascii_case("application/json");
            sse |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let json_body = content_type.is_some_and(|v| {
        v.split_once(';').map_or(v, |(essence, _)| essence).trim().eq_ignore_ascii_case("application/json")
    });
    let mcp_headers = headers.keys().any(|k| k.as_str().starts_with("mcp-") && k.as_str() != PROTOCOL_VERSION_HEADER);
    json && sse && json_body && !mcp_headers
}

/// The transport of a service that only lends its peer: nothing arrives,
/// what is sent goes nowhere.
struct Idle;

impl Transport<RoleServer> for Idle {
    type Error = std::io::Error;

    fn send(&mut self, _: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        std::future::pending()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        map
    }

    const PLAIN: [(&str, &str); 3] = [
        ("host", "localhost:8080"),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
    ];

    #[test]
    fn only_plain_headers_take_the_direct_path() {
        assert!(plain_headers(&headers(&PLAIN)));
        let with = |extra: (&str, &str)| {
            let mut pairs = PLAIN.to_vec();
            pairs.push(extra);
            plain_headers(&headers(&pairs))
        };
        assert!(with(("mcp-protocol-version", "2025-06-18")));
        assert!(!with(("mcp-method", "tools/call")));
        assert!(!with(("mcp-session-id", "x")));
        assert!(!with(("accept", "text/event-stream;q=0")));
        let only = |pairs: &[(&str, &str)]| plain_headers(&headers(pairs));
        assert!(!only(&[PLAIN[0], PLAIN[1]]), "no content type");
        assert!(!only(&[PLAIN[0], ("accept", "application/json"), PLAIN[2]]), "no SSE");
        assert!(!only(&[("host", "a b"), PLAIN[1], PLAIN[2]]), "a malformed host");
        assert!(!only(&[PLAIN[1], PLAIN[2]]), "no host");
        assert!(only(&[
            PLAIN[0],
            ("accept", "text/event-stream"),
            ("accept", "APPLICATION/JSON"),
            ("content-type", "application/json; charset=utf-8")
        ]));
    }
}
