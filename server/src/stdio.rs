//! stdio transport: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Only protocol frames are written to stdout. Calls run concurrently so a
//! slow search does not hold up a `ping`; replies are written whole, one per
//! line, in completion order. End of input is a clean exit once in-flight
//! calls have answered.

use std::sync::Arc;

use rr_core::CallContext;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::protocol::{self, INVALID_REQUEST, McpService, Message, Session};

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
    let mut lines = BufReader::new(input).lines();
    let mut calls = tokio::task::JoinSet::new();
    while let Some(line) = lines.next_line().await? {
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
