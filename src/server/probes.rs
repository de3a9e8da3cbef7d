//! Plain-HTTP probes and metrics, on their own port and their own thread: a kubelet
//! probe or a Prometheus scrape never waits behind reviews or TLS work.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::state::AppState;
use crate::inventory::Status;

/// Bind `addr` now and serve the probe routes on a dedicated thread with its own
/// single-threaded runtime. Returns the bound address.
pub fn serve_on_own_thread(
    addr: std::net::SocketAddr,
    state: AppState,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("trainplace-probes".into())
        .spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => {
                        if let Err(error) = axum::serve(l, router(state)).await {
                            tracing::error!(%error, "probe server stopped");
                        }
                    }
                    Err(error) => tracing::error!(%error, "probe listener unusable"),
                }
            })
        })?;
    Ok(bound)
}

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
    let status = state.inventory.status();
    // `--inventory off` (or no client config): the embedded catalog by choice.
    let enabled = !matches!(status, Status::Disabled);
    state.metrics.inventory_enabled.set(i64::from(enabled));
    let (up, age) = match status {
        Status::Live { age_seconds, .. } => (1, age_seconds as i64),
        Status::Static { .. } => (1, 0),
        _ => (0, -1),
    };
    state.metrics.inventory_up.set(up);
    state.metrics.inventory_age.set(age);
    if let Some(cert) = &state.cert {
        state
            .metrics
            .set_certificate(cert.not_after(), super::tls::unix_now());
    }
    state.metrics.set_blocks(
        state.inventory.snapshot().as_deref(),
        jiff::Timestamp::now(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}
