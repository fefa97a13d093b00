//! The `quire` binary's library: the command-line interface. The service itself (configuration
//! and wiring) lives in `quire-server`, the measurements in `quire-eval`; what the integration
//! tests use of the server is re-exported here.

pub mod admin_cli;
pub mod cli;
pub mod keys;
pub mod model_fetch;
pub mod review_cli;
pub mod webhooks_cli;

pub use quire_server::{App, Config, Overrides, build, config, open_store};
