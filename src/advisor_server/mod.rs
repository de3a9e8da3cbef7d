//! The advisor's HTTP face (axum): thin handlers around [`trainplace_advisor::advise`].
//! `POST /v1/recommendations`, `GET /v1/instance-types`, `GET /` (the web page).

mod error;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use serde_json::Value;
use trainplace_engine::{InstanceProfile, Policy};

pub use error::{ApiError, AppJson};

use trainplace_advisor::advice::{Advice, advise, split_body};

/// Bodies carry at most a request plus pasted aws CLI output; 4 MiB is generous.
const BODY_LIMIT: usize = 4 * 1024 * 1024;

#[derive(Clone)]
pub struct AppState {
    policy: Arc<Policy>,
}

impl AppState {
    pub fn new() -> Self {
        Self::with_policy(Policy::embedded())
    }

    pub fn with_policy(policy: Policy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl Default for AppState {
    fn default() -> Self {
        Self::new()
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/v1/recommendations", post(recommendations))
        .route("/v1/instance-types", get(instance_types))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn recommendations(
    State(state): State<AppState>,
    AppJson(body): AppJson<Value>,
) -> Result<AppJson<Advice>, ApiError> {
    let (req, facts) = split_body(body)?;
    let mut advice = advise(&req, &facts, &state.policy, jiff::Timestamp::now())?;
    advice.layout_svg = Some(trainplace_advisor::svg::layout_svg(&advice.recommendation));
    Ok(AppJson(advice))
}

async fn instance_types(State(state): State<AppState>) -> AppJson<Vec<InstanceProfile>> {
    AppJson(state.policy.catalog.instances().cloned().collect())
}

async fn page() -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "no-store")],
        Html(include_str!("page.html")),
    )
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "$",
        "no such route; try GET / or POST /v1/recommendations",
    )
}
