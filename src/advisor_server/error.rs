//! One error shape for every route, and the one JSON extractor that produces it.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use trainplace_advisor::error::InputError;

/// `{"error": {"status", "input", "field", "message", "allowed"?}}`.
#[derive(Debug, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: StatusCode,
    pub input: String,
    pub field: String,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, field: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            input: "http".into(),
            field: field.into(),
            message: message.into(),
            allowed: Vec::new(),
        }
    }
}

impl From<InputError> for ApiError {
    fn from(e: InputError) -> Self {
        let input = serde_json::to_value(e.input)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            input,
            field: e.field,
            message: e.message,
            allowed: e.allowed,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        tracing::warn!(status = self.status.as_u16(), field = %self.field, message = %self.message, "request rejected");
        let status = self.status;
        (status, axum::Json(json!({"error": {"status": status.as_u16(), "input": self.input, "field": self.field, "message": self.message, "allowed": self.allowed}}))).into_response()
    }
}

/// `axum::Json` whose rejections come out as [`ApiError`].
pub struct AppJson<T>(pub T);

impl<S, T> FromRequest<S> for AppJson<T>
where
    axum::Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(AppJson(v)),
            Err(rejection) => Err(ApiError::new(
                rejection.status(),
                "$",
                rejection.body_text(),
            )),
        }
    }
}

impl<T: Serialize> IntoResponse for AppJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}
