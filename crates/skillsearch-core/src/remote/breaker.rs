//! A circuit breaker for a remote endpoint (embeddings, chat model, hub). An endpoint that is
//! down or hangs would otherwise cost every turn its whole deadline; after [`THRESHOLD`] calls
//! in a row fail, calls are refused at once for a cool-down (5 s, doubling while it keeps
//! failing, at most 5 min), then one call tries again: success closes the breaker, failure
//! opens it for twice as long. It lives in the client, so only a long-lived process (daemon,
//! MCP server) profits; a hook process sees each endpoint afresh.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures in a row that open the breaker.
pub const THRESHOLD: u32 = 3;
/// The first cool-down.
pub const FIRST_COOL_DOWN: Duration = Duration::from_secs(5);
/// The longest cool-down.
pub const MAX_COOL_DOWN: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
struct State {
    /// Failures since the last success.
    failures: u32,
    /// While set and in the future, calls are refused.
    open_until: Option<Instant>,
    /// The cool-down the breaker last opened for.
    cool_down: Duration,
    /// A call is trying the endpoint again after a cool-down.
    trial: bool,
    last_error: String,
}

/// See the module documentation. Shared by every clone of its client.
#[derive(Debug, Default)]
pub struct Breaker {
    state: Mutex<State>,
}

impl Breaker {
    pub fn new() -> Self {
        Self::default()
    }

    /// `Err(why)` while the breaker refuses calls. Once a cool-down has passed, the first
    /// caller goes through as the trial and the others keep being refused until it ends.
    pub fn check(&self) -> Result<(), String> {
        self.check_at(Instant::now())
    }

    fn check_at(&self, now: Instant) -> Result<(), String> {
        let Ok(mut s) = self.state.lock() else {
            return Ok(());
        };
        match s.open_until {
            Some(until) if now < until => Err(format!(
                "not called: its last {} calls failed (the last: {}); trying again in {} s",
                s.failures,
                s.last_error,
                until.duration_since(now).as_secs_f64().ceil() as u64
            )),
            Some(_) => {
                // The trial: others are refused while it runs (at most another cool-down, in
                // case its caller never reports back).
                let hold = s.cool_down;
                s.open_until = Some(now + hold);
                s.trial = true;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A call succeeded: the breaker closes.
    pub fn success(&self) {
        if let Ok(mut s) = self.state.lock() {
            *s = State::default();
        }
    }

    /// A call failed with `error`.
    pub fn failure(&self, error: &str) {
        self.failure_at(error, Instant::now());
    }

    fn failure_at(&self, error: &str, now: Instant) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        s.failures = s.failures.saturating_add(1);
        s.last_error = crate::tokens::prefix_chars(error, 200).to_owned();
        if s.trial {
            s.trial = false;
            s.cool_down = (s.cool_down * 2).min(MAX_COOL_DOWN);
            s.open_until = Some(now + s.cool_down);
        } else if s.open_until.is_none() && s.failures >= THRESHOLD {
            s.cool_down = FIRST_COOL_DOWN;
            s.open_until = Some(now + s.cool_down);
        }
        // Otherwise a call that began before the breaker opened: it neither opens it again
        // nor lengthens the cool-down.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_three_failures_in_a_row_and_backs_off_while_the_trials_fail() {
        let b = Breaker::new();
        let t0 = Instant::now();
        for _ in 0..2 {
            b.failure_at("connection refused", t0);
            assert!(b.check_at(t0).is_ok(), "two failures leave it closed");
        }
        b.success();
        b.failure_at("connection refused", t0);
        b.failure_at("connection refused", t0);
        assert!(
            b.check_at(t0).is_ok(),
            "a success in between resets the count"
        );
        b.failure_at("no complete reply within 400 ms", t0);
        let why = b.check_at(t0).unwrap_err();
        assert_eq!(
            why,
            "not called: its last 3 calls failed (the last: no complete reply within 400 ms); \
             trying again in 5 s"
        );
        assert!(b.check_at(t0 + Duration::from_millis(4_900)).is_err());
        // Calls that were already running when it opened do not lengthen the cool-down.
        b.failure_at("connection refused", t0);
        b.failure_at("connection refused", t0);
        // After the cool-down one trial goes through; the others are still refused meanwhile.
        let t1 = t0 + FIRST_COOL_DOWN;
        assert!(b.check_at(t1).is_ok());
        assert!(b.check_at(t1 + Duration::from_millis(100)).is_err());
        // The trial failed: twice as long.
        b.failure_at("connection refused", t1);
        assert!(b.check_at(t1 + Duration::from_millis(9_900)).is_err());
        let t2 = t1 + 2 * FIRST_COOL_DOWN;
        assert!(b.check_at(t2).is_ok());
        // The cool-down never passes the ceiling.
        let mut t = t2;
        for _ in 0..20 {
            b.failure_at("down", t);
            t += MAX_COOL_DOWN;
            assert!(b.check_at(t).is_ok());
        }
        b.failure_at("down", t);
        assert!(
            b.check_at(t + MAX_COOL_DOWN - Duration::from_secs(1))
                .is_err()
        );
        assert!(b.check_at(t + MAX_COOL_DOWN).is_ok());
        // A success closes it.
        b.success();
        assert!(b.check_at(t + MAX_COOL_DOWN).is_ok());
        assert!(b.check_at(t + MAX_COOL_DOWN).is_ok());
    }
}
