//! stdio: newline-delimited JSON-RPC on stdin/stdout, served by rmcp.
//!
//! rmcp's own stdio transport decodes each line straight into typed
//! messages, so a line it cannot decode is lost without an answer, and a
//! line that is not UTF-8 ends the session. This transport frames the lines
//! itself and passes each through [`frame::inspect`] first; rmcp then runs
//! the session (handshake, concurrent calls, cancellation) on the messages
//! that pass. Only protocol frames are written to stdout. End of input is a
//! clean exit once every forwarded request has been answered.
//!
//! The process's stdin and stdout are read and written by a thread each,
//! not through tokio's `stdin()` and `stdout()`: those run every read, every
//! write and every flush as a task of the blocking pool, so one answer
//! (line, newline, flush) cost three hand-offs to a pool thread and back,
//! each a futex wake-up and a context switch, more CPU than the framing
//! itself. The writer thread also writes the answers that are ready
//! together in one `write`.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write as _};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::ServiceExt as _;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::frame::{self, PARSE_ERROR, Verdict};
use crate::search::quote;
use crate::server::McpServer;

/// The longest line read into memory. Every argument cap is far below it
/// (a 4 MiB query, escaped); a longer line is skipped as it streams by and
/// answered with a parse error, so one line cannot exhaust memory.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// Lines read ahead of the session, at most (each up to [`MAX_FRAME_BYTES`]).
const READ_AHEAD_LINES: usize = 4;

/// Answers written in one `write`, up to about this many bytes.
const WRITE_BATCH_BYTES: usize = 1 << 20;

/// One line of input: its bytes, or that it was over the cap.
enum Line {
    Bytes(Vec<u8>),
    TooLong,
}

/// A line being assembled from the chunks a reader hands out.
#[derive(Default)]
struct PartialLine {
    bytes: Vec<u8>,
    over: bool,
    seen: bool,
}

impl PartialLine {
    /// Takes `chunk` up to and including its first `\n`, keeping at most
    /// `max` bytes of the line: how many bytes were used, and whether the
    /// line is complete.
    fn take(&mut self, chunk: &[u8], max: usize) -> (usize, bool) {
        self.seen = true;
        let (part, end) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !self.over && self.bytes.len() + part.len() > max {
            self.over = true;
            self.bytes = Vec::new();
        }
        if !self.over {
            self.bytes.extend_from_slice(part);
        }
        (end.unwrap_or(chunk.len()), end.is_some())
    }

    /// The line, `None` when nothing came before the end of input.
    fn finish(self) -> Option<Line> {
        self.seen.then_some(if self.over { Line::TooLong } else { Line::Bytes(self.bytes) })
    }
}

/// Reads up to the next `\n`, keeping at most `max` bytes; `None` at end of
/// input.
async fn next_line<R: AsyncBufRead + Unpin>(input: &mut R, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = PartialLine::default();
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            break;
        }
        let (used, complete) = line.take(chunk, max);
        input.consume(used);
        if complete {
            break;
        }
    }
    Ok(line.finish())
}

/// [`next_line`] on a blocking reader.
fn next_line_blocking<R: BufRead>(input: &mut R, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = PartialLine::default();
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let (used, complete) = line.take(chunk, max);
        input.consume(used);
        if complete {
            break;
        }
    }
    Ok(line.finish())
}

/// A frame ready to write (newline included), and the request it answers
/// (its id as JSON text).
struct Outgoing {
    bytes: Vec<u8>,
    answers: Option<String>,
}

impl Outgoing {
    fn raw(mut line: String) -> Self {
        line.push('\n');
        Outgoing { bytes: line.into_bytes(), answers: None }
    }
}

/// State shared by the reader, rmcp's transport and the writer.
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

    /// Output is gone: nothing pending can be answered any more.
    fn abandon(&self) {
        Self::lock(&self.pending).clear();
        self.answered.notify_waiters();
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

    /// The frame of one of rmcp's messages; a kept id gets the client's
    /// original text back.
    fn encode(&self, message: &ServerJsonRpcMessage) -> Outgoing {
        let mut line = frame::encode(message, |placeholder| Self::lock(&self.kept).remove(placeholder));
        line.push('\n');
        Outgoing { bytes: line.into_bytes(), answers: answered_id(message) }
    }
}

/// rmcp's side of the pipe: messages that passed the check in, its
/// messages out to the writer, encoded on the way.
struct Framed {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    out: mpsc::UnboundedSender<Outgoing>,
    session: Arc<Session>,
}

impl Transport<RoleServer> for Framed {
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent =
            self.out.send(self.session.encode(&item)).map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe));
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
    /// `Err` is the message of an invalid-request error answering the request; `Ok(false)`
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

/// The lines of the input, as they are read.
type Lines = mpsc::Receiver<std::io::Result<Line>>;
/// What the writer reports when it is done.
type Written = oneshot::Receiver<std::io::Result<()>>;

/// Serves one session over the process's stdin and stdout.
pub async fn serve(server: McpServer) -> std::io::Result<()> {
    let session = Arc::new(Session::default());
    let (lines_tx, lines) = mpsc::channel(READ_AHEAD_LINES);
    std::thread::Builder::new().name("mcp-stdin".into()).spawn(move || {
        let mut input = std::io::stdin().lock();
        loop {
            let Some(line) = next_line_blocking(&mut input, MAX_FRAME_BYTES).transpose() else { return };
            let last = line.is_err();
            if lines_tx.blocking_send(line).is_err() || last {
                return;
            }
        }
    })?;
    let (out, mut outgoing) = mpsc::unbounded_channel::<Outgoing>();
    let (written_tx, written) = oneshot::channel();
    let writer_session = session.clone();
    std::thread::Builder::new().name("mcp-stdout".into()).spawn(move || {
        let result = (|| {
            let stdout = std::io::stdout();
            let mut batch = Vec::new();
            while let Some(first) = outgoing.blocking_recv() {
                let mut keys = vec![first.answers];
                batch.clear();
                batch.extend_from_slice(&first.bytes);
                while batch.len() < WRITE_BATCH_BYTES {
                    let Ok(next) = outgoing.try_recv() else { break };
                    batch.extend_from_slice(&next.bytes);
                    keys.push(next.answers);
                }
                let mut locked = stdout.lock();
                locked.write_all(&batch)?;
                locked.flush()?;
                drop(locked);
                for key in keys.iter().flatten() {
                    writer_session.settle(key);
                }
            }
            Ok(())
        })();
        if result.is_err() {
            writer_session.abandon();
        }
        let _ = written_tx.send(result);
    })?;
    run(server, session, lines, out, written).await
}

/// Serves one session over any byte streams.
pub async fn serve_io<R, W>(server: McpServer, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let session = Arc::new(Session::default());
    let (lines_tx, lines) = mpsc::channel(READ_AHEAD_LINES);
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        loop {
            let Some(line) = next_line(&mut input, MAX_FRAME_BYTES).await.transpose() else { return };
            let last = line.is_err();
            if lines_tx.send(line).await.is_err() || last {
                return;
            }
        }
    });
    let (out, mut outgoing) = mpsc::unbounded_channel::<Outgoing>();
    let (written_tx, written) = oneshot::channel();
    let writer_session = session.clone();
    tokio::spawn(async move {
        let result = async {
            while let Some(frame) = outgoing.recv().await {
                output.write_all(&frame.bytes).await?;
                output.flush().await?;
                if let Some(key) = frame.answers {
                    writer_session.settle(&key);
                }
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            writer_session.abandon();
        }
        let _ = written_tx.send(result);
    });
    run(server, session, lines, out, written).await
}

/// The session over lines read and frames written elsewhere.
async fn run(
    server: McpServer,
    session: Arc<Session>,
    mut lines: Lines,
    out: mpsc::UnboundedSender<Outgoing>,
    written: Written,
) -> std::io::Result<()> {
    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let transport = Framed { incoming: in_rx, out: out.clone(), session: session.clone() };
    let rmcp_session = tokio::spawn(async move {
        match server.serve(transport).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!(error = %e, "MCP session ended before initialization"),
        }
    });

    let mut gate = Gate::default();
    let mut read_error = None;
    while let Some(line) = lines.recv().await {
        let bytes = match line {
            Ok(Line::Bytes(bytes)) => bytes,
            Ok(Line::TooLong) => {
                let message = format!("request too large: a frame may be at most {MAX_FRAME_BYTES} bytes");
                let _ = out.send(Outgoing::raw(frame::error_frame(None, PARSE_ERROR, &message)));
                continue;
            }
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        let (message, id, kept) = match frame::inspect(&bytes) {
            Verdict::Ignore => continue,
            Verdict::Answer(frame) => {
                let _ = out.send(Outgoing::raw(frame));
                continue;
            }
            Verdict::Forward { message, id, kept, .. } => (*message, id, kept),
        };
        match gate.admit(&message) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(text) => {
                let _ = out.send(Outgoing::raw(frame::error_frame(id.as_deref(), frame::INVALID_REQUEST, &text)));
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
                let _ = out.send(Outgoing::raw(frame));
            }
        }
    }
    if read_error.is_none() {
        session.all_answered().await;
    }
    drop(in_tx);
    drop(out);
    let _ = rmcp_session.await;
    let written = written.await.unwrap_or_else(|_| Err(std::io::Error::other("the stdio writer stopped")));
    match read_error {
        Some(e) => Err(e),
        None => written,
    }
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

    fn lines_blocking(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = next_line_blocking(&mut reader, max).unwrap() {
            out.push(match line {
                Line::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                Line::TooLong => "<too long>".into(),
            });
        }
        out
    }

    /// A line over the cap is skipped, not buffered, and the next one is read, by the
    /// async reader and by the blocking one of the process's stdin alike.
    #[tokio::test]
    async fn frames_are_bounded() {
        let cases: [(&[u8], &[&str]); 3] =
            [(b"ab\r\ncdefghij\nk\nlast", &["ab\r", "<too long>", "k", "last"]), (b"abcde\n", &["abcde"]), (b"", &[])];
        for (input, expected) in cases {
            assert_eq!(lines(input, 5).await, expected);
            assert_eq!(lines_blocking(input, 5), expected);
        }
    }
}
