//! Login throttling: sliding one-minute windows over failed sign-ins, per canonical
//! username (5) and per client address (20), checked before any password is verified. The
//! table of keys is bounded; when it is full, a key it does not hold is refused (fail
//! closed). In memory: one server process, reset when it restarts.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);
const PER_USERNAME: usize = 5;
const PER_ADDRESS: usize = 20;
const MAX_KEYS: usize = 2048;

/// Failed sign-ins, by key.
#[derive(Debug, Default)]
pub struct Throttle {
    failures: HashMap<String, VecDeque<Instant>>,
}

fn user_key(username: &str) -> String {
    format!(
        "user:{}",
        stb_control::canonical_username(username).unwrap_or_else(|| "<invalid>".to_owned())
    )
}

fn address_key(address: &str) -> String {
    format!("address:{address}")
}

impl Throttle {
    fn recent(&mut self, key: &str, now: Instant) -> usize {
        match self.failures.get_mut(key) {
            Some(times) => {
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > WINDOW)
                {
                    times.pop_front();
                }
                times.len()
            }
            None => 0,
        }
    }

    /// Whether a sign-in as `username` from `address` may be tried now.
    pub fn allows(&mut self, username: &str, address: &str, now: Instant) -> bool {
        let (user, addr) = (user_key(username), address_key(address));
        if self.failures.len() >= MAX_KEYS {
            self.failures.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) <= WINDOW)
            });
            if self.failures.len() >= MAX_KEYS && !self.failures.contains_key(&user) {
                return false;
            }
        }
        self.recent(&user, now) < PER_USERNAME && self.recent(&addr, now) < PER_ADDRESS
    }

    /// Counts a failed sign-in.
    pub fn failed(&mut self, username: &str, address: &str, now: Instant) {
        for key in [user_key(username), address_key(address)] {
            if self.failures.len() < MAX_KEYS || self.failures.contains_key(&key) {
                self.failures.entry(key).or_default().push_back(now);
            }
        }
    }

    /// A success clears the username's failures (not the address's).
    pub fn succeeded(&mut self, username: &str) {
        self.failures.remove(&user_key(username));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_per_username_and_twenty_per_address_within_a_minute() {
        let mut throttle = Throttle::default();
        let start = Instant::now();
        for _ in 0..5 {
            assert!(throttle.allows(" Alice ", "10.0.0.1", start));
            throttle.failed("ALICE", "10.0.0.1", start);
        }
        assert!(
            !throttle.allows("alice", "10.0.0.2", start),
            "the name is shared"
        );
        assert!(
            throttle.allows("bob", "10.0.0.1", start),
            "the address has room"
        );
        // A minute later the window has slid past them.
        assert!(throttle.allows("alice", "10.0.0.1", start + WINDOW + Duration::from_secs(1)));
        let mut throttle = Throttle::default();
        for i in 0..20 {
            throttle.failed(&format!("user{i}"), "10.0.0.9", start);
        }
        assert!(!throttle.allows("someone", "10.0.0.9", start));
        // Invalid names share one bucket.
        let mut throttle = Throttle::default();
        for bad in [".a", ".b", ".c", ".d", ".e"] {
            throttle.failed(bad, &format!("{bad}-addr"), start);
        }
        assert!(!throttle.allows(".f", "elsewhere", start));
    }

    #[test]
    fn success_clears_the_name_and_a_full_table_fails_closed() {
        let mut throttle = Throttle::default();
        let now = Instant::now();
        for _ in 0..5 {
            throttle.failed("carol", "10.0.0.3", now);
        }
        throttle.succeeded("carol");
        assert!(throttle.allows("carol", "10.0.0.3", now));
        let mut full = Throttle::default();
        for i in 0..MAX_KEYS {
            full.failed(&format!("u{i}"), "same", now);
        }
        assert!(!full.allows("newcomer", "other", now), "fails closed");
    }
}
