//! Integration tests of quire-webhooks: one test binary, one module per concern.

mod delivery;
mod dispatch;
mod verifier;
