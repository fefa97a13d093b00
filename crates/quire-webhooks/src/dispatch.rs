//! The dispatcher: takes what the outbox holds and posts it, each delivery in its own task so
//! a slow or dead receiver never holds up processing, other receivers or other events. Rows are
//! claimed for [`DispatchSettings::claim_length`] and deleted when the attempt is logged; a row
//! whose claim runs out (its dispatcher died in between) is attempted again with the same id.

use std::sync::Arc;
use std::time::Duration;

use quire_core::Clock;
use quire_store::{NewDeliveryAttempt, PendingDelivery, Store};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::deliver::{Delivery, client, deliver};

/// How deliveries are made.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// Send to loopback, private and link-local addresses too (tests, local setups).
    pub allow_private_targets: bool,
    /// Longest wait for a receiver's answer (the spec's 10 s).
    pub timeout: Duration,
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// How often the outbox is looked at when nothing wakes the dispatcher.
    pub poll_interval: Duration,
    /// The node's stable name: the dispatcher's claims are labelled `"{node}:dispatcher-…"`,
    /// so a restarted node can release exactly its previous run's claims.
    pub node: String,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            timeout: Duration::from_secs(10),
            concurrency: 64,
            poll_interval: Duration::from_millis(250),
            node: "node".into(),
        }
    }
}

/// How long shutdown waits, beyond the delivery timeout, for an attempt to be logged.
const LOG_GRACE: Duration = Duration::from_secs(5);

/// Slack a claim has beyond the attempt and its logging: a slow store, clocks of several nodes
/// that disagree a little.
const CLAIM_SLACK: Duration = Duration::from_secs(30);

impl DispatchSettings {
    /// How long a dispatcher holds the rows it claims: twice the delivery timeout plus 30 s
    /// (50 s by default). An attempt starts as soon as its row is claimed and is cut off at the
    /// timeout, and shutdown waits at most the timeout plus 5 s for it to be logged, so a live
    /// dispatcher logs well within its claim; only a dead one lets it run out.
    pub fn claim_length(&self) -> Duration {
        self.timeout.saturating_mul(2).saturating_add(CLAIM_SLACK)
    }
}

/// Posts outbox events to their webhooks. Each event is attempted once, unless the dispatcher
/// that claimed it dies between claiming and logging the attempt: then its claim runs out and
/// the event is attempted again, with the same `webhook-id`.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    settings: DispatchSettings,
    wake: Arc<Notify>,
    /// Names this dispatcher's claims in the outbox.
    claimer: String,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("claimer", &self.claimer)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// A dispatcher running in the background; stop it with [`RunningDispatcher::shutdown`].
/// Dropping it (or aborting the runtime) stops it the hard way, as a crash would: its claims
/// run out and other dispatchers, or the next start, attempt those events again.
#[derive(Debug)]
pub struct RunningDispatcher {
    stop: CancellationToken,
    /// Taken by [`RunningDispatcher::shutdown`]; aborted on drop otherwise.
    task: Option<JoinHandle<()>>,
}

impl RunningDispatcher {
    /// Stops claiming events and waits for the deliveries in flight: each ends within the
    /// delivery timeout and is logged. One still unlogged 5 s after that is cut short and its
    /// claim released, so it is attempted again (same `webhook-id`) at the next claim.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take()
            && let Err(e) = task.await
        {
            tracing::error!(error = %e, "the webhook dispatcher failed");
        }
    }
}

impl Drop for RunningDispatcher {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Dispatcher {
    /// A dispatcher over `store`'s outbox.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, settings: DispatchSettings) -> Self {
        let mut run_id = [0u8; 8];
        // Only a label for the claims: a clock-based one does as well without randomness.
        let run_id = match getrandom::fill(&mut run_id) {
            Ok(()) => u64::from_le_bytes(run_id),
            Err(_) => clock.now().timestamp_micros().unsigned_abs(),
        };
        let claimer = format!(
            "{}:dispatcher-{}-{run_id:016x}",
            settings.node,
            std::process::id()
        );
        Self {
            store,
            clock,
            settings,
            wake: Arc::new(Notify::new()),
            claimer,
        }
    }

    /// Wakes the dispatcher early (after a status change wrote to the outbox).
    pub fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }

    /// Runs the dispatcher in a task of its own until [`RunningDispatcher::shutdown`].
    pub fn start(self) -> RunningDispatcher {
        let stop = CancellationToken::new();
        let task = tokio::spawn(self.run(stop.clone()));
        RunningDispatcher {
            stop,
            task: Some(task),
        }
    }

    /// Claims and posts outbox rows until `stop` is cancelled, then lets the deliveries in
    /// flight finish (see [`RunningDispatcher::shutdown`]). Each delivery runs in a task of its
    /// own, so a slow receiver holds up nothing else.
    pub async fn run(self, stop: CancellationToken) {
        let client = client();
        let concurrency = self.settings.concurrency.max(1);
        let mut in_flight = JoinSet::new();
        while !stop.is_cancelled() {
            while let Some(done) = in_flight.try_join_next() {
                report_panic(done);
            }
            let free = concurrency.saturating_sub(in_flight.len());
            let claimed = if free == 0 {
                Vec::new()
            } else {
                self.claim(u32::try_from(free).unwrap_or(u32::MAX)).await
            };
            if claimed.is_empty() {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(self.settings.poll_interval) => {}
                    () = self.wake.notified() => {}
                    Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                        report_panic(done);
                    }
                }
                continue;
            }
            for pending in claimed {
                let (store, clock, client) = (
                    Arc::clone(&self.store),
                    Arc::clone(&self.clock),
                    client.clone(),
                );
                let settings = self.settings.clone();
                in_flight.spawn(async move {
                    send(&*store, &*clock, &client, pending, settings).await;
                });
            }
        }
        self.finish(in_flight).await;
    }

    async fn claim(&self, limit: u32) -> Vec<PendingDelivery> {
        let now = self.clock.now();
        let length = chrono::Duration::from_std(self.settings.claim_length())
            .unwrap_or(chrono::Duration::MAX);
        let until = now.checked_add_signed(length).unwrap_or(now);
        match self
            .store
            .claim_deliveries(&self.claimer, now, until, limit)
            .await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::error!(error = %e, "could not read the webhook outbox");
                Vec::new()
            }
        }
    }

    /// Waits for the deliveries in flight (each ends at the timeout), then cuts short and
    /// releases what is left.
    async fn finish(&self, mut in_flight: JoinSet<()>) {
        if in_flight.is_empty() {
            return;
        }
        tracing::info!(
            deliveries = in_flight.len(),
            "waiting for webhook deliveries in flight"
        );
        let grace = self.settings.timeout.saturating_add(LOG_GRACE);
        let drained = tokio::time::timeout(grace, async {
            while let Some(done) = in_flight.join_next().await {
                report_panic(done);
            }
        })
        .await;
        if drained.is_ok() {
            return;
        }
        let left = in_flight.len();
        in_flight.shutdown().await;
        match self
            .store
            .release_delivery_claims(Some(&self.claimer))
            .await
        {
            Ok(_) => tracing::warn!(
                deliveries = left,
                "webhook deliveries not logged in time were cut short; they are attempted again"
            ),
            Err(e) => tracing::warn!(
                deliveries = left,
                error = %e,
                "webhook deliveries not logged in time were cut short; they are attempted again \
                 when their claims run out"
            ),
        }
    }
}

fn report_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "a webhook delivery task failed");
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
    // `success`: a 2xx answer; `rejected`: another status; `unreachable`: no answer at all
    // (refused, timed out, or an address the guard blocks).
    let result = match (outcome.success, outcome.status_code) {
        (true, _) => "success",
        (false, Some(_)) => "rejected",
        (false, None) => "unreachable",
    };
    metrics::counter!("quire_webhook_deliveries_total", "outcome" => result).increment(1);
    metrics::histogram!("quire_webhook_delivery_duration_seconds")
        .record(outcome.latency.as_secs_f64());
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
