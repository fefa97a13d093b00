//! What every handler can reach: the application's services and the HTTP layer's own limits.

use std::ops::Deref;

use quire_app::Services;

/// Limits of the HTTP layer itself (`[limits]` in the config file).
#[derive(Debug, Clone, Copy)]
pub struct HttpSettings {
    /// Largest JSON request body, in bytes.
    pub max_json_bytes: usize,
}

/// Shared state of the router.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The use cases' services.
    pub services: Services,
    /// HTTP limits.
    pub settings: HttpSettings,
}

/// Handlers call use cases with `&state`, as if the state were the services.
impl Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.services
    }
}
