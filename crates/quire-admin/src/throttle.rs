//! The sign-in throttle: failures per client address within a sliding 15-minute window, kept
//! in memory (a restart forgets them, which only ever lets a guesser start over at 5 tries).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

/// Failed attempts allowed per address within [`WINDOW_MINUTES`].
pub const MAX_FAILURES: usize = 5;
/// Failed attempts allowed from all addresses together within the window.
pub const MAX_GLOBAL_FAILURES: usize = 100;
/// Length of the window, in minutes.
pub const WINDOW_MINUTES: i64 = 15;

/// Counts failed sign-ins; time comes from the caller (the service's clock).
#[derive(Debug, Default)]
pub struct SignInThrottle {
    inner: Mutex<Failures>,
}

#[derive(Debug, Default)]
struct Failures {
    by_client: HashMap<Option<IpAddr>, VecDeque<DateTime<Utc>>>,
    all: VecDeque<DateTime<Utc>>,
}

fn forget_before(times: &mut VecDeque<DateTime<Utc>>, cutoff: DateTime<Utc>) {
    while times.front().is_some_and(|t| *t <= cutoff) {
        times.pop_front();
    }
}

impl SignInThrottle {
    fn lock(&self) -> std::sync::MutexGuard<'_, Failures> {
        // A panic while holding the lock leaves consistent data (plain pushes and pops).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When `client` may try again, if it is locked out now.
    pub fn locked_until(
        &self,
        client: Option<IpAddr>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let window = Duration::minutes(WINDOW_MINUTES);
        let mut failures = self.lock();
        let cutoff = now - window;
        forget_before(&mut failures.all, cutoff);
        let global = (failures.all.len() >= MAX_GLOBAL_FAILURES)
            .then(|| failures.all[failures.all.len() - MAX_GLOBAL_FAILURES] + window);
        let mine = failures.by_client.get_mut(&client).and_then(|times| {
            forget_before(times, cutoff);
            (times.len() >= MAX_FAILURES).then(|| times[times.len() - MAX_FAILURES] + window)
        });
        global.max(mine)
    }

    /// Counts a failed attempt.
    pub fn record_failure(&self, client: Option<IpAddr>, now: DateTime<Utc>) {
        let mut failures = self.lock();
        failures.all.push_back(now);
        failures.by_client.entry(client).or_default().push_back(now);
        // Addresses that stopped trying are forgotten so the map cannot grow without end.
        let cutoff = now - Duration::minutes(WINDOW_MINUTES);
        failures.by_client.retain(|_, times| {
            forget_before(times, cutoff);
            !times.is_empty()
        });
    }

    /// A successful sign-in clears the address's failures.
    pub fn record_success(&self, client: Option<IpAddr>) {
        self.lock().by_client.remove(&client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_lock_one_address_for_the_window() {
        let throttle = SignInThrottle::default();
        let start = DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap();
        let me: Option<IpAddr> = Some([10, 0, 0, 1].into());
        let other: Option<IpAddr> = Some([10, 0, 0, 2].into());
        for i in 0..5 {
            assert_eq!(throttle.locked_until(me, start), None);
            throttle.record_failure(me, start + Duration::minutes(i));
        }
        let at = start + Duration::minutes(5);
        assert_eq!(
            throttle.locked_until(me, at),
            Some(start + Duration::minutes(15))
        );
        assert_eq!(throttle.locked_until(other, at), None);
        assert_eq!(
            throttle.locked_until(me, start + Duration::minutes(15)),
            None
        );
        throttle.record_success(me);
        assert_eq!(throttle.locked_until(me, at), None);
    }
}
