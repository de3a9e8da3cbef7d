//! HTTPS routes: thin handlers around `trainplace_engine::review_bytes`, run in the
//! review pool.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};
use trainplace_engine::{Endpoint, Outcome, Reviewed, review_bytes};
use trainplace_engine::{Mode, Verdict};

use super::metrics::{EndpointLabels, FindingLabels, ReviewLabels};
use super::pool::PoolError;
use super::state::AppState;

/// The one body extractor: a JSON content type and a body within the size limit,
/// kept as bytes (parsing is review work and runs in the review pool). Every rejection
/// answers with the same error shape.
pub struct JsonBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|m| {
                let m = m.trim();
                m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
            });
        if !json_type {
            return Err(ApiError {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                message: "expected Content-Type: application/json".into(),
            });
        }
        Bytes::from_request(req, state)
            .await
            .map(JsonBytes)
            .map_err(|r| ApiError {
                status: r.status(),
                message: if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    "request body too large for an AdmissionReview".into()
                } else {
                    format!("cannot read the request body: {}", r.body_text())
                },
            })
    }
}

/// A transport-level error: the request never became an AdmissionReview.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": self.message, "code": self.status.as_u16()})),
        )
            .into_response()
    }
}

pub fn router(state: AppState, max_body: usize, read_timeout: Duration) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(RequestBodyTimeoutLayer::new(read_timeout))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            read_timeout * 2,
        ))
        .with_state(state)
}

async fn mutate(State(state): State<AppState>, body: Result<JsonBytes, ApiError>) -> Response {
    handle(state, Endpoint::Mutate, body).await
}

async fn validate(State(state): State<AppState>, body: Result<JsonBytes, ApiError>) -> Response {
    handle(state, Endpoint::Validate, body).await
}

fn rejected(state: &AppState, endpoint: Endpoint, e: ApiError) -> Response {
    tracing::warn!(endpoint = endpoint.as_str(), status = e.status.as_u16(), error = %e.message, "rejected request");
    state
        .metrics
        .http_errors
        .get_or_create(&ReviewLabels {
            endpoint: endpoint.as_str(),
            kind: "unknown",
            operation: "unknown",
            verdict: "rejected",
        })
        .inc();
    e.into_response()
}

async fn handle(
    state: AppState,
    endpoint: Endpoint,
    body: Result<JsonBytes, ApiError>,
) -> Response {
    let JsonBytes(bytes) = match body {
        Ok(b) => b,
        Err(e) => return rejected(&state, endpoint, e),
    };
    let worker = state.clone();
    match state
        .pool
        .for_body(bytes.len())
        .run(move || answer(&worker, endpoint, &bytes))
        .await
    {
        Ok(Ok(json)) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Ok(Err(e)) => rejected(&state, endpoint, e),
        Err(e @ PoolError::Saturated { .. }) => {
            state.metrics.saturated.inc();
            let mut resp = rejected(
                &state,
                endpoint,
                ApiError {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    message: e.to_string(),
                },
            );
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            resp
        }
        Err(e) => rejected(
            &state,
            endpoint,
            ApiError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: e.to_string(),
            },
        ),
    }
}

/// Parse, review and serialise one AdmissionReview (runs on a blocking thread).
fn answer(state: &AppState, endpoint: Endpoint, bytes: &[u8]) -> Result<Vec<u8>, ApiError> {
    let start = Instant::now();
    let policy = state.policy.load();
    let snapshot = state.inventory.snapshot();
    let run = || {
        let marks = state.marks.load();
        review_bytes(
            bytes,
            endpoint,
            &policy,
            snapshot.as_deref(),
            marks.as_deref(),
            &state.limits,
            // Time-bound rules (Capacity Block ends) are judged at the request's time.
            Some(jiff::Timestamp::now()),
        )
        .map_err(|e| ApiError {
            status: StatusCode::BAD_REQUEST,
            message: e.to_string(),
        })
    };
    trainplace_engine::take_unknown_key_id();
    let mut reviewed = run()?;
    // A mark of a key this replica has not read yet: read the keys, answer again.
    if let Some(id) = trainplace_engine::take_unknown_key_id()
        && state.mark_refresh.reload_for(&id, &state.marks)
    {
        reviewed = run()?;
    }
    record(state, endpoint, &reviewed, bytes);
    let json = encoded(reviewed.body.map_err(|e| e.to_string()))?;
    state
        .metrics
        .latency
        .get_or_create(&EndpointLabels {
            endpoint: endpoint.as_str(),
        })
        .observe(start.elapsed().as_secs_f64());
    Ok(json)
}

/// The answer's bytes, or HTTP 500 naming why there is none (never a JSON `null`).
fn encoded(json: Result<Vec<u8>, String>) -> Result<Vec<u8>, ApiError> {
    json.map_err(|e| {
        tracing::error!(error = %e, "cannot encode the AdmissionReview answer");
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!("trainplace could not encode its answer: {e}"),
        }
    })
}

/// The verdict label of a judged review: denied, patched, warned or allowed.
fn verdict_label(endpoint: Endpoint, verdict: &Verdict) -> &'static str {
    if endpoint == Endpoint::Validate && !verdict.allowed {
        "denied"
    } else if endpoint == Endpoint::Mutate && !verdict.patch.is_empty() {
        "patched"
    } else if verdict.findings.iter().any(|f| f.mode == Mode::Warn) {
        "warned"
    } else {
        "allowed"
    }
}

/// A judged review's findings counted and logged; a denial logged at info with its
/// rules, object and requester in one line, and (validate only, not a dry run) an Event
/// for a denial or warning.
fn judged(
    state: &AppState,
    endpoint: Endpoint,
    r: &Reviewed,
    verdict: &Verdict,
    label: &'static str,
    bytes: &[u8],
) {
    let ep = endpoint.as_str();
    let kind = verdict.kind_class.metric_label();
    for f in &verdict.findings {
        state
            .metrics
            .findings
            .get_or_create(&FindingLabels {
                endpoint: ep,
                kind,
                rule: f.rule.as_str(),
                mode: f.mode.as_str(),
                verdict: label,
            })
            .inc();
        if f.mode == Mode::Audit {
            tracing::info!(endpoint = ep, uid = %r.uid, rule = f.rule.as_str(), kind = %verdict.kind, name = %verdict.name, namespace = %verdict.namespace, finding = %f.message(), "audit finding");
        }
    }
    state.metrics.namespaces.inc(&verdict.namespace, label);
    tracing::debug!(endpoint = ep, uid = %r.uid, dry_run = r.dry_run, kind = %verdict.kind, name = %verdict.name, namespace = %verdict.namespace, verdict = label, changes = verdict.changes.len(), "reviewed");
    if endpoint != Endpoint::Validate || !matches!(label, "denied" | "warned") {
        return;
    }
    let Some(subject) = super::subject::read(bytes) else {
        return;
    };
    let shown = |m: Mode| -> Vec<&str> {
        let rules = verdict.findings.iter().filter(|f| f.mode == m);
        rules.map(|f| f.rule.as_str()).collect()
    };
    let (reason, rules) = if label == "denied" {
        let rules = shown(Mode::Enforce).join(",");
        tracing::info!(uid = %r.uid, rules = %rules, namespace = %verdict.namespace, kind = %verdict.kind, name = %verdict.name, user = %subject.user, dry_run = r.dry_run, "denied");
        ("Denied", rules)
    } else {
        ("Warned", shown(Mode::Warn).join(","))
    };
    if r.dry_run || !state.events.enabled() {
        return;
    }
    let messages: Vec<String> = verdict.findings.iter().map(|f| f.message()).collect();
    state.events.send(super::events::Notice {
        regarding: subject.regarding,
        reason,
        note: format!(
            "trainplace {} {} {} by {} ({rules}): {}",
            reason.to_lowercase(),
            verdict.kind,
            verdict.name,
            subject.user,
            messages.join(" ")
        ),
    });
}

fn record(state: &AppState, endpoint: Endpoint, r: &Reviewed, bytes: &[u8]) {
    let ep = endpoint.as_str();
    let (kind, operation, verdict) = match &r.outcome {
        Outcome::Invalid(message) => {
            tracing::warn!(endpoint = ep, error = %message, "invalid AdmissionReview");
            ("unknown", "unknown", "invalid")
        }
        Outcome::Passed { operation } => ("unknown", *operation, "allowed"),
        Outcome::BadObject { operation, message } => {
            tracing::info!(endpoint = ep, uid = %r.uid, error = %message, "object denied: unreadable");
            ("unknown", *operation, "bad_object")
        }
        Outcome::OverBudget { operation, over } => {
            tracing::info!(endpoint = ep, uid = %r.uid, field = over.field, limit = over.limit, spent = r.work.spent, "review over budget");
            ("unknown", *operation, "over_budget")
        }
        Outcome::TooBigToRead { operation, size } => {
            let longest = size.longest.as_ref().map_or("", |(path, _)| path.as_str());
            tracing::info!(endpoint = ep, uid = %r.uid, tree_bytes = size.bytes, longest, "object too big to read");
            ("unknown", *operation, "over_budget")
        }
        Outcome::Judged { operation, verdict } => {
            let label = verdict_label(endpoint, verdict);
            judged(state, endpoint, r, verdict, label, bytes);
            (verdict.kind_class.metric_label(), *operation, label)
        }
    };
    state
        .metrics
        .reviews
        .get_or_create(&ReviewLabels {
            endpoint: ep,
            kind,
            operation,
            verdict,
        })
        .inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unencodable_answer_is_a_500_with_a_message() {
        let e = encoded(Err("broken on purpose".into())).unwrap_err();
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            e.message
                .contains("could not encode its answer: broken on purpose")
        );
    }
}
