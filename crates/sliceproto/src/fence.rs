//! Epoch fencing: a volume is written by at most one fan-out point at a
//! time, enforced here, on the node, whatever the control plane believes.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, RwLock};

/// Where the node keeps, per volume, the highest epoch it has accepted.
pub trait EpochStore: Send + Sync + 'static {
    /// The highest epoch accepted for `volume`; 0 if none ever was.
    fn highest(&self, volume: &str) -> io::Result<u64>;

    /// Records `epoch` (above the highest) as `volume`'s highest. Durable on
    /// return: after a crash of the node, [`EpochStore::highest`] is at
    /// least `epoch`.
    fn raise(&self, volume: &str, epoch: u64) -> io::Result<()>;
}

/// Outcome of [`EpochFence::admit`].
#[derive(Debug)]
pub enum Fenced<T> {
    /// The op ran (with its result).
    Ran(T),
    /// The epoch is below the volume's highest: the op did not run.
    Stale { highest: u64 },
}

/// One volume's highest accepted epoch; `None` until read from the store.
/// Ops hold the read lock while they run, a raise takes the write lock: a
/// raise waits for the ops of older epochs in progress, and none starts
/// after it.
#[derive(Default)]
struct VolumeEpoch(RwLock<Option<u64>>);

/// The per-volume highest epochs of one node, kept in memory over the
/// durable [`EpochStore`].
pub struct EpochFence {
    store: Arc<dyn EpochStore>,
    volumes: Mutex<HashMap<String, Arc<VolumeEpoch>>>,
}

impl EpochFence {
    pub fn new(store: Arc<dyn EpochStore>) -> EpochFence {
        EpochFence {
            store,
            volumes: Mutex::new(HashMap::new()),
        }
    }

    fn volume(&self, volume: &str) -> Arc<VolumeEpoch> {
        let mut volumes = self.volumes.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(volumes.entry(volume.to_string()).or_default())
    }

    /// Runs `op` for `volume` at `epoch` unless the epoch is stale. An
    /// epoch above the highest is first recorded durably (a failure to
    /// record it fails the op, which then does not run).
    pub fn admit<T>(
        &self,
        volume: &str,
        epoch: u64,
        op: impl FnOnce() -> T,
    ) -> io::Result<Fenced<T>> {
        let entry = self.volume(volume);
        loop {
            {
                let highest = entry.0.read().unwrap_or_else(|e| e.into_inner());
                match *highest {
                    Some(h) if epoch < h => return Ok(Fenced::Stale { highest: h }),
                    // Run under the read lock: no raise until it is done.
                    Some(h) if epoch == h => return Ok(Fenced::Ran(op())),
                    _ => {}
                }
            }
            let mut highest = entry.0.write().unwrap_or_else(|e| e.into_inner());
            let known = match *highest {
                Some(h) => h,
                None => {
                    let h = self.store.highest(volume)?;
                    *highest = Some(h);
                    h
                }
            };
            if epoch > known {
                self.store.raise(volume, epoch)?;
                *highest = Some(epoch);
            }
            // Checked again under the read lock (someone may have raised
            // it further in between).
        }
    }

    /// The highest epoch accepted for `volume`.
    pub fn highest(&self, volume: &str) -> io::Result<u64> {
        let entry = self.volume(volume);
        let mut highest = entry.0.write().unwrap_or_else(|e| e.into_inner());
        match *highest {
            Some(h) => Ok(h),
            None => {
                let h = self.store.highest(volume)?;
                *highest = Some(h);
                Ok(h)
            }
        }
    }

    /// Forgets the cached epoch of a volume (after its last slice on the
    /// node is deleted, say); the store keeps it.
    pub fn forget(&self, volume: &str) {
        let mut volumes = self.volumes.lock().unwrap_or_else(|e| e.into_inner());
        volumes.remove(volume);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Default)]
    struct Store {
        epochs: Mutex<HashMap<String, u64>>,
        raises: AtomicU64,
        fail: std::sync::atomic::AtomicBool,
    }

    impl EpochStore for Store {
        fn highest(&self, volume: &str) -> io::Result<u64> {
            Ok(*self.epochs.lock().unwrap().get(volume).unwrap_or(&0))
        }

        fn raise(&self, volume: &str, epoch: u64) -> io::Result<()> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(5));
            }
            self.raises.fetch_add(1, Ordering::SeqCst);
            self.epochs.lock().unwrap().insert(volume.into(), epoch);
            Ok(())
        }
    }

    #[test]
    fn a_higher_epoch_raises_once_and_a_lower_one_is_refused() {
        let store = Arc::new(Store::default());
        store.epochs.lock().unwrap().insert("v".into(), 3);
        let fence = EpochFence::new(store.clone());
        assert!(matches!(
            fence.admit("v", 2, || ()).unwrap(),
            Fenced::Stale { highest: 3 }
        ));
        assert!(matches!(fence.admit("v", 3, || 1).unwrap(), Fenced::Ran(1)));
        assert_eq!(store.raises.load(Ordering::SeqCst), 0);
        assert!(matches!(fence.admit("v", 5, || 2).unwrap(), Fenced::Ran(2)));
        assert!(matches!(fence.admit("v", 5, || 3).unwrap(), Fenced::Ran(3)));
        assert_eq!(store.raises.load(Ordering::SeqCst), 1);
        assert_eq!(store.highest("v").unwrap(), 5);
        assert!(matches!(
            fence.admit("v", 4, || ()).unwrap(),
            Fenced::Stale { highest: 5 }
        ));
        // Other volumes have their own epochs.
        assert!(matches!(fence.admit("w", 1, || 4).unwrap(), Fenced::Ran(4)));
    }

    #[test]
    fn a_raise_that_cannot_be_recorded_fails_the_op_without_running_it() {
        let store = Arc::new(Store::default());
        store.fail.store(true, Ordering::SeqCst);
        let fence = EpochFence::new(store.clone());
        let mut ran = false;
        assert!(fence.admit("v", 1, || ran = true).is_err());
        assert!(!ran);
        store.fail.store(false, Ordering::SeqCst);
        assert!(matches!(
            fence.admit("v", 1, || ()).unwrap(),
            Fenced::Ran(())
        ));
    }

    #[test]
    fn a_raise_waits_for_the_ops_of_the_older_epoch_in_progress() {
        use std::sync::mpsc::channel;
        use std::time::Duration;
        let fence = Arc::new(EpochFence::new(Arc::new(Store::default())));
        let (started, wait_started) = channel();
        let (finish, wait_finish) = channel::<()>();
        let old = {
            let fence = Arc::clone(&fence);
            std::thread::spawn(move || {
                fence.admit("v", 1, || {
                    started.send(()).unwrap();
                    wait_finish.recv().unwrap();
                    "old done"
                })
            })
        };
        wait_started.recv().unwrap();
        let (raised, wait_raised) = channel();
        let new = {
            let fence = Arc::clone(&fence);
            std::thread::spawn(move || {
                let r = fence.admit("v", 2, || ());
                raised.send(()).unwrap();
                r
            })
        };
        // The new epoch is not in while the old op runs.
        assert!(wait_raised
            .recv_timeout(Duration::from_millis(200))
            .is_err());
        finish.send(()).unwrap();
        assert!(matches!(
            old.join().unwrap().unwrap(),
            Fenced::Ran("old done")
        ));
        assert!(matches!(new.join().unwrap().unwrap(), Fenced::Ran(())));
        assert!(matches!(
            fence.admit("v", 1, || ()).unwrap(),
            Fenced::Stale { highest: 2 }
        ));
    }
}
