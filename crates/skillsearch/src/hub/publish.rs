//! The hub's write routes, over its [`Store`](skillsearch_core::registry::store::Store): publish
//! a zip, list a skill's versions, yank one, delete a skill. Every write needs a token with the
//! publish scope and answers once the change is in the index, so the publisher's next search
//! finds it. A refused publish stores nothing and says why (60008); a version that exists with
//! other content is 60007.

use super::{App, Bucket, Fail, admit, answer, blocking_write, fail, guarded, request_id};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use skillsearch_core::registry::skill_uuid;
use skillsearch_core::registry::store::{
    MAX_PUBLISH_BYTES, Scope, StoreError, Version, valid_name,
};
use std::net::SocketAddr;
use std::sync::Arc;

fn store_fail(e: StoreError) -> Fail {
    let (http, code) = match &e {
        StoreError::Rejected(_) => (StatusCode::UNPROCESSABLE_ENTITY, 60008),
        StoreError::Conflict(_) => (StatusCode::CONFLICT, 60007),
        StoreError::NotFound(_) => (StatusCode::NOT_FOUND, 60001),
        StoreError::Io { .. } => return Fail::internal(format!("hub store: {e}")),
        StoreError::Full(why) => {
            tracing::error!(target: "hub", error = %why, "hub store out of disk space: writes are refused until space is freed");
            return Fail {
                http: StatusCode::INSUFFICIENT_STORAGE,
                code: 60012,
                message: "the hub's store is out of disk space: nothing was changed by this call; the hub's operator must free space (or grow the disk) before writes succeed again".into(),
                retry_after: Some(60),
            };
        }
        StoreError::Database(why) => {
            tracing::warn!(target: "hub", error = %why, "hub store unavailable");
            return Fail {
                http: StatusCode::SERVICE_UNAVAILABLE,
                code: 60009,
                message: "the hub's store cannot be reached; nothing was changed by this call unless a retry says it is already there; retry shortly".into(),
                retry_after: Some(1),
            };
        }
    };
    Fail {
        http,
        code,
        message: e.to_string(),
        retry_after: None,
    }
}

/// Brings the index in step with the store after a write to skill `name`, so the answer means
/// "visible now": only that skill's directory is looked at (see [`super::refresh_skills`]).
fn refresh(app: &App, name: &str) {
    super::refresh_skills(&app.current, &[app.live_root.join(name)]);
}

/// The published name `id` stands for: the name itself, or the UUID of a published skill.
fn published_name(app: &App, id: &str) -> String {
    if valid_name(id) {
        return id.to_owned();
    }
    let live = app.store.live();
    app.registry
        .find(&app.current.get(), id)
        .ok()
        .flatten()
        .filter(|r| r.dir.parent() == Some(live.as_path()))
        .and_then(|r| r.dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| id.to_owned())
}

/// The version served now: the latest one not yanked.
fn current(history: &[Version]) -> Option<&str> {
    history
        .iter()
        .rev()
        .find(|v| !v.yanked)
        .map(|v| v.version.as_str())
}

pub(super) async fn h_publish(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rid = request_id(&headers);
    if let Err(f) = admit(&app, &headers, peer, Bucket::Publish, Scope::Publish) {
        return fail(&rid, f);
    }
    let bytes = match axum::body::to_bytes(body, MAX_PUBLISH_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return fail(
                &rid,
                Fail {
                    http: StatusCode::PAYLOAD_TOO_LARGE,
                    code: 60008,
                    message: format!(
                        "the archive was not read whole: over the {MAX_PUBLISH_BYTES} bytes a publish may send, or cut off"
                    ),
                    retry_after: None,
                },
            );
        }
    };
    let writer = app.clone();
    let res = blocking_write(&writer, move || {
        let p = app.store.publish(&bytes).map_err(store_fail)?;
        if p.created {
            refresh(&app, &p.name);
            tracing::info!(target: "hub", skill = %p.name, version = %p.version, "published");
        }
        Ok(json!({
            "id": skill_uuid(&p.name), "skill_id": p.name, "name": p.name,
            "version": p.version, "created": p.created, "skipped": p.skipped,
        }))
    })
    .await;
    match res {
        Ok(v) => {
            let created = v["created"] == Value::Bool(true);
            let mut r = answer(&rid, Ok(v));
            if created {
                *r.status_mut() = StatusCode::CREATED;
            }
            r
        }
        Err(f) => fail(&rid, f),
    }
}

pub(super) async fn h_versions(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    guarded(app, &headers, peer, Bucket::Read, Scope::Read, move |app| {
        let name = published_name(app, &id);
        let history = app.store.versions(&name).map_err(store_fail)?;
        if history.is_empty() {
            return Err(Fail::not_found(format!("no published skill `{id}`")));
        }
        Ok(json!({"name": name, "current": current(&history), "versions": history}))
    })
    .await
}

pub(super) async fn h_yank(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    UrlPath((id, version)): UrlPath<(String, String)>,
) -> Response {
    guarded(
        app,
        &headers,
        peer,
        Bucket::Publish,
        Scope::Publish,
        move |app| {
            let name = published_name(app, &id);
            let yanked = app.store.yank(&name, &version).map_err(store_fail)?;
            refresh(app, &name);
            let history = app.store.versions(&name).map_err(store_fail)?;
            tracing::info!(target: "hub", skill = %name, version = %yanked.version, "yanked");
            Ok(json!({"name": name, "yanked": yanked.version, "current": current(&history)}))
        },
    )
    .await
}

pub(super) async fn h_delete(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    guarded(
        app,
        &headers,
        peer,
        Bucket::Publish,
        Scope::Publish,
        move |app| {
            let name = published_name(app, &id);
            let n = app.store.delete(&name).map_err(store_fail)?;
            refresh(app, &name);
            tracing::info!(target: "hub", skill = %name, versions = n, "deleted");
            Ok(json!({"name": name, "deleted_versions": n}))
        },
    )
    .await
}
