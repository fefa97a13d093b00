//! Outgoing webhooks: Standard Webhooks signing ([`signing`]), the SSRF guard for targets
//! ([`target`]), one delivery attempt ([`deliver`](mod@deliver)) and the [`Dispatcher`] that
//! posts what the store's outbox holds.

pub mod deliver;
mod dispatch;
pub mod signing;
pub mod target;

pub use deliver::{DEFAULT_TIMEOUT, Delivery, Outcome, client, deliver};
pub use dispatch::{DispatchSettings, Dispatcher, RunningDispatcher};
pub use signing::{SecretError, SignatureHeaders, headers, new_secret, sign};
pub use target::{InternalAddress, TargetError, check_url, resolve_and_check};
