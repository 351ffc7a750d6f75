//! stdio transport: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Only protocol frames are written to stdout. Calls run concurrently so a
//! slow search does not hold up a `ping`; replies are written whole, one per
//! line, in completion order. End of input is a clean exit once in-flight
//! calls have answered.

use std::sync::Arc;

use rr_core::CallContext;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::protocol::{self, INVALID_REQUEST, McpService, Message, PARSE_ERROR, Session};

/// The longest frame read into memory. Every argument cap is far below it
/// (a 4 MiB query, escaped); a longer line is skipped as it streams by and
/// answered with a parse error, so one line cannot exhaust memory.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// One line of input: its bytes, or how long it was when over the cap.
enum Frame {
    Line(String),
    TooLong,
    /// Not UTF-8: answered like any frame that is not JSON.
    NotUtf8,
}

/// Reads up to the next `\n`, keeping at most `max` bytes; `None` at end of
/// input.
async fn next_frame<R: AsyncBufRead + Unpin>(input: &mut R, max: usize) -> std::io::Result<Option<Frame>> {
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
    if over {
        return Ok(Some(Frame::TooLong));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(String::from_utf8(line).map_or(Frame::NotUtf8, Frame::Line)))
}

/// Serves one session over the process's stdin and stdout.
pub async fn serve(service: Arc<McpService>) -> std::io::Result<()> {
    serve_io(service, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves one session over any byte streams.
pub async fn serve_io<R, W>(service: Arc<McpService>, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            output.write_all(frame.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
        }
        Ok::<(), std::io::Error>(())
    });

    let mut session = Session::default();
    let mut input = BufReader::new(input);
    let mut calls = tokio::task::JoinSet::new();
    while let Some(frame) = next_frame(&mut input, MAX_FRAME_BYTES).await? {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong => {
                let _ = tx.send(protocol::error_frame(
                    None,
                    PARSE_ERROR,
                    &format!("request too large: a frame may be at most {MAX_FRAME_BYTES} bytes"),
                ));
                continue;
            }
            // Not JSON either: it gets the parse error below.
            Frame::NotUtf8 => String::from("\u{FFFD}"),
        };
        if line.trim().is_empty() {
            continue;
        }
        let message =
            serde_json::from_str::<Value>(&line).map_err(|_| ()).and_then(|v| protocol::decode(&v).map_err(|_| ()));
        let Ok(message) = message else {
            // A frame that is not JSON-RPC gets the standard parse error; the
            // session goes on so one bad line cannot take the client down.
            let _ = tx.send(
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse error\"}}".into(),
            );
            continue;
        };
        if let Err(e) = protocol::check_request(&message) {
            if let Message::Request { id, .. } = &message {
                let _ = tx.send(protocol::error_frame(Some(id), INVALID_REQUEST, &e));
            }
            continue;
        }
        let Message::Request { id, method, params } = message else {
            continue;
        };
        if method == "tools/call" && session.initialized {
            let service = service.clone();
            let tx = tx.clone();
            let mut call_session = session.clone();
            calls.spawn(async move {
                let reply = service
                    .handle_request(&mut call_session, &id, &method, params.as_ref(), &CallContext::default())
                    .await;
                let _ = tx.send(reply.frame);
            });
        } else {
            let reply =
                service.handle_request(&mut session, &id, &method, params.as_ref(), &CallContext::default()).await;
            let _ = tx.send(reply.frame);
        }
    }
    while calls.join_next().await.is_some() {}
    drop(tx);
    writer.await.map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(frame) = next_frame(&mut reader, max).await.unwrap() {
            out.push(match frame {
                Frame::Line(l) => l,
                Frame::TooLong => "<too long>".into(),
                Frame::NotUtf8 => "<not utf-8>".into(),
            });
        }
        out
    }

    /// Issue 12: a line over the cap is skipped, not buffered, and the next one is read.
    #[tokio::test]
    async fn issue12_frames_are_bounded() {
        assert_eq!(frames(b"ab\r\ncdefghij\nk\n\xff\nlast", 5).await, ["ab", "<too long>", "k", "<not utf-8>", "last"]);
        assert_eq!(frames(b"abcde\n", 5).await, ["abcde"]);
        assert!(frames(b"", 5).await.is_empty());
    }
}
