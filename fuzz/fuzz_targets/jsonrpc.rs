//! Newline-delimited JSON-RPC: the stdio line reader (`lines::read_line_capped`, shared by `mcp`
//! and `serve --stdio`) and the MCP server's checked transport (`mcp/transport.rs`).
//!
//! The first byte picks a line cap, the second the reader's buffer size (so lines straddle
//! reads); the rest is stdin. Properties:
//! - the reader returns exactly the input's lines, in order, a line over the cap as its length;
//! - every line the transport writes is one JSON-RPC error object (`-32700` or `-32600`, id
//!   null, a number or a string); each line that is not JSON gets exactly one `-32700`;
//! - every other non-blank line gets exactly one outcome (an error line, or a message handed to
//!   the server, which answers it), except a notification (an object with a `method` and no
//!   `id`), which gets at most one and never an error;
//! - no request reaches the server with the id of one still in flight (none is answered here,
//!   so every id stays in flight until a cancellation names it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientNotification, JsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use skillsearch::fuzzing::jsonrpc::{CheckedLines, read_line_capped};
use std::collections::HashSet;
use std::io::Cursor;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use tokio::io::BufReader;

/// A writer whose bytes the target reads afterwards.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl tokio::io::AsyncWrite for Shared {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.0.lock().unwrap().extend_from_slice(b);
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The input's lines: split at `\n`, the piece after a final `\n` (or of an empty input) is none.
fn lines(stream: &[u8]) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    if out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [cap, buffer, stream @ ..] = data else {
        return;
    };
    let cap = usize::from(*cap) * 3;
    let buffer = usize::from(*buffer % 64) + 1;
    let expected = lines(stream);
    // One runtime for the process: every task a run spawns ends with its input.
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    });
    rt.block_on(async {
        // The line reader, with a small cap and a small buffer.
        let mut r = BufReader::with_capacity(buffer, Cursor::new(stream));
        let mut got = Vec::new();
        while let Some(line) = read_line_capped(&mut r, cap).await.unwrap() {
            got.push(line);
        }
        let want: Vec<Result<Vec<u8>, usize>> = expected
            .iter()
            .map(|l| {
                if l.len() > cap {
                    Err(l.len())
                } else {
                    Ok(l.to_vec())
                }
            })
            .collect();
        assert_eq!(got, want, "cap {cap}, buffer {buffer}");

        // The transport (its cap, 1 MiB, is above any input here).
        let out = Shared::default();
        let mut t = CheckedLines::new(Cursor::new(stream.to_vec()), out.clone());
        let mut messages = Vec::new();
        while let Some(m) = t.receive().await {
            messages.push(m);
        }
        let written = out.0.lock().unwrap().clone();
        let mut parse_errors = 0;
        let mut errors = 0;
        for line in lines(&written) {
            let v: Value = serde_json::from_slice(line).expect("a reply line is JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            assert!(matches!(
                v["id"],
                Value::Null | Value::Number(_) | Value::String(_)
            ));
            assert!(v.get("result").is_none());
            let code = v["error"]["code"].as_i64().expect("an error code");
            assert!(v["error"]["message"].is_string());
            match code {
                -32700 => {
                    assert!(v["id"].is_null());
                    parse_errors += 1;
                }
                -32600 => {}
                other => panic!("unexpected code {other}"),
            }
            errors += 1;
        }
        assert_eq!(
            written.last().copied().unwrap_or(b'\n'),
            b'\n',
            "whole lines"
        );
        let (mut not_json, mut answerable, mut notifications) = (0, 0, 0);
        for line in &expected {
            let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(line) {
                Err(_) => not_json += 1,
                Ok(v) if v.get("id").is_none() && v.get("method").is_some_and(Value::is_string) => {
                    notifications += 1
                }
                Ok(_) => answerable += 1,
            }
        }
        assert_eq!(
            parse_errors, not_json,
            "one parse error per line that is not JSON"
        );
        let outcomes = errors + messages.len();
        assert!(
            outcomes >= not_json + answerable && outcomes <= not_json + answerable + notifications,
            "{outcomes} outcomes for {not_json} + {answerable} + {notifications} lines"
        );
        // Errors never answer notifications: one per answerable line at most.
        assert!(errors <= not_json + answerable);
        let mut in_flight = HashSet::new();
        for m in &messages {
            match m {
                JsonRpcMessage::Request(r) => {
                    assert!(
                        in_flight.insert(r.id.clone()),
                        "id {:?} reused in flight",
                        r.id
                    )
                }
                JsonRpcMessage::Notification(n) => {
                    if let ClientNotification::CancelledNotification(c) = &n.notification
                        && let Some(id) = &c.params.request_id
                    {
                        in_flight.remove(id);
                    }
                }
                _ => {}
            }
        }
        let _ = t.close().await;
    });
});
