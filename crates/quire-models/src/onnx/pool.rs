//! Sessions lent one call at a time, handed to waiting calls in the order they came.
//!
//! Why: with a lock per session, a call that found every session busy queued on one chosen
//! session, so it could wait while the other one stood idle. And a lock is not fair. A caller
//! woken when it is released can find that a newly arrived call took it first, and then it
//! waits again at the back of the line. Under 32 concurrent searches, each embedding its query
//! alone (int8), that put some searches several turns behind and raised the 99th percentile of
//! their latency; `quire bench queries` measures it (`docs/performance.md`, "Sessions handed
//! over in order").
//!
//! Here a session given back goes straight to the call that has waited longest, and a new call
//! takes a free session only when no call waits. An earlier pool with a free list and a
//! condition variable but no order among its waiters was reverted (`7c8dfa1`).

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Items lent to one caller at a time, in order of arrival when callers wait.
pub(crate) struct Pool<T> {
    items: Vec<Mutex<T>>,
    turns: Mutex<Turns>,
}

/// Which items are free and who waits for one. Never both: an item given back while a caller
/// waits goes to that caller.
struct Turns {
    free: Vec<usize>,
    /// Where to hand an item to each waiting caller, the longest-waiting first.
    waiting: VecDeque<SyncSender<usize>>,
}

impl<T> Pool<T> {
    /// A pool of `items`; it must hold at least one, or [`Pool::take`] waits for ever. The items
    /// must keep no state from one call to the next (an ONNX Runtime session does not): an item
    /// whose caller panicked is lent again as it is.
    pub(crate) fn new(items: Vec<T>) -> Self {
        debug_assert!(!items.is_empty(), "a pool needs at least one item");
        Self {
            turns: Mutex::new(Turns {
                // Popped from the end: the first item is lent first.
                free: (0..items.len()).rev().collect(),
                waiting: VecDeque::new(),
            }),
            items: items.into_iter().map(Mutex::new).collect(),
        }
    }

    /// How many items the pool holds.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// A free item, or, when every one is lent, the one given back when every caller that came
    /// earlier has had its own. It returns to the pool when the [`Lent`] is dropped.
    pub(crate) fn take(&self) -> Lent<'_, T> {
        let mut turns = self.turns();
        let index = match turns.free.pop() {
            Some(index) => index,
            None => {
                let (hand, handed) = sync_channel(1);
                turns.waiting.push_back(hand);
                drop(turns);
                // The sender is dropped only after it has sent (`give_back`), and the pool
                // outlives this borrow of it.
                handed
                    .recv()
                    .unwrap_or_else(|_| unreachable!("a waiting caller is always handed an item"))
            }
        };
        let give_back = GiveBack { pool: self, index };
        // Nobody else holds this lock: the index was ours alone.
        let item = self.items[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Lent {
            item,
            _give_back: give_back,
        }
    }

    /// Hands item `index` to the longest-waiting caller, or frees it when none waits.
    fn give_back(&self, index: usize) {
        let mut turns = self.turns();
        match turns.waiting.pop_front() {
            // The channel holds one item and is sent to once: the send cannot block, and its
            // receiver waits until it arrives.
            Some(hand) => {
                let _ = hand.send(index);
            }
            None => turns.free.push(index),
        }
    }

    fn turns(&self) -> MutexGuard<'_, Turns> {
        // The lists are only pushed to and popped from, so a panic elsewhere cannot leave them
        // inconsistent: a poisoned lock still holds good lists.
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An item taken from a [`Pool`].
pub(crate) struct Lent<'a, T> {
    // Fields drop in order: the item's lock is released before the item is given back, so the
    // next caller never waits on the lock.
    item: MutexGuard<'a, T>,
    _give_back: GiveBack<'a, T>,
}

impl<T> Deref for Lent<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T> DerefMut for Lent<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.item
    }
}

/// Gives an item back when dropped, also when the call unwinds.
struct GiveBack<'a, T> {
    pool: &'a Pool<T>,
    index: usize,
}

impl<T> Drop for GiveBack<'_, T> {
    fn drop(&mut self) {
        self.pool.give_back(self.index);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use super::*;

    #[test]
    fn callers_side_by_side_get_different_items() {
        let pool = Pool::new(vec!["a", "b"]);
        let first = pool.take();
        let second = pool.take();
        assert_ne!(*first, *second);
        drop(first);
        let third = pool.take();
        assert_ne!(*third, *second);
    }

    /// A caller that waits gets the first item given back, whichever it is.
    #[test]
    fn a_waiting_caller_gets_whichever_item_is_given_back() {
        let pool = Arc::new(Pool::new(vec![0, 1]));
        let (first, second) = (pool.take(), pool.take());
        let (sent, received) = mpsc::channel();
        let waiter = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || sent.send(*pool.take()).unwrap())
        };
        wait_until_waiting(&pool, 1);
        drop(second);
        assert_eq!(received.recv_timeout(Duration::from_secs(10)), Ok(1));
        waiter.join().unwrap();
        drop(first);
    }

    /// Waiting callers are served in the order they came.
    #[test]
    fn waiting_callers_are_served_in_the_order_they_came() {
        let pool = Arc::new(Pool::new(vec!["only"]));
        let held = pool.take();
        let (sent, order) = mpsc::channel();
        let mut waiters = Vec::new();
        for caller in 0..4 {
            let (shared, sent) = (Arc::clone(&pool), sent.clone());
            waiters.push(std::thread::spawn(move || {
                let _item = shared.take();
                sent.send(caller).unwrap();
            }));
            wait_until_waiting(&pool, caller + 1);
        }
        drop(held);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        let served: Vec<usize> = order.try_iter().collect();
        assert_eq!(served, [0, 1, 2, 3]);
    }

    /// An item given back while a caller waits goes to that caller at once: it is never free
    /// for a caller that arrives before the waiting one wakes, so nobody loses a turn.
    #[test]
    fn an_item_given_back_while_a_caller_waits_is_never_free_for_a_newcomer() {
        let pool = Arc::new(Pool::new(vec!["only"]));
        let held = pool.take();
        let waiter = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || drop(pool.take()))
        };
        wait_until_waiting(&pool, 1);
        drop(held);
        {
            let turns = pool.turns();
            assert!(
                turns.free.is_empty(),
                "the item was left for anyone to take"
            );
            assert!(turns.waiting.is_empty());
        }
        waiter.join().unwrap();
        assert_eq!(
            pool.turns().free,
            [0],
            "given back once the waiter was done"
        );
    }

    #[test]
    fn an_item_whose_caller_panicked_is_lent_again() {
        let pool = Arc::new(Pool::new(vec![7]));
        let caller = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                let _item = pool.take();
                panic!("the call failed");
            })
        };
        assert!(caller.join().is_err());
        assert_eq!(*pool.take(), 7);
    }

    fn wait_until_waiting<T>(pool: &Pool<T>, callers: usize) {
        for _ in 0..1000 {
            if pool.turns().waiting.len() >= callers {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("{callers} callers never waited");
    }
}
