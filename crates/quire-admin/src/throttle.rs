//! The sign-in throttle: failures per client address within a sliding 15-minute window, kept
//! in memory (a restart forgets them, which only ever lets a guesser start over at 5 tries).
//!
//! - An attempt is reserved, counted as a failure, atomically *before* the password is
//!   verified, so parallel attempts cannot all slip through one free place; a successful
//!   sign-in takes its reservation back.
//! - Verifications (Argon2id, about 19 MiB and tens of milliseconds each) run at most
//!   [`MAX_VERIFYING`] at a time; an attempt that finds none free within [`VERIFY_WAIT`] is
//!   refused like a throttled one and its reservation taken back.
//! - The global backstop ([`MAX_GLOBAL_FAILURES`] failures from all addresses together) only
//!   holds back addresses that have failed themselves within the window: an address with a
//!   clean record can always try, so the administrator is never locked out for good by
//!   someone else's guessing.
//! - Setting a new password (`quire admin set-password`, also while the server runs) clears
//!   every failure: the next attempt sees a changed hash and starts afresh. Behind a reverse
//!   proxy, where every client shares the proxy's address, that is the way back in.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Failed attempts allowed per address within [`WINDOW_MINUTES`].
pub const MAX_FAILURES: usize = 5;
/// Failed attempts from all addresses together within the window after which addresses with
/// failures of their own must wait.
pub const MAX_GLOBAL_FAILURES: usize = 100;
/// Length of the window, in minutes.
pub const WINDOW_MINUTES: i64 = 15;
/// Password verifications running at once.
pub const MAX_VERIFYING: usize = 2;
/// Longest wait for a verification slot before the attempt is refused.
pub const VERIFY_WAIT: StdDuration = StdDuration::from_secs(2);

/// Counts failed sign-ins; time comes from the caller (the service's clock).
#[derive(Debug)]
pub struct SignInThrottle {
    inner: Mutex<Failures>,
    verifying: Semaphore,
}

impl Default for SignInThrottle {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Failures::default()),
            verifying: Semaphore::new(MAX_VERIFYING),
        }
    }
}

#[derive(Debug, Default)]
struct Failures {
    by_client: HashMap<Option<IpAddr>, VecDeque<DateTime<Utc>>>,
    all: VecDeque<DateTime<Utc>>,
    /// The password hash the failures were counted against.
    password: Option<String>,
}

/// A reserved attempt: counted as a failure until [`SignInThrottle::succeeded`] or
/// [`SignInThrottle::withdraw`] takes it back.
#[derive(Debug)]
#[must_use = "a reservation is a counted failure until it is taken back"]
pub struct Reservation {
    client: Option<IpAddr>,
    at: DateTime<Utc>,
}

/// Why an attempt may not go ahead now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Too many failures: try again at this time.
    LockedUntil(DateTime<Utc>),
    /// Every verification slot stayed busy.
    Busy,
}

fn forget_before(times: &mut VecDeque<DateTime<Utc>>, cutoff: DateTime<Utc>) {
    while times.front().is_some_and(|t| *t <= cutoff) {
        times.pop_front();
    }
}

/// Removes one occurrence of `at` (the newest first).
fn take_back(times: &mut VecDeque<DateTime<Utc>>, at: DateTime<Utc>) {
    if let Some(i) = times.iter().rposition(|t| *t == at) {
        times.remove(i);
    }
}

impl SignInThrottle {
    fn lock(&self) -> std::sync::MutexGuard<'_, Failures> {
        // A panic while holding the lock leaves consistent data (plain pushes and pops).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets every failure when the stored password hash is not the one they were counted
    /// against (a new password was set).
    pub fn password_is(&self, hash: &str) {
        let mut failures = self.lock();
        if failures.password.as_deref() != Some(hash) {
            failures.by_client.clear();
            failures.all.clear();
            failures.password = Some(hash.to_owned());
        }
    }

    /// Reserves an attempt for `client`, or says until when it is locked out.
    pub fn reserve(
        &self,
        client: Option<IpAddr>,
        now: DateTime<Utc>,
    ) -> Result<Reservation, DateTime<Utc>> {
        let window = Duration::minutes(WINDOW_MINUTES);
        let cutoff = now - window;
        let mut failures = self.lock();
        forget_before(&mut failures.all, cutoff);
        let mine = failures.by_client.entry(client).or_default();
        forget_before(mine, cutoff);
        let own_lock =
            (mine.len() >= MAX_FAILURES).then(|| mine[mine.len() - MAX_FAILURES] + window);
        let has_failed = !mine.is_empty();
        let global_lock = (has_failed && failures.all.len() >= MAX_GLOBAL_FAILURES)
            .then(|| failures.all[failures.all.len() - MAX_GLOBAL_FAILURES] + window);
        if let Some(until) = own_lock.max(global_lock) {
            return Err(until);
        }
        failures.by_client.entry(client).or_default().push_back(now);
        failures.all.push_back(now);
        // Addresses that stopped trying are forgotten so the map cannot grow without end.
        failures.by_client.retain(|_, times| {
            forget_before(times, cutoff);
            !times.is_empty()
        });
        Ok(Reservation { client, at: now })
    }

    /// Waits (at most [`VERIFY_WAIT`]) for a verification slot.
    pub async fn verification_slot(&self) -> Option<SemaphorePermit<'_>> {
        tokio::time::timeout(VERIFY_WAIT, self.verifying.acquire())
            .await
            .ok()?
            .ok()
    }

    /// Takes back a reservation that was never verified (no slot was free).
    pub fn withdraw(&self, reservation: Reservation) {
        let mut failures = self.lock();
        take_back(&mut failures.all, reservation.at);
        if let Some(times) = failures.by_client.get_mut(&reservation.client) {
            take_back(times, reservation.at);
        }
    }

    /// A successful sign-in: the reservation is taken back and the address's failures cleared.
    pub fn succeeded(&self, reservation: Reservation) {
        let mut failures = self.lock();
        take_back(&mut failures.all, reservation.at);
        failures.by_client.remove(&reservation.client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap()
    }

    #[test]
    fn five_failures_lock_one_address_for_the_window() {
        let throttle = SignInThrottle::default();
        let me: Option<IpAddr> = Some([10, 0, 0, 1].into());
        let other: Option<IpAddr> = Some([10, 0, 0, 2].into());
        for i in 0..5 {
            let _failed = throttle
                .reserve(me, start() + Duration::minutes(i))
                .unwrap();
        }
        let at = start() + Duration::minutes(5);
        assert_eq!(
            throttle.reserve(me, at).unwrap_err(),
            start() + Duration::minutes(15)
        );
        throttle.succeeded(throttle.reserve(other, at).unwrap());
        let later = throttle
            .reserve(me, start() + Duration::minutes(15))
            .unwrap();
        throttle.succeeded(later);
        let _again = throttle.reserve(me, at).unwrap();
    }

    #[test]
    fn parallel_attempts_cannot_pass_one_free_place() {
        let throttle = SignInThrottle::default();
        let me: Option<IpAddr> = Some([10, 0, 0, 1].into());
        // All reserved before any is verified, as parallel requests would be.
        let reserved: Vec<_> = (0..20).map(|_| throttle.reserve(me, start())).collect();
        assert_eq!(reserved.iter().filter(|r| r.is_ok()).count(), MAX_FAILURES);
    }

    #[test]
    fn the_global_backstop_spares_addresses_with_a_clean_record() {
        let throttle = SignInThrottle::default();
        for i in 0..MAX_GLOBAL_FAILURES as u8 {
            let guesser: Option<IpAddr> = Some([10, 1, 0, i].into());
            let _failed = throttle.reserve(guesser, start()).unwrap();
        }
        let guesser: Option<IpAddr> = Some([10, 1, 0, 0].into());
        assert!(throttle.reserve(guesser, start()).is_err());
        let admin: Option<IpAddr> = Some([192, 0, 2, 7].into());
        throttle.succeeded(throttle.reserve(admin, start()).unwrap());
    }

    #[test]
    fn a_new_password_clears_every_failure_and_withdrawn_attempts_do_not_count() {
        let throttle = SignInThrottle::default();
        throttle.password_is("old-hash");
        let me: Option<IpAddr> = None;
        for _ in 0..MAX_FAILURES {
            let _failed = throttle.reserve(me, start()).unwrap();
        }
        assert!(throttle.reserve(me, start()).is_err());
        throttle.password_is("old-hash");
        assert!(throttle.reserve(me, start()).is_err());
        throttle.password_is("new-hash");
        for _ in 0..10 {
            throttle.withdraw(throttle.reserve(me, start()).unwrap());
        }
        let _counted = throttle.reserve(me, start()).unwrap();
    }
}
