//! The service as a library: configuration in layers ([`config`]) and the wiring ([`build`]
//! opens the data directory and assembles the service, [`App::serve`] runs it). The `quire`
//! binary, `quire eval`/`quire bench` and the integration tests all call the same two
//! functions, so every one of them exercises the real wiring.

pub mod app;
pub mod config;
pub mod metrics;

pub use app::{App, Parts, build, open_store};
pub use config::{Config, Overrides};
