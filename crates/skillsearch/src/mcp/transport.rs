//! The stdio transport under rmcp. Each line is checked before the SDK sees it, so every bad
//! line gets an answer (the SDK's own stdio transport drops them silently) and the server keeps
//! serving:
//!
//! - a line over [`MAX_LINE_BYTES`] (the cap `serve --stdio` has) is read to its end and
//!   dropped, never held whole: -32600 `Invalid Request`, saying the line exceeded the cap;
//! - a line that is not JSON: -32700 `Parse error`;
//! - JSON that is no JSON-RPC message: -32600 `Invalid Request` (a notification, which must
//!   never be answered, is only logged);
//! - a request reusing the id of one still in flight: -32600, naming the id. The SDK keys its
//!   replies by id and would answer only one of the two; the first still gets its own answer.
//!
//! The errors carry a null id (JSON-RPC 2.0 §5: the id could not be read), except the
//! duplicate's, which carries the id it reused. They are written here, whole lines under the
//! same lock as the SDK's replies, so stdout stays JSON-RPC only.

use crate::lines::{MAX_LINE_BYTES, read_line_capped};
use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// JSON-RPC 2.0: the input is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0: the JSON is not a valid request.
const INVALID_REQUEST: i64 = -32600;

type Output = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;
/// Ids of the requests handed to the SDK and not yet answered.
type InFlight = Arc<Mutex<HashSet<RequestId>>>;

/// Newline-delimited JSON-RPC on a reader and a writer (stdin and stdout), checked line by line.
pub struct CheckedLines {
    /// Messages that passed the checks, from the reading task (a channel, so `receive` is
    /// cancel-safe: the SDK polls it inside a `select!`).
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    output: Output,
    in_flight: InFlight,
}

impl CheckedLines {
    /// Starts the reading task; call inside the runtime.
    pub fn new(
        input: impl AsyncRead + Send + Unpin + 'static,
        output: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Self {
        let (tx, incoming) = mpsc::channel(16);
        let output: Output = Arc::new(tokio::sync::Mutex::new(Box::new(output)));
        let in_flight = InFlight::default();
        tokio::spawn(read_lines(
            BufReader::new(input),
            tx,
            output.clone(),
            in_flight.clone(),
        ));
        CheckedLines {
            incoming,
            output,
            in_flight,
        }
    }
}

/// What one line turned out to be.
enum Line {
    /// Blank, or a notification the SDK would not understand: nothing to do.
    Skip,
    /// For the SDK.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Refused here, with this error.
    Refused(Value),
}

async fn read_lines(
    mut input: BufReader<impl AsyncRead + Unpin>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    output: Output,
    in_flight: InFlight,
) {
    loop {
        let line = match read_line_capped(&mut input, MAX_LINE_BYTES).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(target: "mcp", error = %e, "cannot read stdin; closing the connection");
                break;
            }
        };
        let checked = match line {
            Ok(bytes) => check(&bytes, &in_flight),
            Err(n) => {
                tracing::warn!(target: "mcp", bytes = n, cap = MAX_LINE_BYTES, "line over the cap skipped");
                Line::Refused(error(
                    Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "Invalid Request: the line exceeded {MAX_LINE_BYTES} bytes ({n} bytes); it was skipped"
                    ),
                    None,
                ))
            }
        };
        match checked {
            Line::Skip => {}
            Line::Message(m) => {
                if tx.send(*m).await.is_err() {
                    break;
                }
            }
            Line::Refused(reply) => {
                if let Err(e) = write_line(&output, &reply).await {
                    tracing::warn!(target: "mcp", error = %e, "cannot write to stdout; closing the connection");
                    break;
                }
            }
        }
    }
}

fn error(id: Value, code: i64, message: String, data: Option<String>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(data) = data {
        e["data"] = data.into();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

fn check(bytes: &[u8], in_flight: &Mutex<HashSet<RequestId>>) -> Line {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(target: "mcp", error = %e, "a line that is not JSON");
            return Line::Refused(error(
                Value::Null,
                PARSE_ERROR,
                "Parse error".into(),
                Some(e.to_string()),
            ));
        }
    };
    let message = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(bytes) {
        Ok(m) => m,
        Err(e) => {
            let method = value.get("method").and_then(Value::as_str);
            if let (None, Some(method)) = (value.get("id"), method) {
                tracing::debug!(target: "mcp", method, error = %e, "notification not understood; ignored");
                return Line::Skip;
            }
            tracing::warn!(target: "mcp", error = %e, "JSON that is no JSON-RPC message");
            let id = match value.get("id") {
                Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
                _ => Value::Null,
            };
            return Line::Refused(error(
                id,
                INVALID_REQUEST,
                "Invalid Request".into(),
                Some(e.to_string()),
            ));
        }
    };
    let mut ids = in_flight.lock().unwrap_or_else(|p| p.into_inner());
    match &message {
        JsonRpcMessage::Request(r) if !ids.insert(r.id.clone()) => {
            let id = r.id.clone().into_json_value();
            tracing::warn!(target: "mcp", %id, "request reuses the id of one in flight");
            Line::Refused(error(
                id.clone(),
                INVALID_REQUEST,
                format!(
                    "Invalid Request: id {id} is already in use by a request still in progress; send each request with a new id"
                ),
                None,
            ))
        }
        JsonRpcMessage::Notification(n) => {
            // A cancelled request is never answered: its id is free again.
            if let ClientNotification::CancelledNotification(c) = &n.notification
                && let Some(id) = &c.params.request_id
            {
                ids.remove(id);
            }
            Line::Message(Box::new(message))
        }
        _ => Line::Message(Box::new(message)),
    }
}

async fn write_line(output: &Output, v: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut w = output.lock().await;
    w.write_all(&line).await?;
    w.flush().await
}

impl Transport<RoleServer> for CheckedLines {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(&r.id),
            JsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            self.in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(id);
        }
        let output = self.output.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut w = output.lock().await;
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        self.output.lock().await.flush().await
    }
}
