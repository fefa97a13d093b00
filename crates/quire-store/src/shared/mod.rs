//! What the SQLite and PostgreSQL stores share: everything that is logic rather than SQL. Each
//! store implements [`Backend`] (its connections, the bits of SQL text that differ, the few
//! statements that cannot be written once, and the cluster features only PostgreSQL has); the
//! modules here run the store's sequences once for both, as neutral statements ([`Query`])
//! that each dialect binds and reads back in its own column types ([`Sql`], [`Cells`]), and
//! implement [`crate::Store`] for every backend.

mod admin;
mod backend;
mod chunks;
mod conversations;
mod documents;
mod jobs;
mod keys;
mod progress;
mod rate;
pub(crate) mod records;
mod reviews;
mod sources;
mod sql;
mod store;
mod syncs;
pub(crate) mod webhooks;

pub(crate) use backend::{Backend, Conn};
pub(crate) use sql::{Arg, Cells, Query, Sql};
