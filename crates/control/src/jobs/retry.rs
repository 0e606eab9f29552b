//! Trying a job again after a transient error, with back-off.

use super::JobError;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How a job that failed with a transient error is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first one; 0 = never try again.
    pub retries: u32,
    /// Longest wait between two tries.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            retries: 5,
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Wait before retry `n` (1-based): 1.5^(n-1) seconds, at most
    /// `max_delay` (garage's worker back-off).
    pub fn delay(&self, retry: u32) -> Duration {
        let exponent = i32::try_from(retry.saturating_sub(1).min(30)).unwrap_or(30);
        Duration::from_secs_f64(1.5f64.powi(exponent)).min(self.max_delay)
    }
}

/// Runs `attempt` until it succeeds, fails for good, or has failed with a
/// transient error `policy.retries + 1` times; `on_retry(error, n, delay)`
/// is told before each wait. The service stopping during a wait ends it
/// with `Stopping` (the job resumes at the next start).
pub(super) async fn with_retries<T, F, Fut>(
    policy: RetryPolicy,
    shutdown: &CancellationToken,
    mut on_retry: impl FnMut(&JobError, u32, Duration),
    mut attempt: F,
) -> Result<T, JobError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, JobError>>,
{
    let mut retry = 0;
    loop {
        match attempt().await {
            Err(e) if e.is_transient() && retry < policy.retries => {
                retry += 1;
                let delay = policy.delay(retry);
                on_retry(&e, retry, delay);
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.cancelled() => return Err(JobError::Stopping),
                }
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use tokio::time::Instant;

    fn transient() -> JobError {
        JobError::Transient("disk busy".into())
    }

    #[test]
    fn back_off_grows_by_half_each_retry_up_to_the_cap() {
        let policy = RetryPolicy {
            retries: 20,
            max_delay: Duration::from_secs(10),
        };
        assert_eq!(policy.delay(1), Duration::from_secs(1));
        assert_eq!(policy.delay(2), Duration::from_millis(1500));
        assert_eq!(policy.delay(3), Duration::from_millis(2250));
        assert_eq!(policy.delay(7), Duration::from_secs(10));
        assert_eq!(policy.delay(u32::MAX), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_is_retried_after_a_back_off_until_it_passes() {
        let tries = Cell::new(0);
        let mut waits = Vec::new();
        let started = Instant::now();
        let result = with_retries(
            RetryPolicy::default(),
            &CancellationToken::new(),
            |_, n, delay| waits.push((n, delay)),
            || async {
                tries.set(tries.get() + 1);
                if tries.get() < 3 {
                    Err(transient())
                } else {
                    Ok(tries.get())
                }
            },
        )
        .await;
        assert_eq!(result.ok(), Some(3));
        assert_eq!(
            waits,
            [
                (1, Duration::from_secs(1)),
                (2, Duration::from_millis(1500))
            ]
        );
        assert!(started.elapsed() >= Duration::from_millis(2500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lasting_transient_error_ends_after_the_last_retry() {
        let tries = Cell::new(0u32);
        let policy = RetryPolicy {
            retries: 3,
            ..RetryPolicy::default()
        };
        let result: Result<(), _> = with_retries(
            policy,
            &CancellationToken::new(),
            |_, _, _| {},
            || async {
                tries.set(tries.get() + 1);
                Err(transient())
            },
        )
        .await;
        assert!(matches!(result, Err(JobError::Transient(_))));
        assert_eq!(tries.get(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_end_at_once() {
        let tries = Cell::new(0u32);
        let result: Result<(), _> = with_retries(
            RetryPolicy::default(),
            &CancellationToken::new(),
            |_, _, _| {},
            || async {
                tries.set(tries.get() + 1);
                Err(JobError::Failed("no plan".into()))
            },
        )
        .await;
        assert!(matches!(result, Err(JobError::Failed(_))));
        assert_eq!(tries.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_during_a_back_off_leaves_the_job_for_the_next_start() {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let result: Result<(), _> = with_retries(
            RetryPolicy::default(),
            &shutdown,
            |_, _, _| stop.cancel(),
            || async { Err(transient()) },
        )
        .await;
        assert!(matches!(result, Err(JobError::Stopping)));
    }

    #[test]
    fn interrupted_io_is_transient_refusals_are_not() {
        let io = |kind| {
            JobError::DataPlane(svs_dataplane::DataPlaneError::Io {
                medium: "m".into(),
                slice: "v/c0-k0".into(),
                op: "read",
                source: std::io::Error::from(kind),
            })
        };
        assert!(io(std::io::ErrorKind::Interrupted).is_transient());
        assert!(io(std::io::ErrorKind::TimedOut).is_transient());
        assert!(!io(std::io::ErrorKind::NotFound).is_transient());
        assert!(!io(std::io::ErrorKind::PermissionDenied).is_transient());
        assert!(!JobError::Store(svs_store::StoreError::NotFound).is_transient());
        assert!(!JobError::Failed("no plan".into()).is_transient());
        assert!(!JobError::Stopping.is_transient());
        // Context keeps the kind and names the step.
        let moved = io(std::io::ErrorKind::Interrupted).context("Moving slice c0-k0 failed");
        assert!(
            matches!(moved, JobError::Transient(ref m) if m.starts_with("Moving slice c0-k0 failed: "))
        );
    }
}
