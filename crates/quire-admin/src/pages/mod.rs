//! The handlers, one module per page.

pub(crate) mod audit;
pub(crate) mod dashboard;
pub(crate) mod keys;
pub(crate) mod login;
pub(crate) mod other;
pub(crate) mod playground;
pub(crate) mod review;
pub(crate) mod sources;
pub(crate) mod webhooks;
