//! Integration tests: the real server over real HTTP.

mod admin;
mod admin_browser;
mod auth;
mod browser;
mod cli;
mod documents;
mod errors;
mod eval;
mod fixtures;
mod formats;
mod generate;
mod helpers;
mod isolation;
mod model_fetch;
mod openapi;
mod pdf;
mod rate_limits;
mod review;
mod scope;
mod search;
mod semantic;
mod sources;
mod webhooks;
