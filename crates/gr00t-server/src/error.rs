//! One error type for the HTTP surface; it owns the status table.
//!
//! | variant | status |
//! |---|---|
//! | `BadRequest` (names the field) | 400 |
//! | `NotFound` | 404 |
//! | `PayloadTooLarge` | 413 |
//! | `NotReady` / `Busy` | 503 |
//! | `Unavailable` (the device is lost or being reopened) | 503 with `Retry-After` |
//! | `Internal` | 500 |
//!
//! Body: `{"error": "<message>", "field": "<field or null>"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use gr00t_runtime::request::InputError;

/// A failed request: its HTTP status ([`ApiError::status`]) and JSON body ([`ApiError::body`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or invalid.
    #[error("`{field}`: {message}")]
    BadRequest {
        /// The offending field, as a JSON path (`images.cam`, `state.arm[3]`, `body`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// 404: no such route or resource.
    #[error("{0}")]
    NotFound(String),
    /// 413: the body exceeds the server's limit.
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// 503: the model is still loading, or the boot failed (the message says which).
    #[error("{0}")]
    NotReady(String),
    /// 503: the device queue is full ([`MAX_IN_FLIGHT`](crate::state::MAX_IN_FLIGHT)).
    #[error("too many requests are waiting for the device")]
    Busy,
    /// 503 with `Retry-After`: the device is lost (its worker died or missed the deadline
    /// `GR00T_MK_DEVICE_TIMEOUT_S` and was killed) and is being reopened.
    #[error("{message}")]
    Unavailable {
        /// What happened to the device.
        message: String,
        /// Seconds a client should wait before retrying.
        retry_after_s: u64,
    },
    /// 500: the server failed (e.g. the forward).
    #[error("{0}")]
    Internal(String),
}

/// The `Retry-After` a request gets while the device is being reopened (by the supervisor,
/// `supervise.rs`, whose backoff starts at half a second).
pub const RETRY_AFTER_S: u64 = 5;

impl ApiError {
    /// A 400 naming `field`.
    pub(crate) fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The HTTP status (the table in the module docs).
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotReady(_) | Self::Busy | Self::Unavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
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
        let mut r = (self.status(), axum::Json(self.body())).into_response();
        if let Self::Unavailable { retry_after_s, .. } = self {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after_s.into());
        }
        r
    }
}
