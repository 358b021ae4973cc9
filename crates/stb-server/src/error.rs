//! API errors: a status and `{"detail": ...}`, as the reference's clients expect.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answered as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: serde_json::Value,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: serde_json::Value::String(detail.into()),
        }
    }

    pub fn unauthenticated(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, detail)
    }

    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not Found")
    }

    pub fn service_unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, detail)
    }

    /// 409 until the project has compiled once.
    pub fn compile_failing() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "The project compile is failing; fix the reported error and reload",
        )
    }

    /// An engine error, by its kind: invalid 400, not found 404, a conflict with the
    /// target's state 409, the warehouse 502; the detail keeps its code and hint.
    #[must_use]
    pub fn engine(error: &stb_engine::EngineError) -> Self {
        let status = match error.kind {
            stb_engine::ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            stb_engine::ErrorKind::NotFound => StatusCode::NOT_FOUND,
            stb_engine::ErrorKind::Conflict => StatusCode::CONFLICT,
            stb_engine::ErrorKind::Warehouse => StatusCode::BAD_GATEWAY,
        };
        Self {
            status,
            detail: serde_json::json!({
                "message": error.message,
                "code": error.code,
                "hint": error.hint,
            }),
        }
    }
}

/// A request body read as JSON only once the caller could be allowed at all (axum's `Json`
/// extractor would read it first); 422 when it is not the expected document.
///
/// # Errors
/// The body is not the expected document.
pub fn json_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            axum::Json(serde_json::json!({"detail": self.detail})),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Session"),
            );
        }
        response
    }
}

/// A JSON request body whose refusal is an API error like any other (`{"detail": …}`): a
/// body that is not JSON 400, one with a missing or wrongly typed field or a field the
/// route does not know 422 (routes that take accounts deny unknown fields, so a typo is
/// never silently ignored), no JSON content type 415.
pub(crate) struct Body<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for Body<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stb_engine::{EngineError, ErrorKind};

    #[test]
    fn an_engine_error_answers_by_its_kind_and_keeps_its_code_and_hint() {
        let error = EngineError::new("STB-RUNS-001", "no run 'x'", "list the runs");
        for (kind, status) in [
            (ErrorKind::Invalid, StatusCode::BAD_REQUEST),
            (ErrorKind::NotFound, StatusCode::NOT_FOUND),
            (ErrorKind::Conflict, StatusCode::CONFLICT),
            (ErrorKind::Warehouse, StatusCode::BAD_GATEWAY),
        ] {
            let answer = ApiError::engine(&error.clone().of_kind(kind));
            assert_eq!(answer.status, status, "{kind:?}");
            assert_eq!(
                answer.detail,
                serde_json::json!({"message": "no run 'x'", "code": "STB-RUNS-001", "hint": "list the runs"})
            );
        }
        // A warehouse failure is the warehouse's whatever its code says.
        let refused = stb_warehouse::WarehouseError {
            kind: stb_warehouse::ErrorKind::Other,
            message: "Code: 60".into(),
            server_code: Some(60),
        };
        assert_eq!(
            ApiError::engine(&EngineError::from(&refused)).status,
            StatusCode::BAD_GATEWAY
        );
    }
}
