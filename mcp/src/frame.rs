//! The check every incoming message passes before rmcp decodes it.
//!
//! rmcp decodes a message into typed structs in one step, and a message that
//! does not fit is dropped (stdio) or refused without a JSON-RPC answer
//! (HTTP). The contract wants more: an error carrying the request's id
//! whenever that id can be read, and ids echoed exactly, including numbers
//! rmcp's `i64` ids cannot hold. So the envelope (`jsonrpc`, `id`, `method`)
//! is read first with serde_json's raw values, which skip over the rest of
//! the message without interpreting it (a lone surrogate or `1e400` in the
//! arguments does not hide the id), and:
//!
//! - a message that cannot be decoded gets `-32700` (not JSON) or `-32600`
//!   (not a request: wrong tag, id or method) or `-32602` (a known method
//!   with params of the wrong shape), with its id when readable;
//! - an id rmcp cannot hold is swapped for a string placeholder on the way
//!   in and put back, as the client's original text, on the way out.
//!
//! The check runs in two stages. [`screen`] reads the envelope only, which
//! costs a scan of the bytes; [`inspect`] then decodes the typed message.
//! stdio hands that decoded message to rmcp. HTTP hands rmcp the bytes (its
//! service decodes each body itself), so it stops after [`screen`] and runs
//! [`inspect`] only when rmcp could not decode the body: one typed decode
//! per request instead of two.
//!
//! Both typed decodings of a `tools/call`, the request of every search, go
//! through [`decode_tool_call`] first, which builds the same message as
//! rmcp's generic decoding at a fraction of its cost, and leaves anything
//! unusual to it; a `ping` or `tools/list` without params likewise through
//! [`decode_without_params`].

use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, JsonRpcRequest, ListToolsRequest,
    NumberOrString, PingRequest, ServerJsonRpcMessage,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::search::quote;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

/// The parts of a message read before anything else.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    /// `Some("null")` for `"id": null`, which a plain `Option` would read as absent.
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// A field that is present, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(deserializer).map(Some)
}

/// An id as the client wrote it, when rmcp cannot carry it: rmcp sees
/// `placeholder` instead.
#[derive(Debug, Clone)]
pub struct KeptId {
    pub placeholder: String,
    pub original: Box<RawValue>,
}

/// What to do with one incoming message.
#[derive(Debug)]
pub enum Verdict {
    /// Hand it to rmcp; `kept` is set when its id was swapped.
    Forward {
        message: Box<ClientJsonRpcMessage>,
        method: Option<String>,
        id: Option<Box<RawValue>>,
        kept: Option<KeptId>,
    },
    /// Answer at once with this JSON-RPC error frame; rmcp never sees it.
    Answer(String),
    /// Nothing to answer: a notification that is not one rmcp knows how to
    /// read, or a blank line.
    Ignore,
}

/// Numbers the placeholders of kept ids (unique per process).
static NEXT_PLACEHOLDER: AtomicU64 = AtomicU64::new(1);

#[derive(Serialize)]
struct ErrorFrame<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RawValue>,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}`; the id is
/// written as the client wrote it, `null` when it could not be read.
pub fn error_frame(id: Option<&RawValue>, code: i64, message: &str) -> String {
    serde_json::to_string(&ErrorFrame { jsonrpc: "2.0", id, error: ErrorBody { code, message } }).unwrap_or_else(|_| {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":{code},\"message\":\"\"}}}}")
    })
}

/// How rmcp can hold an id.
enum IdShape {
    /// A string or an `i64`: as is.
    Native,
    /// Any other number, or a string rmcp's decoder refuses: swapped.
    Kept,
    /// `null`, a boolean, an array or an object: not an id.
    Invalid,
}

fn id_shape(raw: &RawValue) -> IdShape {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'"') => match serde_json::from_str::<String>(text) {
            Ok(_) => IdShape::Native,
            Err(_) => IdShape::Kept,
        },
        // rmcp writes an `i64` back in its canonical form: `-0` or `1E2` would change.
        Some(b'-' | b'0'..=b'9') => match text.parse::<i64>() {
            Ok(n) if n.to_string() == text => IdShape::Native,
            _ => IdShape::Kept,
        },
        _ => IdShape::Invalid,
    }
}

/// Requests rmcp decodes into typed params: a decoding failure of one of
/// these is the params' fault (`-32602`), not the message's.
fn is_typed_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "tools/list"
            | "tools/call"
            | "logging/setLevel"
            | "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "prompts/list"
            | "prompts/get"
            | "completion/complete"
    )
}

/// A message whose envelope passed [`screen`]: what the typed decoding of
/// [`inspect`] starts from.
#[derive(Debug)]
pub struct Screened<'a> {
    /// The message, trimmed.
    pub text: &'a str,
    /// `text` with a kept id's placeholder in place of the id.
    pub swapped: Option<String>,
    /// The method, when the message has one.
    pub method: Option<String>,
    /// The id as written (absent or `null`: `None`).
    id: Option<&'a RawValue>,
    /// The id when it is a string or a number: what an error answer carries.
    pub readable_id: Option<&'a RawValue>,
    pub kept: Option<KeptId>,
}

impl Screened<'_> {
    /// What rmcp decodes: `text`, or `swapped` when the id was swapped.
    pub fn forwarded(&self) -> &str {
        self.swapped.as_deref().unwrap_or(self.text)
    }
}

/// Inspects one message (the bytes of a stdio line or an HTTP body).
pub fn inspect(bytes: &[u8]) -> Verdict {
    match screen(bytes) {
        Ok(screened) => decode(screened),
        Err(verdict) => verdict,
    }
}

/// The envelope checks of [`inspect`], without decoding the typed message:
/// `Err` holds the verdict when the envelope alone decides it.
pub fn screen(bytes: &[u8]) -> Result<Screened<'_>, Verdict> {
    let Ok(text) = std::str::from_utf8(bytes) else { return Err(not_utf8(bytes)) };
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    if text.is_empty() {
        return Err(Verdict::Ignore);
    }
    screen_text(text, true)
}

/// Bytes that are not UTF-8: a parse error, with the id when it can still
/// be read (the bad bytes may be anywhere, a key included).
fn not_utf8(bytes: &[u8]) -> Verdict {
    let lossy = String::from_utf8_lossy(bytes);
    let text = lossy.trim_matches(|c: char| c.is_ascii_whitespace());
    if text.is_empty() {
        return Verdict::Ignore;
    }
    match screen_text(text, false) {
        Ok(_) => Verdict::Answer(error_frame(None, PARSE_ERROR, NOT_UTF8)),
        Err(verdict) => verdict,
    }
}

const NOT_UTF8: &str = "parse error: the message is not valid UTF-8";

fn screen_text(text: &str, utf8: bool) -> Result<Screened<'_>, Verdict> {
    // A derived struct would also read a JSON array, field by field.
    let envelope = match serde_json::from_str::<Envelope<'_>>(text) {
        Ok(e) if text.starts_with('{') => e,
        Ok(_) => return Err(unreadable(text, None)),
        Err(e) => return Err(unreadable(text, Some(e))),
    };
    let id = envelope.id.filter(|raw| raw.get() != "null");
    let id_shape = id.map(id_shape);
    let readable_id = match id_shape {
        Some(IdShape::Native | IdShape::Kept) => id,
        _ => None,
    };
    let answer = |code: i64, message: &str| Err(Verdict::Answer(error_frame(readable_id, code, message)));
    if !utf8 {
        return answer(PARSE_ERROR, NOT_UTF8);
    }
    if envelope.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return answer(INVALID_REQUEST, "invalid request: \"jsonrpc\" must be \"2.0\"");
    }
    if matches!(id_shape, Some(IdShape::Invalid)) {
        return answer(INVALID_REQUEST, "invalid request: \"id\" must be a string or a number");
    }
    let method = match envelope.method.map(|m| serde_json::from_str::<String>(m.get())) {
        Some(Ok(m)) => Some(m),
        Some(Err(_)) => return answer(INVALID_REQUEST, "invalid request: \"method\" must be a string"),
        None => None,
    };
    // `"id": null` is neither a request (its id must be a string or a number) nor a
    // notification (which has no id member): answered, not run unanswered.
    if method.is_some() && envelope.id.is_some_and(|raw| raw.get() == "null") {
        return answer(INVALID_REQUEST, "invalid request: \"id\" must be a string or a number, not null");
    }
    match (&method, id) {
        (None, None) => return Err(Verdict::Ignore),
        (None, Some(_)) if envelope.result.is_none() && envelope.error.is_none() => {
            return answer(INVALID_REQUEST, "invalid request: a request needs a \"method\"");
        }
        (Some(m), Some(_)) if m.starts_with("notifications/") => {
            return answer(INVALID_REQUEST, &format!("invalid request: unexpected id for {}", quote(m)));
        }
        _ => {}
    }
    let kept = match (id, id_shape) {
        (Some(original), Some(IdShape::Kept)) => Some(KeptId {
            placeholder: format!("\u{1}rr-id-{}", NEXT_PLACEHOLDER.fetch_add(1, Ordering::Relaxed)),
            original: original.to_owned(),
        }),
        _ => None,
    };
    // The id's text is a slice of `text` (a borrowed raw value): the placeholder takes its place
    // there, so nothing else of the message is re-encoded (an id such as `1e400` has no
    // `serde_json::Value` to go through).
    let swapped = kept.as_ref().map(|kept| {
        let raw = id.map(RawValue::get).unwrap_or_default();
        let start = (raw.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        format!("{}{}{}", &text[..start], quote(&kept.placeholder), &text[start + raw.len()..])
    });
    Ok(Screened { text, swapped, method, id, readable_id, kept })
}

/// The typed decoding of a screened message, and the answer when rmcp
/// could not take it as it is.
pub fn decode(screened: Screened<'_>) -> Verdict {
    let decoded = decode_message(screened.forwarded(), screened.method.as_deref());
    let Screened { text, method, id, readable_id, kept, .. } = screened;
    let answer = |code: i64, message: &str| Verdict::Answer(error_frame(readable_id, code, message));
    match decoded {
        // rmcp reads a known method whose params do not fit as a custom one.
        Ok(ClientJsonRpcMessage::Request(request)) if matches!(&request.request, ClientRequest::CustomRequest(c) if is_typed_method(&c.method)) =>
        {
            let m = request.request.method().to_owned();
            match with_lenient_defaults(&m, ClientJsonRpcMessage::Request(request)) {
                Some(message) => Verdict::Forward {
                    message: Box::new(message),
                    method,
                    id: readable_id.map(RawValue::to_owned),
                    kept,
                },
                None => answer(
                    INVALID_PARAMS,
                    &format!("invalid params for {}: they do not have the method's shape", quote(&m)),
                ),
            }
        }
        Ok(message) => {
            Verdict::Forward { message: Box::new(message), method, id: readable_id.map(RawValue::to_owned), kept }
        }
        Err(_) if id.is_none() => Verdict::Ignore,
        Err(e) if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() || !is_json(text) => {
            answer(PARSE_ERROR, &format!("parse error: {e}"))
        }
        Err(e) => match &method {
            Some(m) if is_typed_method(m) => answer(INVALID_PARAMS, &format!("invalid params for {}: {e}", quote(m))),
            _ => answer(INVALID_REQUEST, &format!("invalid request: {e}")),
        },
    }
}

/// Decodes a message the way rmcp does: a `tools/call` through
/// [`decode_tool_call`], a `ping` or `tools/list` through
/// [`decode_without_params`], anything else (or a message those paths do not
/// take) through rmcp's generic decoding.
pub fn decode_message(text: &str, method: Option<&str>) -> serde_json::Result<ClientJsonRpcMessage> {
    let fast = match method {
        Some("tools/call") => decode_tool_call(text),
        Some("ping" | "tools/list") => decode_without_params(text),
        _ => None,
    };
    match fast {
        Some(message) => Ok(message),
        None => serde_json::from_str::<ClientJsonRpcMessage>(text),
    }
}

/// The top-level keys of a request the fast paths take: `jsonrpc`, `id`,
/// `method` and `params` only, each once and unescaped.
#[derive(Default)]
struct Top<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for Top<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TopVisitor;

        impl<'de> serde::de::Visitor<'de> for TopVisitor {
            type Value = Top<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC request object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
                let mut top = Top::default();
                // A borrowed `&str` key fails on an escaped key: then rmcp decodes.
                while let Some(key) = map.next_key::<&'de str>()? {
                    let slot = match key {
                        "jsonrpc" => &mut top.jsonrpc,
                        "id" => &mut top.id,
                        "method" => &mut top.method,
                        "params" => &mut top.params,
                        _ => return Err(serde::de::Error::custom("a key the fast path does not take")),
                    };
                    if slot.replace(map.next_value()?).is_some() {
                        return Err(serde::de::Error::custom("a duplicated key"));
                    }
                }
                Ok(top)
            }
        }

        deserializer.deserialize_map(TopVisitor)
    }
}

/// A request's top-level object, its method as written (quotes included)
/// and its id as rmcp holds it, when the envelope is one the fast paths
/// take: `"jsonrpc": "2.0"` and an id rmcp writes back as it came.
fn fast_envelope(text: &str) -> Option<(Top<'_>, &str, NumberOrString)> {
    let top = serde_json::from_str::<Top<'_>>(text).ok()?;
    if top.jsonrpc?.get() != "\"2.0\"" {
        return None;
    }
    let method = top.method?.get();
    let id = top.id?;
    if !matches!(id_shape(id), IdShape::Native) {
        return None;
    }
    let id = serde_json::from_str::<NumberOrString>(id.get()).ok()?;
    Some((top, method, id))
}

/// A `ping` or `tools/list` without params, decoded straight into rmcp's
/// types, or `None` for anything else (params of any kind included: rmcp
/// reads their `_meta` and, for `tools/list`, a cursor), which rmcp's
/// decoding must take. rmcp's own decoding tries every request type before
/// these, as for a `tools/call`.
pub fn decode_without_params(text: &str) -> Option<ClientJsonRpcMessage> {
    let (top, method, id) = fast_envelope(text)?;
    if top.params.is_some() {
        return None;
    }
    let request = match method {
        "\"ping\"" => ClientRequest::PingRequest(PingRequest::default()),
        "\"tools/list\"" => ClientRequest::ListToolsRequest(ListToolsRequest::default()),
        _ => return None,
    };
    Some(ClientJsonRpcMessage::Request(JsonRpcRequest::new(id, request)))
}

/// A `tools/call` request decoded straight into rmcp's types, or `None`
/// when the message is not one this path is sure to decode exactly as rmcp
/// would; then rmcp's decoding must be used.
///
/// rmcp decodes any client message through untagged enums and flattened
/// structs: the whole message is buffered into serde's `Content` tree, then
/// each request type is tried in turn (about a dozen failed attempts, each
/// building a serde error, before `tools/call`), and the params are
/// buffered once more to split off `_meta`. For the one request the server
/// takes on every search, this reads the top-level object once (only the
/// keys `jsonrpc`, `id`, `method` and `params`, each once and unescaped),
/// decodes the params with rmcp's own `CallToolRequestParams`, and moves
/// their `_meta` into the request's extensions, where rmcp's decoding puts
/// it. Anything unusual (another key, an escaped key, an id rmcp would
/// write differently, params that are not an object or do not decode)
/// returns `None`.
pub fn decode_tool_call(text: &str) -> Option<ClientJsonRpcMessage> {
    /// Whether the params hold only the keys whose values rmcp's decoding
    /// reads as this one does: any other key (rmcp buffers its value, and
    /// refuses a number beyond `f64` there, where a direct decoding skips
    /// it), or an escaped one, leaves the message to rmcp.
    struct PlainCallParams(bool);

    impl<'de> Deserialize<'de> for PlainCallParams {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct KeysVisitor;

            impl<'de> serde::de::Visitor<'de> for KeysVisitor {
                type Value = PlainCallParams;

                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("tools/call params")
                }

                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<PlainCallParams, A::Error> {
                    while let Some(key) = map.next_key::<&'de str>()? {
                        if !matches!(key, "name" | "arguments" | "_meta") {
                            return Ok(PlainCallParams(false));
                        }
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                    Ok(PlainCallParams(true))
                }
            }

            deserializer.deserialize_map(KeysVisitor)
        }
    }

    let (top, method, id) = fast_envelope(text)?;
    if method != "\"tools/call\"" {
        return None;
    }
    let params = top.params?;
    if !params.get().starts_with('{') || !serde_json::from_str::<PlainCallParams>(params.get()).is_ok_and(|p| p.0) {
        return None;
    }
    let mut params = serde_json::from_str::<CallToolRequestParams>(params.get()).ok()?;
    let meta = params.meta.take();
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = meta {
        request.extensions.insert(meta);
    }
    Some(ClientJsonRpcMessage::Request(JsonRpcRequest::new(id, ClientRequest::CallToolRequest(request))))
}

/// What a request rmcp decoded as a custom one stands for when its method
/// is one rmcp types (its params did not fit): the request with the
/// reference's defaults filled in, or the error [`inspect`] answers. `None`
/// for a method rmcp does not type. For transports that let rmcp decode
/// first (HTTP).
pub fn typed_fallback(method: &str, params: Option<&Value>) -> Option<Result<ClientRequest, (i64, String)>> {
    if !is_typed_method(method) {
        return None;
    }
    let mut message = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": method});
    if let Some(params) = params {
        message["params"] = params.clone();
    }
    let text = serde_json::to_string(&message).ok()?;
    Some(match inspect(text.as_bytes()) {
        Verdict::Forward { message, .. } => match *message {
            ClientJsonRpcMessage::Request(request) if !matches!(request.request, ClientRequest::CustomRequest(_)) => {
                Ok(request.request)
            }
            _ => Err((
                INVALID_PARAMS,
                format!("invalid params for {}: they do not have the method's shape", quote(method)),
            )),
        },
        Verdict::Answer(frame) => {
            let v: Value = serde_json::from_str(&frame).unwrap_or_default();
            Err((
                v["error"]["code"].as_i64().unwrap_or(INVALID_PARAMS),
                v["error"]["message"].as_str().unwrap_or_default().to_owned(),
            ))
        }
        Verdict::Ignore => return None,
    })
}

/// Fields rmcp requires that the reference does not: an `initialize`
/// without a `protocolVersion` (answered with the fallback version), a
/// `tools/call` without a `name` (answered "unknown tool").
fn with_lenient_defaults(method: &str, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
    let defaults = match method {
        "initialize" => {
            serde_json::json!({"protocolVersion": "", "capabilities": {}, "clientInfo": {"name": "", "version": ""}})
        }
        "tools/call" => serde_json::json!({"name": ""}),
        _ => return None,
    };
    let mut value = serde_json::to_value(&message).ok()?;
    let params = value.get_mut("params")?.as_object_mut()?;
    for (key, default) in defaults.as_object()? {
        params.entry(key.clone()).or_insert_with(|| default.clone());
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value).ok()? {
        ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CustomRequest(_)) => None,
        message => Some(message),
    }
}

/// Whether `text` is JSON that serde_json can hold as values (no lone
/// surrogates, no numbers beyond `f64`).
fn is_json(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok()
}

/// The answer to a message whose envelope cannot be read.
fn unreadable(text: &str, e: Option<serde_json::Error>) -> Verdict {
    let e = e.map(|e| e.to_string()).unwrap_or_else(|| "not a JSON object".into());
    let frame = match text.as_bytes().first() {
        Some(b'[') if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() => {
            error_frame(None, INVALID_REQUEST, "invalid request: batches are not supported")
        }
        // Valid JSON whose envelope a derived reader refuses: a duplicated key.
        Some(b'{') => match serde_json::from_str::<Map<String, Value>>(text) {
            Ok(map) => {
                let id = map
                    .get("id")
                    .filter(|id| id.is_string() || id.is_number())
                    .and_then(|id| serde_json::value::to_raw_value(id).ok());
                error_frame(id.as_deref(), INVALID_REQUEST, &format!("invalid request: {e}"))
            }
            Err(_) => error_frame(None, PARSE_ERROR, &format!("parse error: {e}")),
        },
        _ if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() => {
            error_frame(None, INVALID_REQUEST, "invalid request: a message must be a JSON object")
        }
        _ => error_frame(None, PARSE_ERROR, &format!("parse error: {e}")),
    };
    Verdict::Answer(frame)
}

/// Encodes an outgoing message; a response to a kept id gets the client's
/// original id text back.
pub fn encode(message: &ServerJsonRpcMessage, kept: impl FnOnce(&str) -> Option<Box<RawValue>>) -> String {
    let id = match message {
        ServerJsonRpcMessage::Response(r) => Some(&r.id),
        ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
        _ => None,
    };
    // Only a placeholder id needs the message as a value, to put the
    // client's text in its place: every other message is written straight.
    if !matches!(id, Some(NumberOrString::String(s)) if s.starts_with('\u{1}')) {
        return serde_json::to_string(message)
            .unwrap_or_else(|e| error_frame(None, -32603, &format!("internal error: {e}")));
    }
    match serde_json::to_value(message) {
        Ok(value) => restore_id(value, kept),
        Err(e) => error_frame(None, -32603, &format!("internal error: {e}")),
    }
}

/// Encodes a JSON-RPC message whose `id` may be a placeholder of
/// [`KeptId`]: `kept` maps the placeholder back to the client's id text.
pub fn restore_id(value: Value, kept: impl FnOnce(&str) -> Option<Box<RawValue>>) -> String {
    let original = value.get("id").and_then(Value::as_str).filter(|s| s.starts_with('\u{1}')).and_then(kept);
    match (original, value) {
        (Some(original), Value::Object(mut map)) => {
            map.remove("id");
            #[derive(Serialize)]
            struct WithId<'a> {
                id: &'a RawValue,
                #[serde(flatten)]
                rest: &'a Map<String, Value>,
            }
            serde_json::to_string(&WithId { id: &original, rest: &map }).unwrap_or_default()
        }
        (_, value) => serde_json::to_string(&value).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match inspect(line.as_bytes()) {
            Verdict::Answer(frame) => serde_json::from_str(&frame).unwrap(),
            other => panic!("{line}: expected an answer, got {other:?}"),
        }
    }

    fn code_and_id(line: &str) -> (i64, String) {
        let v = answer(line);
        (v["error"]["code"].as_i64().unwrap(), v["id"].to_string())
    }

    #[test]
    fn unreadable_messages_get_errors_with_their_ids() {
        assert_eq!(code_and_id("{not json"), (PARSE_ERROR, "null".into()));
        assert_eq!(code_and_id("[1,2]"), (INVALID_REQUEST, "null".into()));
        assert_eq!(code_and_id("7"), (INVALID_REQUEST, "null".into()));
        assert_eq!(code_and_id(r#"{"jsonrpc":"2.0","id":3,"id":4,"method":"ping"}"#), (INVALID_REQUEST, "4".into()));
        assert_eq!(code_and_id(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#), (INVALID_REQUEST, "3".into()));
        assert_eq!(code_and_id(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#), (INVALID_REQUEST, "null".into()));
        assert_eq!(code_and_id(r#"{"jsonrpc":"2.0","id":4,"method":5}"#), (INVALID_REQUEST, "4".into()));
        assert_eq!(code_and_id(r#"{"jsonrpc":"2.0","id":"x"}"#), (INVALID_REQUEST, "\"x\"".into()));
        // A lone surrogate or a number beyond f64 in the arguments: the id is still read.
        let surrogate = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search","arguments":{"query":"\ud800"}}}"#;
        assert_eq!(code_and_id(surrogate), (PARSE_ERROR, "9".into()));
        let huge = r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"search","arguments":{"query":"x","limit":1e400}}}"#;
        assert_eq!(code_and_id(huge), (PARSE_ERROR, "10".into()));
        let wrong = r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":5}}"#;
        assert_eq!(code_and_id(wrong), (INVALID_PARAMS, "11".into()));
    }

    #[test]
    fn non_utf8_bytes_are_answered_when_the_id_can_be_read() {
        let mut line = br#"{"jsonrpc":"2.0","id":12,"method":"ping","params":{"x":""#.to_vec();
        line.extend_from_slice(b"\xff\"}}");
        let Verdict::Answer(frame) = inspect(&line) else { panic!("expected an answer") };
        let v: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!((v["id"].as_i64(), v["error"]["code"].as_i64()), (Some(12), Some(PARSE_ERROR)));
        assert!(matches!(inspect(b"\xff\xfe"), Verdict::Answer(_) | Verdict::Ignore));
    }

    #[test]
    fn ids_rmcp_cannot_hold_come_back_as_written() {
        for id in ["123456789012345678901234567890", "1.5", "-0.25", "1e3", "18446744073709551616", "-0", "1e400"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let Verdict::Forward { message, kept: Some(kept), .. } = inspect(line.as_bytes()) else {
                panic!("{id}: expected a kept id")
            };
            assert_eq!(kept.original.get(), id);
            let ClientJsonRpcMessage::Request(request) = *message else { panic!("a request") };
            let reply = ServerJsonRpcMessage::response(
                rmcp::model::ServerResult::EmptyResult(rmcp::model::EmptyResult {}),
                request.id,
            );
            let encoded = encode(&reply, |p| (p == kept.placeholder).then(|| kept.original.clone()));
            assert!(encoded.contains(&format!("\"id\":{id}")), "{encoded}");
        }
        // Ordinary ids are passed through untouched.
        let Verdict::Forward { kept: None, .. } = inspect(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#) else {
            panic!("a native id")
        };
    }

    #[test]
    fn screening_reads_the_envelope_only() {
        // Params of the wrong shape pass the screen; the typed decoding refuses them.
        let wrong = br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":5}}"#;
        let screened = screen(wrong).expect("a readable envelope");
        assert_eq!(
            (screened.method.as_deref(), screened.readable_id.map(RawValue::get)),
            (Some("tools/call"), Some("11"))
        );
        assert_eq!(screened.forwarded(), std::str::from_utf8(wrong).unwrap());
        assert!(matches!(decode(screened), Verdict::Answer(_)));
        // A kept id is swapped in the forwarded text, nothing else of it changes.
        let screened = screen(br#" {"jsonrpc":"2.0","id":1.5,"method":"ping"} "#).unwrap();
        let kept = screened.kept.clone().expect("a kept id");
        assert_eq!(
            screened.forwarded(),
            format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, quote(&kept.placeholder))
        );
        assert!(matches!(screen(b"{nope"), Err(Verdict::Answer(_))));
    }

    #[test]
    fn typed_methods_rmcp_read_as_custom_get_the_framing_answer() {
        let Some(Ok(ClientRequest::CallToolRequest(call))) =
            typed_fallback("tools/call", Some(&serde_json::json!({"arguments": {}})))
        else {
            panic!("a tools/call with the default name")
        };
        assert_eq!(call.params.name, "");
        let Some(Err((code, message))) = typed_fallback("tools/list", Some(&serde_json::json!(5))) else {
            panic!("an error")
        };
        assert_eq!(code, INVALID_PARAMS, "{message}");
        assert!(typed_fallback("foo/bar", None).is_none());
    }

    /// Whether the fast path takes `text`; when it does, its message must be the one rmcp's
    /// decoding gives, down to the id, the params, the `_meta` in the extensions and the bytes
    /// it encodes back to.
    fn fast_path_matches_rmcp(text: &str) -> bool {
        use rmcp::model::RequestMetaObject;
        let Some(fast) = decode_tool_call(text) else { return false };
        let generic = serde_json::from_str::<ClientJsonRpcMessage>(text)
            .unwrap_or_else(|e| panic!("{text}: the fast path took a message rmcp refuses ({e})"));
        let (ClientJsonRpcMessage::Request(f), ClientJsonRpcMessage::Request(g)) = (&fast, &generic) else {
            panic!("{text}: rmcp decoded {generic:?}")
        };
        let (ClientRequest::CallToolRequest(fc), ClientRequest::CallToolRequest(gc)) = (&f.request, &g.request) else {
            panic!("{text}: rmcp decoded {generic:?}")
        };
        assert_eq!(f.id, g.id, "{text}");
        assert_eq!(fc.params, gc.params, "{text}");
        assert_eq!(fc.extensions.get::<RequestMetaObject>(), gc.extensions.get::<RequestMetaObject>(), "{text}");
        assert_eq!(fc.extensions.len(), gc.extensions.len(), "{text}");
        assert_eq!(serde_json::to_string(&fast).unwrap(), serde_json::to_string(&generic).unwrap(), "{text}");
        true
    }

    /// As [`fast_path_matches_rmcp`], for [`decode_without_params`]: the same message as rmcp's
    /// (the same request type and id, no extensions, the same bytes encoded back).
    fn no_params_path_matches_rmcp(text: &str) -> bool {
        let Some(fast) = decode_without_params(text) else { return false };
        let generic = serde_json::from_str::<ClientJsonRpcMessage>(text)
            .unwrap_or_else(|e| panic!("{text}: the fast path took a message rmcp refuses ({e})"));
        let (ClientJsonRpcMessage::Request(f), ClientJsonRpcMessage::Request(g)) = (&fast, &generic) else {
            panic!("{text}: rmcp decoded {generic:?}")
        };
        assert_eq!(f.id, g.id, "{text}");
        match (&f.request, &g.request) {
            (ClientRequest::PingRequest(fp), ClientRequest::PingRequest(gp)) => {
                assert_eq!((fp.extensions.len(), gp.extensions.len()), (0, 0), "{text}");
            }
            (ClientRequest::ListToolsRequest(fl), ClientRequest::ListToolsRequest(gl)) => {
                assert_eq!((fl.params.is_none(), gl.params.is_none()), (true, true), "{text}");
                assert_eq!((fl.extensions.len(), gl.extensions.len()), (0, 0), "{text}");
            }
            _ => panic!("{text}: decoded {fast:?}, rmcp decoded {generic:?}"),
        }
        assert_eq!(format!("{fast:?}"), format!("{generic:?}"), "{text}");
        assert_eq!(serde_json::to_string(&fast).unwrap(), serde_json::to_string(&generic).unwrap(), "{text}");
        true
    }

    /// The `ping` and `tools/list` requests the fast path must take, in the shapes clients send.
    fn no_params_seeds() -> Vec<String> {
        let mut out = Vec::new();
        for method in ["ping", "tools/list"] {
            for id in ["1", "0", "-7", "9223372036854775807", r#""a""#, r#""""#, r#""\u00e9\"x""#] {
                out.push(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#));
            }
            out.push(format!(r#"  {{"method":"{method}","id":"k","jsonrpc":"2.0"}}  "#));
            out.push(format!("{{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : 4 , \"method\" : \"{method}\" }}"));
        }
        out
    }

    #[test]
    fn the_ping_and_tool_list_fast_path_decodes_what_rmcp_decodes() {
        for text in no_params_seeds() {
            assert!(no_params_path_matches_rmcp(&text), "{text}: expected the fast path to take it");
        }
        // Left to rmcp: params of any kind, other methods, anything said in an unusual way.
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        ] {
            assert!(decode_without_params(text).is_none(), "{text}: expected rmcp's decoding");
        }
    }

    fn tool_call(id: &str, params: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
    }

    /// The tool calls the fast path must take, in the shapes clients send.
    fn fast_path_seeds() -> Vec<String> {
        let mut out = Vec::new();
        for id in ["1", "0", "-7", "9223372036854775807", "-9223372036854775808", r#""a""#, r#""""#, r#""\u00e9\"x""#] {
            out.push(tool_call(id, r#"{"name":"search","arguments":{"query":"retry with backoff","limit":3}}"#));
        }
        for params in [
            r#"{"name":"search"}"#,
            r#"{"name":"search","arguments":{}}"#,
            r#"{"name":"search","arguments":null}"#,
            r#"{"arguments":{"query":"x"},"name":"search"}"#,
            r#"{"name":"search","arguments":{"query":"\u00e9\ud83d\ude00 \"q\" \\ \n","limit":1.5,"path":"docs/*"}}"#,
            r#"{"name":"search","arguments":{"n":[1,-1,0,-0,1e3,1.25e-7,18446744073709551615,-9223372036854775808]}}"#,
            r#"{"name":"search","arguments":{"query":"a","query":"b","z":{"y":[true,false,null,{"x":"y"}]}}}"#,
            r#"{"name":"nope","arguments":{"x":1}}"#,
            r#"{"_meta":{"progressToken":5},"name":"search","arguments":{"query":"x"}}"#,
            r#"{"name":"search","arguments":{"query":"x"},"_meta":{"progressToken":"t","x":{"y":[1,2]}}}"#,
            r#"{"name":"search","_meta":null}"#,
            r#"{"name":"search","_meta":{}}"#,
            r#"{"name":"search","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}"#,
        ] {
            out.push(tool_call("3", params));
        }
        out.push(r#"  {"params":{"name":"search"},"id":"k","method":"tools/call","jsonrpc":"2.0"}  "#.to_string());
        out.push("{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : 4 , \"method\" : \"tools/call\" , \"params\" : { \"name\" : \"search\" } }".into());
        out
    }

    #[test]
    fn the_tool_call_fast_path_decodes_what_rmcp_decodes() {
        for text in fast_path_seeds() {
            assert!(fast_path_matches_rmcp(&text), "{text}: expected the fast path to take it");
        }
        // Left to rmcp: anything else, or anything said in an unusual way.
        for text in [
            tool_call("1.5", r#"{"name":"search"}"#),
            tool_call("123456789012345678901234567890", r#"{"name":"search"}"#),
            tool_call("-0", r#"{"name":"search"}"#),
            tool_call("null", r#"{"name":"search"}"#),
            tool_call("true", r#"{"name":"search"}"#),
            tool_call("1", r#"[{"name":"search"}]"#),
            tool_call("1", r#"["search",{}]"#),
            tool_call("1", "null"),
            tool_call("1", r#"{"arguments":{}}"#),
            tool_call("1", r#"{"name":5}"#),
            tool_call("1", r#"{"name":"search","name":"search"}"#),
            tool_call("1", r#"{"name":"search","arguments":{"query":"\ud800"}}"#),
            tool_call("1", r#"{"name":"search","arguments":{"limit":1e400}}"#),
            tool_call("1", r#"{"name":"search","arguments":5}"#),
            tool_call("1", r#"{"name":"search","requestState":"s"}"#),
            tool_call("1", r#"{"name":"search","x":1e400}"#),
            tool_call("1", r#"{"n\u0061me":"search"}"#),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"search"}}"#.into(),
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"search"}}"#.into(),
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"},"x":1}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"},"result":{}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","p\u0061rams":{"name":"search"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"search"}}"#.into(),
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"}}]"#.into(),
        ] {
            assert!(decode_tool_call(&text).is_none(), "{text}: expected rmcp's decoding");
        }
    }

    /// The fuzz suite's mutations (hostile values, bytes flipped, inserted and cut, keys renamed,
    /// dropped and duplicated) of `seeds`, 20,000 of them, each passed to `check` when it is
    /// UTF-8: how many were, and how many `check` said yes to.
    fn mutations(seeds: &[String], mut check: impl FnMut(&str) -> bool) -> (usize, usize) {
        const HOSTILE: [&str; 16] = [
            "123456789012345678901234567890",
            "18446744073709551616",
            "-9223372036854775809",
            "1.5",
            "-0",
            "1e400",
            "null",
            "true",
            "[]",
            "{}",
            r#""\ud800""#,
            r#""a\u0000b""#,
            r#""2.0""#,
            r#""tools/call""#,
            r#"{"progressToken":1}"#,
            "7",
        ];
        const KEYS: [&str; 8] = [
            r#""jsonrpc""#,
            r#""id""#,
            r#""method""#,
            r#""params""#,
            r#""arguments""#,
            r#""name""#,
            r#""_meta""#,
            r#""query""#,
        ];
        let mut state = 0x5eed_2026_0010_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        };
        let (mut taken, mut tried) = (0, 0);
        for _ in 0..20_000 {
            let mut bytes = seeds[next(seeds.len())].clone().into_bytes();
            for _ in 0..1 + next(3) {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                bytes = match next(4) {
                    0 => {
                        let colons: Vec<usize> = text.match_indices(':').map(|(i, _)| i).collect();
                        let Some(&at) = colons.get(next(colons.len())) else { continue };
                        let rest = &text[at + 1..];
                        let end = rest.find([',', '}']).unwrap_or(rest.len());
                        format!("{}{}{}", &text[..at + 1], HOSTILE[next(HOSTILE.len())], &rest[end..]).into_bytes()
                    }
                    1 => {
                        let at = next(bytes.len());
                        match next(3) {
                            0 => bytes[at] ^= 1 << next(8),
                            1 => bytes.insert(at, b"{}[]\",:0-9a\\ "[next(13)]),
                            _ => {
                                bytes.remove(at);
                            }
                        }
                        bytes
                    }
                    2 => {
                        let key = KEYS[next(KEYS.len())];
                        match next(3) {
                            0 => text.replacen(key, r#""x""#, 1),
                            1 => text.replacen(&format!("{key}:"), r#""dropped":"#, 1),
                            _ => text.replacen('{', &format!("{{{key}:{},", HOSTILE[next(HOSTILE.len())]), 1),
                        }
                        .into_bytes()
                    }
                    _ => text
                        .replacen(r#""search""#, r#""se\u0061rch""#, 1)
                        .replacen(r#""ping""#, r#""p\u0069ng""#, 1)
                        .into_bytes(),
                };
                if bytes.is_empty() {
                    break;
                }
            }
            let Ok(text) = std::str::from_utf8(&bytes) else { continue };
            tried += 1;
            taken += usize::from(check(text));
        }
        (tried, taken)
    }

    /// Whatever the fast path takes of mutated tool calls, rmcp decodes alike.
    #[test]
    fn mutated_tool_calls_decode_alike_on_both_paths() {
        let (tried, taken) = mutations(&fast_path_seeds(), fast_path_matches_rmcp);
        // The mutations leave many calls the fast path still takes, and many it leaves to rmcp.
        assert!(taken > 2_000 && tried - taken > 2_000, "taken {taken} of {tried}");
    }

    /// Whatever the fast path takes of mutated `ping` and `tools/list` requests, rmcp decodes alike.
    #[test]
    fn mutated_pings_and_tool_lists_decode_alike_on_both_paths() {
        let (tried, taken) = mutations(&no_params_seeds(), no_params_path_matches_rmcp);
        assert!(taken > 1_000 && tried - taken > 1_000, "taken {taken} of {tried}");
    }

    #[test]
    fn notifications_that_cannot_be_read_are_ignored() {
        assert!(matches!(
            inspect(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#),
            Verdict::Ignore
        ));
        assert!(matches!(inspect(b"   "), Verdict::Ignore));
    }
}
