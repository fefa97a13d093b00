//! Per-key rate limits for search and generate: fixed one-minute windows aligned to the clock's
//! minutes, counted in the store (so the CLI, restarts and, with a shared database, other nodes
//! all see the same counts), with time from the injected clock.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use quire_core::{ApiKeyRecord, Clock};
use quire_store::{RateBucket, RateWindow, Store, StoreError};

use crate::AppError;

const WINDOW_SECONDS: i64 = 60;

/// A key's standing in its current window (the REST API reports it in `X-RateLimit-*`
/// headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitState {
    /// Requests allowed per window.
    pub limit: u32,
    /// Requests left in the window.
    pub remaining: u32,
    /// Unix time (seconds) when the window resets.
    pub reset: i64,
    /// Seconds until then (at least 1).
    pub retry_after: u64,
}

/// Counts requests per key and bucket.
pub struct RateLimiter {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    search_per_minute: u32,
    generate_per_minute: u32,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("search_per_minute", &self.search_per_minute)
            .field("generate_per_minute", &self.generate_per_minute)
            .finish_non_exhaustive()
    }
}

/// Whether a request may proceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Within the limit.
    Allowed(RateLimitState),
    /// Over the limit.
    Limited(RateLimitState),
}

impl RateLimiter {
    /// A limiter with the configured default limits (a key's own limit overrides both).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        search_per_minute: u32,
        generate_per_minute: u32,
    ) -> Self {
        Self {
            store,
            clock,
            search_per_minute,
            generate_per_minute,
        }
    }

    fn limit_for(&self, key: &ApiKeyRecord, bucket: RateBucket) -> u32 {
        key.rate_limit.unwrap_or(match bucket {
            RateBucket::Search => self.search_per_minute,
            RateBucket::Generate => self.generate_per_minute,
        })
    }

    fn window(&self, key: &ApiKeyRecord, bucket: RateBucket) -> (RateWindow, DateTime<Utc>) {
        let now = self.clock.now();
        let start_secs = now.timestamp().div_euclid(WINDOW_SECONDS) * WINDOW_SECONDS;
        let start = Utc.timestamp_opt(start_secs, 0).single().unwrap_or(now);
        (
            RateWindow {
                key: key.id,
                bucket,
                start,
            },
            now,
        )
    }

    fn state(
        &self,
        limit: u32,
        used: u64,
        window: &RateWindow,
        now: DateTime<Utc>,
    ) -> RateLimitState {
        let reset = window.start.timestamp() + WINDOW_SECONDS;
        let until_reset_ms = (reset * 1000 - now.timestamp_millis()).max(1);
        RateLimitState {
            limit,
            remaining: u32::try_from(u64::from(limit).saturating_sub(used)).unwrap_or(0),
            reset,
            retry_after: u64::try_from(until_reset_ms).unwrap_or(1).div_ceil(1000),
        }
    }

    /// The standing reported where no key is known (a 401, an unknown path, the version
    /// endpoint): the default limit, nothing counted, the current window's end.
    pub fn unauthenticated(&self) -> RateLimitState {
        let now = self.clock.now();
        let reset = now.timestamp().div_euclid(WINDOW_SECONDS) * WINDOW_SECONDS + WINDOW_SECONDS;
        let limit = self.search_per_minute.min(self.generate_per_minute);
        let until_reset_ms = (reset * 1000 - now.timestamp_millis()).max(1);
        RateLimitState {
            limit,
            remaining: limit,
            reset,
            retry_after: u64::try_from(until_reset_ms).unwrap_or(1).div_ceil(1000),
        }
    }

    /// Counts one request of `bucket` for `key` and decides whether it may proceed.
    pub async fn hit(
        &self,
        key: &ApiKeyRecord,
        bucket: RateBucket,
    ) -> Result<Decision, StoreError> {
        let limit = self.limit_for(key, bucket);
        let (window, now) = self.window(key, bucket);
        let used = self.store.hit_rate_window(&window).await?;
        let state = self.state(limit, used, &window, now);
        Ok(if used > u64::from(limit) {
            metrics::counter!("quire_rate_limit_rejections_total", "bucket" => bucket.as_str())
                .increment(1);
            Decision::Limited(state)
        } else {
            Decision::Allowed(state)
        })
    }

    /// The key's standing without counting a request: of its two buckets, the one with fewer
    /// requests left. Reported on endpoints that are not rate limited.
    pub async fn peek(&self, key: &ApiKeyRecord) -> Result<RateLimitState, StoreError> {
        let mut tightest: Option<RateLimitState> = None;
        for bucket in [RateBucket::Search, RateBucket::Generate] {
            let (window, now) = self.window(key, bucket);
            let used = self.store.peek_rate_window(&window).await?;
            let state = self.state(self.limit_for(key, bucket), used, &window, now);
            if tightest.is_none_or(|t| state.remaining < t.remaining) {
                tightest = Some(state);
            }
        }
        Ok(tightest.expect("two buckets were checked"))
    }
}

/// Counts one request of `bucket` for `key`: `Ok` with the key's standing when it may proceed,
/// [`AppError::RateLimited`] when it is over its limit.
pub async fn admit(
    limiter: &RateLimiter,
    key: &ApiKeyRecord,
    bucket: RateBucket,
) -> Result<RateLimitState, AppError> {
    match limiter.hit(key, bucket).await? {
        Decision::Allowed(state) => Ok(state),
        Decision::Limited(state) => Err(AppError::RateLimited(state)),
    }
}
