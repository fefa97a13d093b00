//! Integration tests: the real server over real HTTP.

mod admin;
mod admin_browser;
mod auth;
mod browser;
mod cli;
mod crash;
mod documents;
mod errors;
mod eval;
mod fixtures;
mod formats;
mod generate;
mod helpers;
mod isolation;
mod mcp;
mod metrics;
mod model_fetch;
mod pdf;
mod progress;
mod rate_limits;
mod review;
mod scope;
mod search;
mod semantic;
mod sources;
mod webhooks;
