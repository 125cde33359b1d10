//! Every HTTP path in one place; handlers only translate to and from the runtime.
//!
//! | path | |
//! |---|---|
//! | `POST /predict` | one prediction (400 names the bad field, 413 over [`MAX_BODY_BYTES`](crate::state::MAX_BODY_BYTES), 503 until ready) |
//! | `GET /health` | 200 `{"status":"ready"}`, else 503 with `starting` / `recovering` (the device was lost and is being reopened; `Retry-After`) / `failed` |
//! | `GET /info` | version, embodiment, layout, backend, stage, weights revision, ..., `device`: the measured device traffic of the last forward ([`Runtime::device_stats`](crate::runtime::Runtime::device_stats)) |
//! | `GET /demo` | the shipped demo request and its expected actions |
//! | `GET /v1/models` | a one-model list (not an OpenAI-compatible API) |

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::error::{ApiError, RETRY_AFTER_S};
use crate::state::{AppState, Health};

/// The server's routes (the table above) over `state`, request bodies capped at the state's
/// body limit ([`MAX_BODY_BYTES`](crate::state::MAX_BODY_BYTES)).
pub fn router(state: AppState) -> Router {
    let limit = state.body_limit;
    Router::new()
        .route(
            "/predict",
            post(predict).layer(axum::middleware::from_fn(wake_decoder)),
        )
        .route("/health", get(health))
        .route("/info", get(info))
        .route("/demo", get(demo))
        .route("/v1/models", get(models))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Before `/predict`'s body is read: start the decode helper spinning, so its wake-up
/// (tens of µs on a VM) overlaps receiving the ~140 KB body instead of the image decode.
async fn wake_decoder(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    gr00t_runtime::preprocess::expect_decode();
    next.run(req).await
}

fn not_ready(state: &AppState) -> ApiError {
    match state.health() {
        Health::Failed(r) => ApiError::NotReady(format!("boot failed: {r}")),
        Health::Recovering(r) => ApiError::Unavailable {
            message: r,
            retry_after_s: RETRY_AFTER_S,
        },
        _ => ApiError::NotReady("model is loading".into()),
    }
}

async fn predict(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rej| {
        if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge {
                limit: state.body_limit,
            }
        } else {
            ApiError::bad("body", rej.body_text())
        }
    })?;
    let rt = state.runtime().ok_or_else(|| not_ready(&state))?;
    let slot = state.enter().ok_or(ApiError::Busy)?;
    let out = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        rt.predict_body(&body)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("prediction task failed: {e}")))??;
    let bytes = serde_json::to_vec(&out).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}

async fn health(State(state): State<AppState>) -> Response {
    let mut h = state.health();
    // The device's own state: a worker that died is reported at once, before the supervisor
    // has even noticed.
    let device = state
        .loaded_runtime()
        .and_then(|rt| rt.policy_device().map(|d| d.status()));
    if h == Health::Ready
        && let Some(d) = device.as_ref().filter(|d| !d.usable)
    {
        h = Health::Recovering(format!(
            "device {} lost: {}",
            d.device,
            d.lost.as_deref().unwrap_or("?")
        ));
    }
    let mut body = match &h {
        Health::Failed(r) | Health::Recovering(r) => json!({ "status": h.as_str(), "error": r }),
        // How many requests wait for the device right now (FIFO): a client can back off.
        Health::Ready => match state.runtime() {
            Some(rt) => json!({ "status": h.as_str(), "queued": rt.queued() }),
            None => json!({ "status": h.as_str() }),
        },
        _ => json!({ "status": h.as_str() }),
    };
    if let Some(d) = device {
        body["device"] = json!(d);
    }
    let code = if h == Health::Ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut r = (code, Json(body)).into_response();
    if matches!(h, Health::Recovering(_)) {
        r.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, RETRY_AFTER_S.into());
    }
    r
}

async fn info(State(state): State<AppState>) -> Result<Response, ApiError> {
    let rt = state.runtime().ok_or_else(|| not_ready(&state))?;
    let mut body = serde_json::to_value(&rt.info).map_err(|e| ApiError::Internal(e.to_string()))?;
    // Measured, so read per request (the static description is fixed at boot).
    body["device"] = rt.device_stats();
    Ok(Json(body).into_response())
}

async fn demo(State(state): State<AppState>) -> Result<Response, ApiError> {
    let d = state.demo().ok_or_else(|| {
        ApiError::NotFound("no demo is shipped with this server (GR00T_DEMO_DIR)".into())
    })?;
    Ok(Json(json!({ "request": d.request, "expected": d.expected })).into_response())
}

async fn models(State(state): State<AppState>) -> Result<Response, ApiError> {
    let rt = state.runtime().ok_or_else(|| not_ready(&state))?;
    Ok(Json(json!({
        "object": "list",
        "data": [{ "id": rt.info.weights_repo, "object": "model", "owned_by": "nvidia",
                   "embodiment": rt.info.embodiment, "backend": rt.info.backend }]
    }))
    .into_response())
}
