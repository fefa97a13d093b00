//! The dispatcher: takes what the outbox holds and posts it, each delivery in its own task so
//! a slow or dead receiver never holds up processing, other receivers or other events.

use std::sync::Arc;
use std::time::Duration;

use quire_core::Clock;
use quire_store::{NewDeliveryAttempt, PendingDelivery, Store};
use tokio::sync::{Notify, Semaphore};

use crate::deliver::{Delivery, client, deliver};

/// How deliveries are made.
#[derive(Debug, Clone, Copy)]
pub struct DispatchSettings {
    /// Send to loopback, private and link-local addresses too (tests, local setups).
    pub allow_private_targets: bool,
    /// Longest wait for a receiver's answer (the spec's 10 s).
    pub timeout: Duration,
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// How often the outbox is looked at when nothing wakes the dispatcher.
    pub poll_interval: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            timeout: Duration::from_secs(10),
            concurrency: 64,
            poll_interval: Duration::from_millis(250),
        }
    }
}

/// Posts outbox events to their webhooks, at most once each.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    settings: DispatchSettings,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// A dispatcher over `store`'s outbox.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, settings: DispatchSettings) -> Self {
        Self {
            store,
            clock,
            settings,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Wakes the dispatcher early (after a status change wrote to the outbox).
    pub fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }

    /// Runs until the task is aborted. Rows are claimed (marked as attempted) before they are
    /// sent, so a crash mid-delivery loses that one attempt rather than repeating it: the spec
    /// promises no retries, and a receiver never sees an event twice.
    pub async fn run(self) {
        let client = client();
        let slots = Arc::new(Semaphore::new(self.settings.concurrency.max(1)));
        loop {
            let free = slots.available_permits();
            let claimed = if free == 0 {
                Vec::new()
            } else {
                match self.store.claim_deliveries(free as u32).await {
                    Ok(claimed) => claimed,
                    Err(e) => {
                        tracing::error!(error = %e, "could not read the webhook outbox");
                        Vec::new()
                    }
                }
            };
            if claimed.is_empty() {
                tokio::select! {
                    () = tokio::time::sleep(self.settings.poll_interval) => {}
                    () = self.wake.notified() => {}
                }
                continue;
            }
            for pending in claimed {
                let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                let (store, clock, client) = (
                    Arc::clone(&self.store),
                    Arc::clone(&self.clock),
                    client.clone(),
                );
                let settings = self.settings;
                tokio::spawn(async move {
                    send(&*store, &*clock, &client, pending, settings).await;
                    drop(permit);
                });
            }
        }
    }
}

async fn send(
    store: &dyn Store,
    clock: &dyn Clock,
    client: &reqwest::Client,
    pending: PendingDelivery,
    settings: DispatchSettings,
) {
    let attempted_at = clock.now();
    let delivery = Delivery {
        event_id: pending.event_id.to_string(),
        url: pending.webhook.url.clone(),
        secret: pending.webhook.secret.clone(),
        body: pending.body.clone(),
        // Receivers compare this with their own clock to refuse replays: it is wall-clock
        // time, whatever clock the service runs on.
        timestamp: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
    };
    let outcome = deliver(
        client,
        &delivery,
        settings.allow_private_targets,
        settings.timeout,
    )
    .await;
    if !outcome.success {
        tracing::warn!(
            webhook = %pending.webhook.id,
            event = pending.event.as_str(),
            status = ?outcome.status_code,
            error = outcome.error.as_deref().unwrap_or(""),
            "webhook delivery failed (not retried)"
        );
    }
    let attempt = NewDeliveryAttempt {
        event_id: pending.event_id,
        webhook_id: pending.webhook.id,
        event: pending.event,
        attempted_at,
        status_code: outcome.status_code,
        error: outcome.error,
        latency_ms: u64::try_from(outcome.latency.as_millis()).unwrap_or(u64::MAX),
    };
    if let Err(e) = store.record_delivery(attempt).await {
        tracing::error!(error = %e, "could not record a webhook delivery");
    }
}
