//! Job wake-ups: idle workers wait on `LISTEN` instead of polling. Every transaction that makes
//! a job runnable notifies the store's channel at commit; one listening connection per store
//! handle, opened on the first wait, wakes every worker of that handle.

use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::{PgConnection, PgPool};
use tokio::sync::{Notify, OnceCell};
use tokio::task::JoinHandle;

use crate::StoreResult;

/// The channel's name for the connection's schema: installations in different schemas of one
/// database do not wake each other. Hashed, because channel names are limited to 63 bytes.
const CHANNEL: &str = "'quire_jobs_' || left(md5(current_schema()), 16)";

/// Wakes the nodes waiting for work once the caller's transaction commits (PostgreSQL sends a
/// transaction's notifications at commit, and folds repeats into one).
pub(super) async fn notify_runnable(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query(&format!("SELECT pg_notify({CHANNEL}, '')"))
        .execute(conn)
        .await?;
    Ok(())
}

/// The listening task of one store handle and the workers it wakes.
#[derive(Debug, Default)]
pub(super) struct Wakeups {
    notify: std::sync::Arc<Notify>,
    listener: OnceCell<JoinHandle<()>>,
}

impl Wakeups {
    /// Returns when a job was notified or after `max`, whichever comes first. A notification
    /// sent just before the wait began is not seen: callers claim before waiting, and `max`
    /// bounds how late such a job is picked up.
    pub(super) async fn wait(&self, pool: &PgPool, max: Duration) {
        let notified = self.notify.notified();
        if let Err(e) = self
            .listener
            .get_or_try_init(|| listen(pool, &self.notify))
            .await
        {
            tracing::warn!(error = %e, "cannot listen for job notifications; polling instead");
        }
        let _ = tokio::time::timeout(max, notified).await;
    }

    /// Stops listening, returning the listener's connection to the pool.
    pub(super) fn stop(&self) {
        if let Some(task) = self.listener.get() {
            task.abort();
        }
    }
}

/// Subscribes a pool connection to the channel, then hands it to a task that wakes every
/// waiting worker on each notification.
async fn listen(pool: &PgPool, notify: &std::sync::Arc<Notify>) -> StoreResult<JoinHandle<()>> {
    let channel: String = sqlx::query_scalar(&format!("SELECT {CHANNEL}"))
        .fetch_one(pool)
        .await?;
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(&channel).await?;
    let notify = notify.clone();
    Ok(tokio::spawn(async move {
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => notify.notify_waiters(),
                // The connection was lost and is being re-established: notifications may
                // have been missed meanwhile, so let the workers look.
                Ok(None) => notify.notify_waiters(),
                Err(e) => {
                    tracing::warn!(error = %e, "job notifications interrupted");
                    notify.notify_waiters();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }))
}
