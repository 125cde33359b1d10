//! One error type for the HTTP surface; it owns the status table.
//!
//! | variant | status |
//! |---|---|
//! | `BadRequest` (names the field) | 400 |
//! | `NotFound` | 404 |
//! | `PayloadTooLarge` | 413 |
//! | `NotReady` / `Busy` | 503 |
//! | `Internal` | 500 |
//!
//! Body: `{"error": "<message>", "field": "<field or null>"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use gr00t_runtime::request::InputError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("`{field}`: {message}")]
    BadRequest { field: String, message: String },
    #[error("{0}")]
    NotFound(String),
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{0}")]
    NotReady(String),
    #[error("too many requests are waiting for the device")]
    Busy,
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotReady(_) | Self::Busy => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        let field = match self {
            Self::BadRequest { field, .. } => Some(field.clone()),
            _ => None,
        };
        serde_json::json!({ "error": self.to_string(), "field": field })
    }
}

impl From<InputError> for ApiError {
    fn from(e: InputError) -> Self {
        Self::BadRequest {
            field: e.field,
            message: e.message,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), axum::Json(self.body())).into_response()
    }
}
