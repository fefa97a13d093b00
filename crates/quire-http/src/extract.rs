//! Extractors whose rejections are ours: malformed JSON, wrong field types, bad path ids and
//! non-multipart uploads all answer with the error envelope.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Multipart, Path, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// A JSON body; see [`json_rejection`] for how failures are reported.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        Json::<T>::from_request(request, state)
            .await
            .map(|Json(value)| Self(value))
            .map_err(json_rejection)
    }
}

/// 415 without a JSON content type, 413 over the body limit, 400 for bad JSON or field types.
fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
            "expected a JSON body with `Content-Type: application/json`".into(),
        ),
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::InvalidBody(format!("malformed JSON: {}", e.body_text()))
        }
        JsonRejection::JsonDataError(e) => {
            ApiError::InvalidBody(format!("invalid request body: {}", e.body_text()))
        }
        JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge("the request body is too large".into())
        }
        other => ApiError::BadRequest(format!(
            "could not read the request body: {}",
            other.body_text()
        )),
    }
}

/// Path parameters; a malformed id answers 400.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|rejection: PathRejection| {
                ApiError::BadRequest(format!(
                    "invalid path parameter (ids are UUIDs): {}",
                    rejection.body_text()
                ))
            })
    }
}

/// A `multipart/form-data` body; any other content type answers 415.
#[derive(Debug)]
pub struct ApiMultipart(pub Multipart);

impl<S: Send + Sync> FromRequest<S> for ApiMultipart {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        Multipart::from_request(request, state)
            .await
            .map(Self)
            .map_err(|_| {
                ApiError::UnsupportedMediaType(
                    "expected a multipart/form-data body with a `file` part".into(),
                )
            })
    }
}
