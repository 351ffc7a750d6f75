//! stdio: newline-delimited JSON-RPC on stdin/stdout, served by rmcp.
//!
//! rmcp's own stdio transport decodes each line straight into typed
//! messages, so a line it cannot decode is lost without an answer, and a
//! line that is not UTF-8 ends the session. This transport frames the lines
//! itself and passes each through [`frame::inspect`] first; rmcp then runs
//! the session (handshake, concurrent calls, cancellation) on the messages
//! that pass. Only protocol frames are written to stdout. End of input is a
//! clean exit once every forwarded request has been answered.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::ServiceExt as _;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};

use crate::frame::{self, PARSE_ERROR, Verdict};
use crate::search::quote;
use crate::server::McpServer;

/// The longest line read into memory. Every argument cap is far below it
/// (a 4 MiB query, escaped); a longer line is skipped as it streams by and
/// answered with a parse error, so one line cannot exhaust memory.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// One line of input: its bytes, or that it was over the cap.
enum Line {
    Bytes(Vec<u8>),
    TooLong,
}

/// Reads up to the next `\n`, keeping at most `max` bytes; `None` at end of
/// input.
async fn next_line<R: AsyncBufRead + Unpin>(input: &mut R, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut over = false;
    let mut seen = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        seen = true;
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !over && line.len() + chunk.len() > max {
            over = true;
            line = Vec::new();
        }
        if !over {
            line.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(buf.len());
        input.consume(used);
        if done.is_some() {
            break;
        }
    }
    if !seen {
        return Ok(None);
    }
    Ok(Some(if over { Line::TooLong } else { Line::Bytes(line) }))
}

/// What the writer writes: rmcp's messages, and the answers given here.
enum Out {
    Rpc(Box<ServerJsonRpcMessage>),
    Raw(String),
}

/// State shared by the reader and the writer.
#[derive(Default)]
struct Session {
    /// Placeholder → the client's id text, for ids rmcp cannot hold.
    kept: Mutex<HashMap<String, Box<RawValue>>>,
    /// Requests handed to rmcp and not answered yet (ids as JSON text).
    pending: Mutex<HashSet<String>>,
    answered: Notify,
}

impl Session {
    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn settle(&self, key: &str) {
        let mut pending = Self::lock(&self.pending);
        if pending.remove(key) && pending.is_empty() {
            self.answered.notify_waiters();
        }
    }

    async fn all_answered(&self) {
        loop {
            let notified = self.answered.notified();
            if Self::lock(&self.pending).is_empty() {
                return;
            }
            notified.await;
        }
    }
}

/// rmcp's side of the pipe: messages that passed the check in, its
/// messages out to the writer.
struct Framed {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    out: mpsc::UnboundedSender<Out>,
}

impl Transport<RoleServer> for Framed {
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent =
            self.out.send(Out::Rpc(Box::new(item))).map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        std::future::ready(sent)
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// The reference's session rules, which rmcp enforces differently (it ends
/// a session whose first message is not `initialize`): one `initialize`,
/// and before it only `ping`.
#[derive(Default)]
struct Gate {
    initialize_seen: bool,
}

impl Gate {
    /// `Err` is the message of a code-0 error answering the request; `Ok(false)`
    /// drops a notification or response that rmcp cannot take yet.
    fn admit(&mut self, message: &ClientJsonRpcMessage) -> Result<bool, String> {
        match message {
            ClientJsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::InitializeRequest(_) if self.initialize_seen => {
                    Err("duplicate \"initialize\" received".into())
                }
                ClientRequest::InitializeRequest(_) => {
                    self.initialize_seen = true;
                    Ok(true)
                }
                ClientRequest::PingRequest(_) => Ok(true),
                other if !self.initialize_seen => {
                    Err(format!("method {} is invalid during session initialization", quote(other.method())))
                }
                _ => Ok(true),
            },
            _ => Ok(self.initialize_seen),
        }
    }
}

/// Serves one session over the process's stdin and stdout.
pub async fn serve(server: McpServer) -> std::io::Result<()> {
    serve_io(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves one session over any byte streams.
pub async fn serve_io<R, W>(server: McpServer, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let session = Arc::new(Session::default());
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Out>();
    let writer_session = session.clone();
    let writer = tokio::spawn(async move {
        while let Some(out) = out_rx.recv().await {
            let (line, key) = match out {
                Out::Raw(line) => (line, None),
                Out::Rpc(message) => {
                    let line =
                        frame::encode(&message, |placeholder| Session::lock(&writer_session.kept).remove(placeholder));
                    (line, answered_id(&message))
                }
            };
            output.write_all(line.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
            if let Some(key) = key {
                writer_session.settle(&key);
            }
        }
        Ok::<(), std::io::Error>(())
    });

    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let transport = Framed { incoming: in_rx, out: out_tx.clone() };
    let rmcp_session = tokio::spawn(async move {
        match server.serve(transport).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!(error = %e, "MCP session ended before initialization"),
        }
    });

    let mut gate = Gate::default();
    let mut input = BufReader::new(input);
    while let Some(line) = next_line(&mut input, MAX_FRAME_BYTES).await? {
        let bytes = match line {
            Line::Bytes(bytes) => bytes,
            Line::TooLong => {
                let message = format!("request too large: a frame may be at most {MAX_FRAME_BYTES} bytes");
                let _ = out_tx.send(Out::Raw(frame::error_frame(None, PARSE_ERROR, &message)));
                continue;
            }
        };
        let (message, id, kept) = match frame::inspect(&bytes) {
            Verdict::Ignore => continue,
            Verdict::Answer(frame) => {
                let _ = out_tx.send(Out::Raw(frame));
                continue;
            }
            Verdict::Forward { message, id, kept, .. } => (*message, id, kept),
        };
        match gate.admit(&message) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(text) => {
                let _ = out_tx.send(Out::Raw(frame::error_frame(id.as_deref(), 0, &text)));
                continue;
            }
        }
        match &message {
            ClientJsonRpcMessage::Request(request) => {
                Session::lock(&session.pending).insert(serde_json::to_string(&request.id).unwrap_or_default());
            }
            ClientJsonRpcMessage::Notification(n) => {
                // A cancelled request is not answered: stop waiting for it.
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    session.settle(&serde_json::to_string(&c.params.request_id).unwrap_or_default());
                }
            }
            _ => {}
        }
        if let Some(kept) = kept {
            Session::lock(&session.kept).insert(kept.placeholder, kept.original);
        }
        if in_tx.send(message).await.is_err() {
            // The session ended (it cannot without an rmcp fault); say so
            // rather than leave the request unanswered.
            if let Some(id) = &id {
                let frame = frame::error_frame(Some(id), -32603, "internal error: the MCP session has ended");
                let _ = out_tx.send(Out::Raw(frame));
            }
        }
    }
    session.all_answered().await;
    drop(in_tx);
    drop(out_tx);
    let _ = rmcp_session.await;
    writer.await.map_err(std::io::Error::other)?
}

/// The id (as JSON text) that an outgoing response or error answers.
fn answered_id(message: &ServerJsonRpcMessage) -> Option<String> {
    let id = match message {
        ServerJsonRpcMessage::Response(r) => &r.id,
        ServerJsonRpcMessage::Error(e) => e.id.as_ref()?,
        _ => return None,
    };
    serde_json::to_string(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = next_line(&mut reader, max).await.unwrap() {
            out.push(match line {
                Line::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                Line::TooLong => "<too long>".into(),
            });
        }
        out
    }

    /// Issue 12: a line over the cap is skipped, not buffered, and the next one is read.
    #[tokio::test]
    async fn issue12_frames_are_bounded() {
        assert_eq!(lines(b"ab\r\ncdefghij\nk\nlast", 5).await, ["ab\r", "<too long>", "k", "last"]);
        assert_eq!(lines(b"abcde\n", 5).await, ["abcde"]);
        assert!(lines(b"", 5).await.is_empty());
    }
}
