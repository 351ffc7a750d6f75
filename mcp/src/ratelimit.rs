//! Per-client-address rate limit of tool calls on HTTP: a sliding window of
//! one minute.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The default: calls per minute per client address.
pub const DEFAULT_PER_MINUTE: u32 = 30;
const WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct RateLimiter {
    per_minute: u32,
    calls: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> Self {
        RateLimiter { per_minute, calls: Mutex::new(HashMap::new()) }
    }

    /// Counts one call; `Err(message)` when the client is over the limit.
    pub fn check(&self, client: IpAddr) -> Result<(), String> {
        self.check_at(client, Instant::now())
    }

    fn check_at(&self, client: IpAddr, now: Instant) -> Result<(), String> {
        let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if calls.len() > 10_000 {
            calls.retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
        }
        let q = calls.entry(client.to_canonical()).or_default();
        while q.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            q.pop_front();
        }
        if q.len() >= self.per_minute as usize {
            let oldest = q.front().copied().unwrap_or(now);
            let wait = (WINDOW.saturating_sub(now.duration_since(oldest)).as_millis() as u64).div_ceil(1000).max(1);
            return Err(rate_limited(self.per_minute, wait));
        }
        q.push_back(now);
        Ok(())
    }
}

/// The tool error of a rate-limited call.
pub fn rate_limited(per_minute: u32, retry_after_secs: u64) -> String {
    format!(
        "Rate limit exceeded: at most {per_minute} tool calls per minute per client address. Retry in {retry_after_secs} seconds."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_slides() {
        let limiter = RateLimiter::new(2);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        assert!(limiter.check_at(ip, t0).is_ok());
        assert!(limiter.check_at(ip, t0 + Duration::from_secs(10)).is_ok());
        assert_eq!(
            limiter.check_at(ip, t0 + Duration::from_secs(20)).unwrap_err(),
            "Rate limit exceeded: at most 2 tool calls per minute per client address. Retry in 40 seconds."
        );
        assert!(limiter.check_at(other, t0 + Duration::from_secs(20)).is_ok());
        assert!(limiter.check_at(ip, t0 + Duration::from_secs(61)).is_ok());
    }
}
