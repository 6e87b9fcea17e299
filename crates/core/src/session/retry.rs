//! Whether a failed stream is resumed, and after how long: what cannot recover fails the turn
//! at once (`CoreError::is_retryable`), a server that says when to come back (`Retry-After`,
//! `google.rpc.RetryInfo`) is waited for up to a bound, and anything else backs off
//! exponentially with jitter.

use std::time::Duration;

use super::config::Timing;
use crate::error::CoreError;

/// What the turn does after attempt `attempt` failed.
#[derive(Debug)]
pub(super) enum Decision {
    /// A new stream after this long.
    Resume(Duration),
    /// The turn fails with this error.
    GiveUp(CoreError),
}

pub(super) fn decide(error: CoreError, attempt: u32, timing: &Timing) -> Decision {
    if !error.is_retryable() || attempt >= timing.resume_attempts {
        return Decision::GiveUp(error);
    }
    match error.retry_delay() {
        Some(asked) if asked > timing.retry_after_max => {
            Decision::GiveUp(too_long(error, asked, timing.retry_after_max))
        }
        // Never sooner than the server asked, and never sooner than the back-off either.
        Some(asked) => Decision::Resume(asked.max(backoff(timing, attempt))),
        None => Decision::Resume(backoff(timing, attempt)),
    }
}

/// As [`decide`], knowing whether the failed stream had brought frames (`heard`). A connection
/// lost in the middle of a stream that was answering (a deploy, a load balancer, the network)
/// is resumed at once the first time: the server was there a moment ago, and a second of
/// back-off shows as a reply that stalls. From the second attempt on, for an error the server
/// sent, and for a stream that never brought anything, the back-off as usual.
pub(super) fn decide_after(error: CoreError, attempt: u32, heard: bool, timing: &Timing) -> Decision {
    let lost_mid_stream = heard && matches!(error, CoreError::Network(_) | CoreError::StreamClosed);
    if lost_mid_stream && attempt == 0 && timing.resume_attempts > 0 {
        return Decision::Resume(Duration::ZERO);
    }
    decide(error, attempt, timing)
}

/// `min(base × 2^attempt, max)` plus 0–20 % jitter.
fn backoff(timing: &Timing, attempt: u32) -> Duration {
    let base = timing.resume_backoff.saturating_mul(1u32 << attempt.min(16)).min(timing.resume_backoff_max);
    let jitter = base.mul_f64(rand::random::<f64>() * 0.2);
    base + jitter
}

/// The error, saying how long the server asked to wait and that it is more than this client
/// waits.
fn too_long(error: CoreError, asked: Duration, max: Duration) -> CoreError {
    let note = format!(
        " (the server asks to retry in {} s, longer than the {} s this client waits: try again later)",
        asked.as_secs_f64().ceil(),
        max.as_secs()
    );
    match error {
        CoreError::Server(mut e) => {
            e.message.push_str(&note);
            CoreError::Server(e)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::{Code, ConnectError};

    fn server(code: Code, status: Option<u16>, retry_after: Option<u64>) -> CoreError {
        let mut e = ConnectError::new(code, "busy");
        e.http_status = status;
        e.retry_after = retry_after.map(Duration::from_secs);
        CoreError::from_connect(e)
    }

    #[test]
    fn a_wait_the_server_asks_for_is_honoured_up_to_the_bound() {
        let timing = Timing { resume_backoff: Duration::from_millis(10), ..Timing::default() };
        match decide(server(Code::Unavailable, Some(429), Some(3)), 0, &timing) {
            Decision::Resume(d) => assert!(d >= Duration::from_secs(3) && d < Duration::from_secs(4), "{d:?}"),
            other => panic!("{other:?}"),
        }
        match decide(server(Code::Unavailable, Some(429), Some(3600)), 0, &timing) {
            Decision::GiveUp(e) => {
                assert_eq!(e.code(), "E_SERVER");
                assert!(e.to_string().contains("retry in 3600 s") && e.to_string().contains("60 s"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        // A rate limit that says when to come back is worth the wait; without a delay it is not.
        assert!(matches!(decide(server(Code::ResourceExhausted, None, Some(1)), 0, &timing), Decision::Resume(_)));
        assert!(matches!(decide(server(Code::ResourceExhausted, None, None), 0, &timing), Decision::GiveUp(_)));
    }

    #[test]
    fn what_cannot_recover_is_not_retried() {
        let timing = Timing::default();
        for code in [
            Code::InvalidArgument,
            Code::PermissionDenied,
            Code::NotFound,
            Code::FailedPrecondition,
            Code::Unauthenticated,
            Code::Unimplemented,
        ] {
            assert!(matches!(decide(server(code, None, None), 0, &timing), Decision::GiveUp(_)), "{code:?}");
        }
        // An HTTP 400 without a Connect body maps to `internal`, but the request was refused as sent.
        assert!(matches!(decide(server(Code::Internal, Some(400), None), 0, &timing), Decision::GiveUp(_)));
        assert!(matches!(decide(server(Code::Unavailable, Some(503), None), 0, &timing), Decision::Resume(_)));
        assert!(matches!(decide(CoreError::Unreachable("x".into()), 0, &timing), Decision::GiveUp(_)));
        assert!(matches!(decide(CoreError::Http2Unsupported("x".into()), 0, &timing), Decision::GiveUp(_)));
        assert!(matches!(decide(CoreError::StreamClosed, timing.resume_attempts, &timing), Decision::GiveUp(_)));
    }

    #[test]
    fn a_connection_lost_mid_stream_is_resumed_at_once_the_first_time() {
        let timing = Timing::default();
        let at_once = |d: Decision| matches!(d, Decision::Resume(delay) if delay.is_zero());
        assert!(at_once(decide_after(CoreError::StreamClosed, 0, true, &timing)));
        assert!(at_once(decide_after(CoreError::Network("reset".into()), 0, true, &timing)));
        // The second time, a stream that never answered, or an error the server sent: back-off.
        assert!(!at_once(decide_after(CoreError::StreamClosed, 1, true, &timing)));
        assert!(!at_once(decide_after(CoreError::StreamClosed, 0, false, &timing)));
        assert!(!at_once(decide_after(server(Code::Unavailable, Some(503), None), 0, true, &timing)));
        let none = Timing { resume_attempts: 0, ..Timing::default() };
        assert!(matches!(decide_after(CoreError::StreamClosed, 0, true, &none), Decision::GiveUp(_)));
    }
}
