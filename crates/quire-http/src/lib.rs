//! Quire's HTTP layer: the Agent API router, authentication, rate limiting and the single
//! mapping from errors to `{"error","message"}` responses. Handlers extract, authorise, call
//! one function and map the result; storage and indexing live in the crates below.

pub mod api_keys;
pub mod auth;
mod error;
mod extract;
pub mod generate;
mod rate_limit;
mod routes;
pub mod search;
mod state;
mod wire;

pub use auth::Principal;
pub use error::ApiError;
pub use rate_limit::{RateLimitState, RateLimiter};
pub use routes::router;
pub use state::{AppState, HttpSettings, WebhookSettings};
