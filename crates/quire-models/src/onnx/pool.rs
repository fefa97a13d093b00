//! Sessions lent one call at a time: a call takes whichever session is free, and when every one
//! is busy it waits for the first one given back, whichever that is.
//!
//! Why not a lock per session: a call that found every session busy used to queue on one chosen
//! session. With three ingest workers on two sessions, the third then often waited for the
//! session still computing while the other one stood idle until its own caller came back with
//! the next document (`docs/performance.md`, "Sessions taken as they free, kernels chosen by
//! the CPU").

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Items lent to one caller at a time.
pub(crate) struct Pool<T> {
    items: Vec<Mutex<T>>,
    /// The indexes of the items not lent.
    free: Mutex<Vec<usize>>,
    /// Signalled each time an item is given back.
    given_back: Condvar,
}

impl<T> Pool<T> {
    /// A pool of `items`; it must hold at least one, or [`Pool::take`] waits for ever. The items
    /// must keep no state from one call to the next (an ONNX Runtime session does not): an item
    /// whose caller panicked is lent again as it is.
    pub(crate) fn new(items: Vec<T>) -> Self {
        debug_assert!(!items.is_empty(), "a pool needs at least one item");
        Self {
            // Popped from the end: the first item is lent first.
            free: Mutex::new((0..items.len()).rev().collect()),
            items: items.into_iter().map(Mutex::new).collect(),
            given_back: Condvar::new(),
        }
    }

    /// How many items the pool holds.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// A free item, or, when every one is lent, the first one given back. It returns to the
    /// pool when the [`Lent`] is dropped.
    pub(crate) fn take(&self) -> Lent<'_, T> {
        // The list is only pushed to and popped from, so a panic elsewhere cannot leave it
        // inconsistent: a poisoned lock is still a good list.
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let index = loop {
            if let Some(index) = free.pop() {
                break index;
            }
            free = self
                .given_back
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        };
        drop(free);
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
}

/// An item taken from a [`Pool`].
pub(crate) struct Lent<'a, T> {
    // Fields drop in order: the item's lock is released before its index is given back, so
    // the next caller never waits on the lock.
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

/// Puts an index back on the free list when dropped, also when the call unwinds.
struct GiveBack<'a, T> {
    pool: &'a Pool<T>,
    index: usize,
}

impl<T> Drop for GiveBack<'_, T> {
    fn drop(&mut self) {
        let mut free = self
            .pool
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        free.push(self.index);
        drop(free);
        self.pool.given_back.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn callers_side_by_side_get_different_items() {
        let pool = Pool::new(vec!["a", "b"]);
        let first = pool.take();
        let second = pool.take();
        assert_ne!(*first, *second);
        assert_eq!(pool.len(), 2);
    }

    /// The property the pool exists for: a waiting caller gets the item given back first,
    /// while another item is still lent, whichever of the two that is.
    #[test]
    fn a_waiting_caller_gets_the_first_item_given_back() {
        for give_back_first in [0, 1] {
            let pool = Pool::new(vec![0, 1]);
            let mut lent = vec![pool.take(), pool.take()];
            lent.sort_by_key(|item| **item);
            std::thread::scope(|scope| {
                let (sent, received) = mpsc::channel();
                let pool = &pool;
                scope.spawn(move || {
                    let item = pool.take();
                    sent.send(*item).unwrap();
                });
                std::thread::sleep(Duration::from_millis(50));
                assert!(received.try_recv().is_err(), "every item is lent: it waits");
                let still_lent = lent.remove(1 - give_back_first);
                drop(lent);
                let got = received.recv_timeout(Duration::from_secs(5)).unwrap();
                assert_eq!(got, give_back_first, "it took the item given back");
                assert_eq!(*still_lent, 1 - give_back_first);
            });
        }
    }

    /// A session keeps nothing from a call, so one whose caller panicked is as good as before:
    /// refusing it would fail every later call that drew it, while the others idle.
    #[test]
    fn an_item_whose_caller_panicked_is_lent_again() {
        let pool = Pool::new(vec![0, 1]);
        let panicked = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _item = pool.take();
                    panic!("a call failed");
                })
                .join()
        });
        assert!(panicked.is_err());
        let first = pool.take();
        let second = pool.take();
        let mut both = [*first, *second];
        both.sort_unstable();
        assert_eq!(both, [0, 1]);
    }
}
