//! Password checks on a few dedicated threads with a bounded queue, instead
//! of tokio's (unbounded) blocking pool: a flood of sign-ins then costs at
//! most `threads` cores and a queue of waiting checks, and the API keeps
//! its own threads. A check that finds the queue full is refused at once.

use super::{hash_password, verify_password, PasswordError};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio::sync::oneshot;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CheckError {
    /// Every thread is busy and the queue is full.
    #[error("too many password checks waiting")]
    Busy,
    /// The pool's threads are gone (they only stop with the process).
    #[error("the password check threads stopped")]
    Stopped,
}

struct Check {
    password: String,
    work: Work,
}

/// What to do with the password: both cost one argon2 run.
enum Work {
    Verify {
        hash: String,
        reply: oneshot::Sender<bool>,
    },
    /// A new password's hash (user creation, password changes).
    Hash {
        reply: oneshot::Sender<Result<String, PasswordError>>,
    },
}

pub struct PasswordCheckPool {
    queue: SyncSender<Check>,
}

impl PasswordCheckPool {
    /// Starts `threads` threads (at least one) sharing a queue of `queue`
    /// checks. The threads end when the pool is dropped.
    pub fn new(threads: usize, queue: usize) -> Result<PasswordCheckPool, String> {
        let (sender, receiver) = sync_channel::<Check>(queue);
        let receiver = Arc::new(Mutex::new(receiver));
        for i in 0..threads.max(1) {
            let receiver = Arc::clone(&receiver);
            std::thread::Builder::new()
                .name(format!("svs-password-{i}"))
                .spawn(move || run(&receiver))
                .map_err(|e| format!("cannot start the password check threads: {e}"))?;
        }
        Ok(PasswordCheckPool { queue: sender })
    }

    /// True when `password` matches the argon2 `hash`.
    pub async fn verify(&self, password: &str, hash: &str) -> Result<bool, CheckError> {
        let (reply, answer) = oneshot::channel();
        self.submit(Check {
            password: password.to_string(),
            work: Work::Verify {
                hash: hash.to_string(),
                reply,
            },
        })?;
        answer.await.map_err(|_| CheckError::Stopped)
    }

    /// The argon2 hash of a new password, on the same threads and queue
    /// (the outer error), or why the password is refused (the inner one).
    pub async fn hash(&self, password: &str) -> Result<Result<String, PasswordError>, CheckError> {
        let (reply, answer) = oneshot::channel();
        self.submit(Check {
            password: password.to_string(),
            work: Work::Hash { reply },
        })?;
        answer.await.map_err(|_| CheckError::Stopped)
    }

    fn submit(&self, check: Check) -> Result<(), CheckError> {
        // Counted before it is sent: a thread may take it at once.
        let waiting = &svs_common::metrics::METRICS.password_checks_waiting;
        waiting.inc();
        match self.queue.try_send(check) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                waiting.dec();
                Err(CheckError::Busy)
            }
            Err(TrySendError::Disconnected(_)) => {
                waiting.dec();
                Err(CheckError::Stopped)
            }
        }
    }
}

fn run(receiver: &Mutex<Receiver<Check>>) {
    loop {
        // The lock is held only while waiting for the next check.
        let next = match receiver.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok(check) = next else { return };
        svs_common::metrics::METRICS.password_checks_waiting.dec();
        // The caller may have gone (client disconnected): skip the work.
        match check.work {
            Work::Verify { hash, reply } => {
                if !reply.is_closed() {
                    let _ = reply.send(verify_password(&check.password, &hash));
                }
            }
            Work::Hash { reply } => {
                if !reply.is_closed() {
                    let _ = reply.send(hash_password(&check.password));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::hash_password;

    #[tokio::test]
    async fn checks_answer_like_verify_password() {
        let pool = PasswordCheckPool::new(1, 4).unwrap();
        let hash = hash_password("correct horse").unwrap();
        assert_eq!(pool.verify("correct horse", &hash).await, Ok(true));
        assert_eq!(pool.verify("wrong horse!", &hash).await, Ok(false));
        assert_eq!(pool.verify("correct horse", "not a hash").await, Ok(false));
        let made = pool.hash("new horse!").await.unwrap().unwrap();
        assert_eq!(pool.verify("new horse!", &made).await, Ok(true));
        assert!(matches!(
            pool.hash("short").await,
            Ok(Err(PasswordError::TooShort))
        ));
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once() {
        let pool = Arc::new(PasswordCheckPool::new(1, 2).unwrap());
        let hash = hash_password("correct horse").unwrap();
        // One check running, two queued, the rest refused without waiting.
        let checks: Vec<_> = (0..10)
            .map(|_| {
                let (pool, hash) = (Arc::clone(&pool), hash.clone());
                tokio::spawn(async move { pool.verify("wrong horse!", &hash).await })
            })
            .collect();
        let mut busy = 0;
        let mut done = 0;
        for c in checks {
            match c.await.unwrap() {
                Ok(false) => done += 1,
                Err(CheckError::Busy) => busy += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(busy >= 1, "busy {busy}, done {done}");
        assert!((1..=3 + 1).contains(&done), "busy {busy}, done {done}");
    }
}
