//! Quire's HTTP layer: the Agent API router, authentication, rate limiting and the single
//! mapping from errors to `{"error","message"}` responses. Handlers extract, authorise, call
//! one use case of `quire-app` and map the result; storage and indexing live in the crates
//! below.

pub mod auth;
mod error;
mod extract;
mod rate_limit;
pub mod request_id;
mod routes;
mod state;
mod wire;

pub use auth::Principal;
pub use error::{ApiError, ErrorBody};
pub use rate_limit::apply_headers;
pub use routes::{openapi_json, router};
pub use state::{AppState, HttpSettings};
