//! Quire's application layer: the use cases every adapter shares. The REST API (`quire-http`),
//! the MCP server (`quire-mcp`), the admin interface (`quire-admin`), the CLI and the
//! evaluations call these functions; each adapter only extracts its input, authorises the
//! caller, calls one use case and maps the result (or the [`AppError`]) to its own output.
//! Every use case that changes state takes the [`Actor`] and writes the audit entry itself.
//! Storage, indexing and parsing stay in the crates below, reachable only from here.

mod actor;
pub mod admin_access;
pub mod answers;
pub mod audit;
pub mod auth;
pub mod documents;
mod error;
pub mod health;
pub mod keys;
mod ledger;
pub mod rate_limit;
pub mod records;
pub mod reviews;
pub mod scope;
pub mod search;
mod services;
pub mod sources;
pub mod startup;
pub mod syncs;
pub mod uploads;
pub mod webhooks;

pub use actor::Actor;
pub use error::{AppError, Dependency};
pub use ledger::Ledger;
pub use services::{ServiceParts, Services, UploadSettings, WebhookSettings};
