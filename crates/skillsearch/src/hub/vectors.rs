//! `GET /openapi/v1/vectors?model=&dim=&after=&limit=`: the hub's embedder id, its dimension
//! and, a page at a time, the vectors of the skills it serves, by text key (the hash of the text
//! embedded, [`skillsearch_core::corpus::text_hash`]): a client with the same embedder keeps them
//! instead of embedding the catalogue itself (`hub serve --vectors-from`,
//! [`skillsearch_core::PeerVectors`]).
//!
//! Answer: `{model, dim, total, complete, items: [{key, id, vector}], next}`: `key` 16 hex
//! digits, `id` a skill with that text, `vector` the `dim` f32 values little-endian in base64;
//! `total` the distinct skill texts served, `complete` whether each has its vector yet (skills
//! still being embedded are left out); `next` the `after` of the next page, `null` on the last.
//! `limit` 1–2000 (default 500). Read scope and the read rate limit, like discover.
//!
//! A client naming another `model` or `dim` gets 409 (60010) saying which model the hub has;
//! a hub without a sentence model 404 (60001), one still loading it 503 (60011).

use super::{App, Bucket, Fail, guarded};
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use serde_json::{Value, json};
use skillsearch_core::registry::store::Scope;
use std::net::SocketAddr;
use std::sync::Arc;

/// Vectors per page unless `limit` says otherwise, and the most a page holds.
const DEFAULT_LIMIT: usize = 500;
const MAX_LIMIT: usize = 2_000;

pub(super) async fn h_vectors(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = super::query_map(raw.as_deref());
    guarded(app, &headers, peer, Bucket::Read, Scope::Read, move |app| {
        page(app, &q)
    })
    .await
}

fn page(app: &App, q: &std::collections::HashMap<String, String>) -> Result<Value, Fail> {
    let limit = super::int_param(q, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    let after = match super::param(q, "after") {
        None => None,
        Some(a) => Some(u64::from_str_radix(a, 16).map_err(|_| {
            Fail::bad(format!(
                "`after` must be a key of 16 hex digits (a page's `next`), not `{a}`"
            ))
        })?),
    };
    let want_dim = match super::param(q, "dim") {
        None => None,
        Some(d) => Some(
            d.parse::<usize>()
                .map_err(|_| Fail::bad(format!("`dim` must be a whole number, not `{d}`")))?,
        ),
    };
    let Some(sem) = app.engine.semantic().get() else {
        return Err(match (app.lexical, app.engine.semantic().off()) {
            (false, None) => Fail {
                http: StatusCode::SERVICE_UNAVAILABLE,
                code: 60011,
                message: "this hub's sentence model is still loading; retry shortly".into(),
                retry_after: Some(5),
            },
            (_, why) => Fail::not_found(format!(
                "this hub has no sentence model, so it serves no vectors ({})",
                why.unwrap_or_else(|| "its retrieval is lexical".into())
            )),
        });
    };
    let (model, dim) = (sem.model().to_owned(), sem.dim());
    let want_model = super::param(q, "model");
    if want_model.is_some_and(|m| m != model) || want_dim.is_some_and(|d| d != dim) {
        return Err(Fail {
            http: StatusCode::CONFLICT,
            code: 60010,
            message: format!(
                "this hub's vectors are from `{model}` (dimension {dim}), not `{}` (dimension {}); embed with your own model",
                want_model.unwrap_or(&model),
                want_dim.unwrap_or(dim)
            ),
            retry_after: None,
        });
    }
    let p = sem
        .vectors_page(&app.current.get(), after, limit)
        .map_err(Fail::internal)?;
    let items: Vec<Value> = p
        .items
        .iter()
        .map(|(key, id, v)| {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            json!({
                "key": format!("{key:016x}"),
                "id": id,
                "vector": base64::engine::general_purpose::STANDARD.encode(bytes),
            })
        })
        .collect();
    Ok(json!({
        "model": model,
        "dim": dim,
        "total": p.total,
        "complete": p.complete,
        "items": items,
        "next": p.next.map(|n| format!("{n:016x}")),
    }))
}
