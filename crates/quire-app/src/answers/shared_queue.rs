//! Cluster mode: the generation queue kept in the shared store, so every node's questions
//! stand in one FIFO line and `queued {position}` counts every waiting question of the
//! cluster. `llm.max_concurrent` then bounds answers for the cluster as a whole: one line with
//! slots per node would let a question wait behind another node's line while its own node had
//! a free slot, and the language model behind the nodes is one service whose capacity is a
//! cluster figure. Every node should be configured with the same bounds.
//!
//! A node that holds tickets looks at the queue every [`POLL_INTERVAL`]: that renews its
//! tickets, hands free slots to the head of the line (whichever node its questions came
//! through) and tells each local ticket its place. Tickets not renewed for [`ALIVE_SECONDS`]
//! belonged to a node that died and are removed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use quire_core::{Clock, KeyId};
use quire_store::{QueueLimits, QueueRefusal, Store, StoreError, TicketPlace};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::queue::{Place, QueueFull, WAIT_SECONDS};

/// How often a node holding tickets looks at the queue: the most a freed slot stays unused
/// and a place goes untold.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long a ticket that is not renewed still counts: a node silent this long is taken for
/// dead and its questions leave the line.
pub const ALIVE_SECONDS: i64 = 10;

/// This node's side of the cluster's generation queue.
pub struct SharedLine {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    node: String,
    limits: QueueLimits,
    /// This node's tickets: how each is told its place, and when it joined.
    tickets: Mutex<HashMap<Uuid, (watch::Sender<Place>, Instant)>>,
    /// (running, waiting) cluster-wide, as last seen.
    load: Mutex<(usize, usize)>,
    wake: Notify,
}

impl std::fmt::Debug for SharedLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLine")
            .field("node", &self.node)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl SharedLine {
    /// This node's side of the queue in `store`, and the task that keeps its tickets told
    /// (it ends when the line is dropped).
    pub fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        node: String,
        limits: QueueLimits,
    ) -> Arc<Self> {
        let line = Arc::new(Self {
            store,
            clock,
            node,
            limits,
            tickets: Mutex::new(HashMap::new()),
            load: Mutex::new((0, 0)),
            wake: Notify::new(),
        });
        tokio::spawn(watch_queue(Arc::downgrade(&line)));
        line
    }

    /// The cluster's bounds this node applies.
    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// (running, waiting) in the whole cluster, as last seen by this node.
    pub fn load(&self) -> (usize, usize) {
        *lock(&self.load)
    }

    /// Puts a question of `owner` in the line.
    pub(super) async fn join(
        &self,
        owner: KeyId,
    ) -> Result<(Uuid, watch::Receiver<Place>), JoinError> {
        let id = Uuid::new_v4();
        let now = self.clock.now();
        let joined = self
            .store
            .queue_join(id, owner, &self.node, self.limits, now, alive_since(now))
            .await?;
        let place = match joined {
            Ok(TicketPlace::Running) => Place::Running,
            Ok(TicketPlace::Waiting(n)) => Place::Waiting(usize::try_from(n).unwrap_or(usize::MAX)),
            Err(QueueRefusal::LineFull) => {
                return Err(JoinError::Full(QueueFull::Line {
                    max_waiting: usize::try_from(self.limits.max_waiting).unwrap_or(usize::MAX),
                }));
            }
            Err(QueueRefusal::KeyShareUsed) => {
                return Err(JoinError::Full(QueueFull::Key {
                    max_per_key: usize::try_from(self.limits.max_per_key).unwrap_or(usize::MAX),
                }));
            }
        };
        if place == Place::Running {
            metrics::histogram!(WAIT_SECONDS).record(0.0);
        }
        let (sender, receiver) = watch::channel(place);
        lock(&self.tickets).insert(id, (sender, Instant::now()));
        self.wake.notify_one();
        Ok((id, receiver))
    }

    /// Takes ticket `id` out of the line and waits until the store has it out.
    pub(super) async fn leave_now(&self, id: Uuid) {
        lock(&self.tickets).remove(&id);
        if let Err(e) = self.store.queue_leave(id).await {
            tracing::warn!(error = %e, "could not take a question out of the shared queue");
        }
        self.wake.notify_one();
    }

    /// Looks at the queue now (for an up-to-date [`SharedLine::load`]); a failure is logged
    /// and the last load stays.
    pub(super) async fn refresh(&self) {
        if let Err(e) = self.look().await {
            tracing::warn!(error = %e, "could not look at the shared generation queue");
        }
    }

    /// Takes ticket `id` out of the line, in the background (a ticket is dropped in
    /// synchronous code); a ticket that cannot be removed now leaves when it is no longer
    /// renewed.
    pub(super) fn leave(self: &Arc<Self>, id: Uuid) {
        lock(&self.tickets).remove(&id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let line = Arc::clone(self);
        runtime.spawn(async move { line.leave_now(id).await });
    }

    /// Looks at the queue once and tells each local ticket its place.
    async fn look(&self) -> Result<(), StoreError> {
        let asked = Instant::now();
        let now = self.clock.now();
        let view = self
            .store
            .queue_view(&self.node, self.limits.slots, now, alive_since(now))
            .await?;
        *lock(&self.load) = (
            usize::try_from(view.running).unwrap_or(usize::MAX),
            usize::try_from(view.waiting).unwrap_or(usize::MAX),
        );
        let places: HashMap<Uuid, TicketPlace> = view.places.into_iter().collect();
        let tickets = lock(&self.tickets);
        for (id, (sender, joined)) in tickets.iter() {
            let place = match places.get(id) {
                Some(TicketPlace::Waiting(n)) => {
                    Place::Waiting(usize::try_from(*n).unwrap_or(usize::MAX))
                }
                Some(TicketPlace::Running) => Place::Running,
                // Joined while this look was under way: the view may predate it.
                None if *joined >= asked => continue,
                // Removed while this node was silent too long: let the question go on rather
                // than wait for a turn that will never come.
                None => Place::Running,
            };
            sender.send_if_modified(|p| {
                // Once running, a ticket stays running.
                let changed = *p != place && *p != Place::Running;
                if changed {
                    if place == Place::Running {
                        metrics::histogram!(WAIT_SECONDS).record(joined.elapsed().as_secs_f64());
                    }
                    *p = place;
                }
                changed
            });
        }
        Ok(())
    }
}

/// Why a question got no place.
#[derive(Debug)]
pub(super) enum JoinError {
    /// The queue's bounds refused it.
    Full(QueueFull),
    /// The shared store failed.
    Store(StoreError),
}

impl From<StoreError> for JoinError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

fn alive_since(now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    now - chrono::Duration::seconds(ALIVE_SECONDS)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each value is replaced whole under the lock: a panic elsewhere cannot leave it torn.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// While this node holds tickets, looks at the queue every [`POLL_INTERVAL`] (sooner when a
/// ticket joins or leaves); ends when the line is dropped.
async fn watch_queue(line: Weak<SharedLine>) {
    let mut failing = false;
    loop {
        let Some(strong) = line.upgrade() else {
            return;
        };
        let idle = lock(&strong.tickets).is_empty();
        if !idle {
            match strong.look().await {
                Ok(()) if failing => {
                    tracing::info!("the shared generation queue answers again");
                    failing = false;
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "could not look at the shared generation queue");
                    failing = true;
                }
                Err(_) => {}
            }
        }
        let wait = if idle {
            Duration::from_secs(1)
        } else {
            POLL_INTERVAL
        };
        // Holding the line while waiting keeps it alive at most one wait longer.
        let _ = tokio::time::timeout(wait, strong.wake.notified()).await;
    }
}
