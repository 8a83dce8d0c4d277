//! The daemon's connections: its own accept loop, because `axum::serve` sets neither a
//! header-read timeout nor a connection cap (idle half-open connections then starve real
//! clients), and its graceful shutdown waits for every client however slow.
//!
//! - At most [`Limits::max_connections`] at once; one more is answered `503` at once and
//!   closed, so a flood of idle sockets costs the daemon no threads and no memory.
//! - A client has [`Limits::header_timeout`] to send a request's headers, on a new connection
//!   and between keep-alive requests alike; the body and the answer are bounded by the
//!   router's request deadline.
//! - After the shutdown signal, open requests get [`Limits::grace`] to finish; then the daemon
//!   exits anyway.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// What one daemon lets its clients hold (the defaults are `serve`'s flags).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub grace: Duration,
}

/// The answer to a connection over the cap, written straight to the socket.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 71\r\n\r\n{\"error\":\"too many open connections to skillsearch; try again shortly\"}";

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then lets open
/// requests finish for at most `limits.grace`.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted: the
                    // listener itself is fine; wait a little rather than spin.
                    tracing::warn!(target: "serve", error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(target: "serve", %peer, limit = limits.max_connections, "over the connection cap; answered 503");
            let _ = tcp.try_write(BUSY);
            continue;
        };
        // The peer's address, for handlers that take `ConnectInfo` (the hub's rate limits).
        let service = TowerToHyperService::new(
            router
                .clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
        );
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(tcp), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(target: "serve", %peer, error = %e, "connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.grace) => {
            tracing::warn!(target: "serve", grace_ms = limits.grace.as_millis() as u64, "requests still open after the shutdown grace; exiting anyway");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BUSY;

    #[test]
    fn the_busy_answer_is_well_formed_http() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
