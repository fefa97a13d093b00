//! Quire's application layer: the use cases every adapter shares. The REST API (`quire-http`),
//! the admin interface (`quire-admin`), the CLI and the evaluations call these functions; each
//! adapter only extracts its input, authorises the caller, calls one use case and maps the
//! result (or the [`AppError`]) to its own output. Storage, indexing and parsing stay in the
//! crates below.

pub mod answers;
pub mod auth;
pub mod documents;
mod error;
pub mod keys;
pub mod rate_limit;
pub mod reviews;
pub mod scope;
pub mod search;
mod services;
pub mod uploads;
pub mod webhooks;

pub use error::{AppError, Dependency};
pub use services::{Services, UploadSettings, WebhookSettings};
