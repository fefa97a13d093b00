//! The generation queue: at most `slots` answers are generated at once, the others wait in
//! FIFO order and can always see their place in line. A [`Ticket`] is a place in the queue or,
//! once its turn comes, a slot; dropping it (the client went away, or the answer is done)
//! leaves the line or frees the slot at once, and everyone behind moves up.
//!
//! Fairness: each key holds at most `max_per_key` tickets (waiting and running together), so
//! one busy client cannot fill the line and turn every other key away.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use quire_core::KeyId;
use tokio::sync::watch;

use super::shared_queue::{JoinError as SharedJoinError, SharedLine};

/// Where a ticket stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Waiting; 1 is next in line.
    Waiting(usize),
    /// Holds a slot: generate now.
    Running,
}

/// Why a question was refused a place; it is refused before its stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueFull {
    /// The line is full.
    Line {
        /// How many may wait.
        max_waiting: usize,
    },
    /// The asking key already holds its share of the queue.
    Key {
        /// How many questions one key may have waiting or being answered.
        max_per_key: usize,
    },
}

impl std::fmt::Display for QueueFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Line { max_waiting } => write!(
                f,
                "{max_waiting} questions are already waiting for the language model"
            ),
            Self::Key { max_per_key } => write!(
                f,
                "this key already has {max_per_key} questions waiting or being answered, its \
                 share of the queue"
            ),
        }
    }
}

/// Histogram of the time a question waited for a generation slot (0 when one was free).
pub const WAIT_SECONDS: &str = "quire_generation_queue_wait_seconds";

/// A FIFO queue in front of a fixed number of generation slots.
#[derive(Debug)]
pub struct GenerationQueue {
    slots: usize,
    max_waiting: usize,
    max_per_key: usize,
    state: Mutex<State>,
    /// In cluster mode, the line all nodes share, which replaces this process's own.
    shared: Option<Arc<SharedLine>>,
}

/// Why a question got no place in the queue.
#[derive(Debug)]
pub enum JoinError {
    /// The queue's bounds refused it.
    Full(QueueFull),
    /// The shared queue's store failed (cluster mode).
    Store(quire_store::StoreError),
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    next_id: u64,
    /// Tickets (waiting or running) held by each key that holds any.
    per_key: HashMap<KeyId, usize>,
    /// Waiting tickets in order, each with when it joined and the channel that tells it its
    /// place.
    waiting: VecDeque<(u64, Instant, watch::Sender<Place>)>,
}

impl State {
    /// Hands free slots to the front of the line and tells everyone still waiting their new
    /// place (a watch only wakes its receiver when the value really changed).
    fn advance(&mut self, slots: usize) {
        while self.running < slots {
            let Some((_, joined, place)) = self.waiting.pop_front() else {
                break;
            };
            metrics::histogram!(WAIT_SECONDS).record(joined.elapsed().as_secs_f64());
            // A ticket dropped since is gone from the line already, so every sender here
            // belongs to a live ticket; `send` failing would only mean it is being dropped.
            self.running += 1;
            let _ = place.send(Place::Running);
        }
        for (i, (_, _, place)) in self.waiting.iter().enumerate() {
            place.send_if_modified(|p| {
                let new = Place::Waiting(i + 1);
                let changed = *p != new;
                *p = new;
                changed
            });
        }
    }
}

impl GenerationQueue {
    /// A queue with `slots` concurrent generations (at least 1), at most `max_waiting`
    /// requests waiting, and at most `max_per_key` (at least 1) waiting or running per key.
    pub fn new(slots: usize, max_waiting: usize, max_per_key: usize) -> Arc<Self> {
        Arc::new(Self {
            slots: slots.max(1),
            max_waiting,
            max_per_key: max_per_key.max(1),
            state: Mutex::new(State::default()),
            shared: None,
        })
    }

    /// A queue whose line is `shared` by every node of a cluster, with the line's bounds (the
    /// cluster's: see [`crate::answers::shared_queue`]).
    pub fn shared(shared: Arc<SharedLine>) -> Arc<Self> {
        let limits = shared.limits();
        let bound = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let mut queue = Self::new(
            bound(limits.slots),
            bound(limits.max_waiting),
            bound(limits.max_per_key),
        );
        Arc::get_mut(&mut queue)
            .expect("the queue was just made")
            .shared = Some(shared);
        queue
    }

    /// Takes a place for `owner`, in the cluster's line when the queue is shared, else in
    /// this process's ([`GenerationQueue::join`]).
    pub async fn take(self: &Arc<Self>, owner: KeyId) -> Result<Ticket, JoinError> {
        let Some(shared) = &self.shared else {
            return self.join(owner).map_err(JoinError::Full);
        };
        let (id, place) = shared.join(owner).await.map_err(|e| match e {
            SharedJoinError::Full(full) => JoinError::Full(full),
            SharedJoinError::Store(e) => JoinError::Store(e),
        })?;
        Ok(Ticket {
            holder: Holder::Shared {
                line: Arc::clone(shared),
                id,
            },
            place,
            released: false,
        })
    }

    /// Concurrent generations allowed.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// (running, waiting) right now; in cluster mode, in the whole cluster as this node last
    /// saw it ([`GenerationQueue::current_load`] looks again).
    pub fn load(&self) -> (usize, usize) {
        if let Some(shared) = &self.shared {
            return shared.load();
        }
        let state = self.lock();
        (state.running, state.waiting.len())
    }

    /// (running, waiting) right now; in cluster mode, in the whole cluster, read from the
    /// shared store (what it was last seen to be if that fails).
    pub async fn current_load(&self) -> (usize, usize) {
        if let Some(shared) = &self.shared {
            shared.refresh().await;
        }
        self.load()
    }

    /// Takes a place for `owner` in this process's line: a slot at once when one is free and
    /// nobody waits, else the end of the line, unless the line is full or the key holds its
    /// share already.
    pub fn join(self: &Arc<Self>, owner: KeyId) -> Result<Ticket, QueueFull> {
        let mut state = self.lock();
        if state.per_key.get(&owner).copied().unwrap_or(0) >= self.max_per_key {
            return Err(QueueFull::Key {
                max_per_key: self.max_per_key,
            });
        }
        let id = state.next_id;
        let place = if state.running < self.slots && state.waiting.is_empty() {
            state.running += 1;
            Place::Running
        } else if state.waiting.len() >= self.max_waiting {
            return Err(QueueFull::Line {
                max_waiting: self.max_waiting,
            });
        } else {
            Place::Waiting(state.waiting.len() + 1)
        };
        state.next_id += 1;
        *state.per_key.entry(owner).or_default() += 1;
        let (sender, receiver) = watch::channel(place);
        if place == Place::Running {
            metrics::histogram!(WAIT_SECONDS).record(0.0);
        } else {
            state.waiting.push_back((id, Instant::now(), sender));
        }
        Ok(Ticket {
            holder: Holder::Local {
                queue: Arc::clone(self),
                id,
                owner,
            },
            place: receiver,
            released: false,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a counter and a list, consistent after every statement: a panic
        // elsewhere while holding the lock cannot leave it half-changed.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn leave(&self, id: u64, owner: KeyId, was_running: bool) {
        let mut state = self.lock();
        if let Some(held) = state.per_key.get_mut(&owner) {
            *held -= 1;
            if *held == 0 {
                state.per_key.remove(&owner);
            }
        }
        if was_running {
            state.running -= 1;
        } else if let Some(i) = state.waiting.iter().position(|(t, _, _)| *t == id) {
            state.waiting.remove(i);
        } else {
            // Promoted after the ticket last looked: it held a slot.
            state.running -= 1;
        }
        state.advance(self.slots);
    }
}

/// A place in the queue, then a slot. Dropping it gives the place or the slot back.
#[derive(Debug)]
pub struct Ticket {
    holder: Holder,
    place: watch::Receiver<Place>,
    /// Given back already by [`Ticket::release`].
    released: bool,
}

/// The line a ticket stands in, and its name there.
#[derive(Debug)]
enum Holder {
    Local {
        queue: Arc<GenerationQueue>,
        id: u64,
        owner: KeyId,
    },
    Shared {
        line: Arc<SharedLine>,
        id: uuid::Uuid,
    },
}

impl Ticket {
    /// Where the ticket stands now.
    pub fn place(&self) -> Place {
        *self.place.borrow()
    }

    /// Waits until the place changes and returns the new one.
    pub async fn changed(&mut self) -> Place {
        // The sender lives in the queue until this ticket is promoted, and the value is
        // final once Running; an error means the sender is gone after a promotion.
        let _ = self.place.changed().await;
        *self.place.borrow_and_update()
    }
}

impl Ticket {
    /// Gives the place or slot back now. In cluster mode this waits until the shared queue has
    /// it back (dropping the ticket does that in the background), so an answer's `done` event
    /// never comes before its slot is free.
    pub async fn release(mut self) {
        if let Holder::Shared { line, id } = &self.holder {
            line.leave_now(*id).await;
            self.released = true;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match &self.holder {
            Holder::Local { queue, id, owner } => {
                let was_running = *self.place.borrow() == Place::Running;
                queue.leave(*id, *owner, was_running);
            }
            Holder::Shared { line, id } => line.leave(*id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots_are_taken_at_once_then_the_line_forms_in_order() {
        let queue = GenerationQueue::new(2, 10, 100);
        let a = queue.join(KeyId::new()).unwrap();
        let b = queue.join(KeyId::new()).unwrap();
        let c = queue.join(KeyId::new()).unwrap();
        let d = queue.join(KeyId::new()).unwrap();
        assert_eq!(a.place(), Place::Running);
        assert_eq!(b.place(), Place::Running);
        assert_eq!(c.place(), Place::Waiting(1));
        assert_eq!(d.place(), Place::Waiting(2));
        assert_eq!(queue.load(), (2, 2));
        drop(a);
        assert_eq!(c.place(), Place::Running);
        assert_eq!(d.place(), Place::Waiting(1));
        drop(b);
        assert_eq!(d.place(), Place::Running);
        assert_eq!(queue.load(), (2, 0));
    }

    #[test]
    fn leaving_the_line_moves_those_behind_up_and_frees_nothing() {
        let queue = GenerationQueue::new(1, 10, 100);
        let running = queue.join(KeyId::new()).unwrap();
        let first = queue.join(KeyId::new()).unwrap();
        let second = queue.join(KeyId::new()).unwrap();
        let third = queue.join(KeyId::new()).unwrap();
        drop(first);
        assert_eq!(second.place(), Place::Waiting(1));
        assert_eq!(third.place(), Place::Waiting(2));
        assert_eq!(running.place(), Place::Running);
        assert_eq!(queue.load(), (1, 2));
    }

    #[test]
    fn a_full_line_refuses_and_a_newcomer_never_jumps_it() {
        let queue = GenerationQueue::new(1, 2, 100);
        let running = queue.join(KeyId::new()).unwrap();
        let _w1 = queue.join(KeyId::new()).unwrap();
        let _w2 = queue.join(KeyId::new()).unwrap();
        assert_eq!(
            queue.join(KeyId::new()).unwrap_err(),
            QueueFull::Line { max_waiting: 2 }
        );
        drop(running);
        // The slot went to the head of the line, not to whoever asks next.
        assert_eq!(queue.load(), (1, 1));
        let late = queue.join(KeyId::new()).unwrap();
        assert_eq!(late.place(), Place::Waiting(2));
    }

    #[tokio::test]
    async fn a_waiter_is_told_each_new_place_then_its_turn() {
        let queue = GenerationQueue::new(1, 10, 100);
        let mut holders = vec![queue.join(KeyId::new()).unwrap()];
        holders.push(queue.join(KeyId::new()).unwrap());
        holders.push(queue.join(KeyId::new()).unwrap());
        let mut last = queue.join(KeyId::new()).unwrap();
        assert_eq!(last.place(), Place::Waiting(3));
        let watcher = tokio::spawn(async move {
            let mut seen = vec![last.place()];
            loop {
                let place = last.changed().await;
                seen.push(place);
                if place == Place::Running {
                    return seen;
                }
            }
        });
        for _ in 0..3 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            holders.remove(0);
        }
        let seen = watcher.await.unwrap();
        assert_eq!(
            seen,
            [
                Place::Waiting(3),
                Place::Waiting(2),
                Place::Waiting(1),
                Place::Running
            ]
        );
    }

    #[test]
    fn many_tickets_dropped_in_any_order_leave_the_queue_empty() {
        let queue = GenerationQueue::new(3, 100, 100);
        let mut tickets: Vec<Ticket> = (0..50).map(|_| queue.join(KeyId::new()).unwrap()).collect();
        // Drop from the middle, the front and the back in turn.
        let mut k = 7usize;
        while !tickets.is_empty() {
            k = (k * 31 + 11) % tickets.len().max(1);
            tickets.remove(k % tickets.len());
            let (running, waiting) = queue.load();
            assert_eq!(running, tickets.len().min(3));
            assert_eq!(waiting, tickets.len().saturating_sub(3));
            let places: Vec<Place> = tickets.iter().map(Ticket::place).collect();
            let waiting_places: Vec<usize> = places
                .iter()
                .filter_map(|p| match p {
                    Place::Waiting(n) => Some(*n),
                    Place::Running => None,
                })
                .collect();
            let mut sorted = waiting_places.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (1..=waiting_places.len()).collect::<Vec<_>>());
        }
        assert_eq!(queue.load(), (0, 0));
    }

    #[test]
    fn one_key_holds_at_most_its_share_and_others_still_get_in() {
        let queue = GenerationQueue::new(1, 10, 2);
        let busy = KeyId::new();
        let first = queue.join(busy).unwrap();
        let _second = queue.join(busy).unwrap();
        assert_eq!(
            queue.join(busy).unwrap_err(),
            QueueFull::Key { max_per_key: 2 }
        );
        // Another key is not refused for the busy key's share.
        let other = queue.join(KeyId::new()).unwrap();
        assert_eq!(other.place(), Place::Waiting(2));
        // A finished question gives the key its place back.
        drop(first);
        let third = queue.join(busy).unwrap();
        assert_eq!(third.place(), Place::Waiting(2));
    }
}
