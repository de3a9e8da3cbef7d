//! Plain-HTTP probes and metrics, on their own port.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::state::AppState;
use crate::inventory::Status;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<AppState>) -> Response {
    let detail = state.detail.load_full();
    let ready = state.is_ready();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    // The inventory is advisory: when the API is down the webhook still serves (from the
    // embedded catalog), so readiness does not depend on it.
    let inventory = state.inventory.status();
    (
        status,
        Json(json!({"ready": ready, "detail": *detail, "inventory": inventory})),
    )
        .into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    let (up, age) = match state.inventory.status() {
        Status::Live { age_seconds, .. } => (1, age_seconds as i64),
        Status::Static { .. } => (1, 0),
        _ => (0, -1),
    };
    state.metrics.inventory_up.set(up);
    state.metrics.inventory_age.set(age);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}
