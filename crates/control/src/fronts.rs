//! Fronts on storage nodes (setting `fronts = "nodes"`): which storage
//! node takes a volume's front ([`choose_front_node`], pure), and what each
//! node last said it has open ([`FrontReports`], in memory), which an
//! attach job waits on.
//!
//! A node sends its whole open set with every poll, so after a restart of
//! svs serve the next poll (at most a long-poll period away) tells it all
//! again. With several instances on one database, a node polls one of
//! them while a job on another waits on its report: once shared through
//! the store ([`FrontReports::share_through`]), a report that changed is
//! written to the store and announced, and every other instance reads it
//! back into its own copy, which its waiters watch.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use svs_front::wire::FrontOpen;
use svs_store::{Store, StoreResult};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// The announcement topic of front reports.
pub const FRONT_REPORTS_TOPIC: &str = "svs_front_reports";

/// How long an attach job waits for the chosen node to report the volume
/// open.
pub const FRONT_OPEN_WAIT: Duration = Duration::from_secs(15);

/// A storage node that might take a volume's front, as the attach job
/// sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontCandidate {
    pub node: String,
    /// Heartbeating (not Offline).
    pub online: bool,
    /// It registered an address for its NBD server of fronts.
    pub has_front_address: bool,
    /// It holds a copy of the volume that is not lost.
    pub holds_healthy_copy: bool,
    /// Volumes whose front it runs now.
    pub fronts: u64,
}

impl FrontCandidate {
    /// It may take a front.
    fn usable(&self) -> bool {
        self.can_keep() && self.holds_healthy_copy
    }

    /// It may go on running the front it runs: a copy of its own lost
    /// meanwhile is no reason to move the front (every copy is still one
    /// hop away), and a move costs the hosts a reconnection.
    fn can_keep(&self) -> bool {
        self.online && self.has_front_address
    }
}

/// The node to run a volume's front: its current front node while that
/// one can still run it (Online, with a front address), so its exports
/// stay where they are; else the node running the fewest fronts (then by
/// name) among those Online with a front address and a healthy copy of
/// the volume. None: no storage node can take it.
pub fn choose_front_node<'a>(
    current: Option<&str>,
    candidates: &'a [FrontCandidate],
) -> Option<&'a str> {
    if let Some(kept) =
        current.and_then(|c| candidates.iter().find(|n| n.node == c && n.can_keep()))
    {
        return Some(&kept.node);
    }
    candidates
        .iter()
        .filter(|n| n.usable())
        .min_by(|a, b| a.fronts.cmp(&b.fronts).then_with(|| a.node.cmp(&b.node)))
        .map(|n| n.node.as_str())
}

/// What waiting for a node's report found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrontOutcome {
    /// Open at the epoch waited for.
    Open,
    /// The node could not open it: why.
    Failed(String),
    /// No report of that epoch in time.
    TimedOut,
}

/// One node's last report, numbered in the order reports arrived.
#[derive(Debug, Clone, Default)]
struct Report {
    seq: u64,
    open: Vec<FrontOpen>,
}

/// What each storage node last reported open, by node.
pub struct FrontReports {
    reports: watch::Sender<(u64, HashMap<String, Report>)>,
    /// Where reports are shared with other instances, once shared.
    shared: OnceLock<Arc<dyn Store>>,
}

impl std::fmt::Debug for FrontReports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontReports")
            .field("reports", &*self.reports.borrow())
            .field("shared", &self.shared.get().is_some())
            .finish()
    }
}

impl Default for FrontReports {
    fn default() -> Self {
        FrontReports {
            reports: watch::channel((0, HashMap::new())).0,
            shared: OnceLock::new(),
        }
    }
}

impl FrontReports {
    /// A node's report as its poll brought it here: recorded, and (once
    /// shared) written to the store and announced when it changed.
    pub async fn report(&self, node: &str, open: Vec<FrontOpen>) {
        let changed = self.reports.borrow().1.get(node).map(|r| &r.open) != Some(&open);
        if let (true, Some(store)) = (changed, self.shared.get()) {
            if let Err(e) = publish(store.as_ref(), node, &open).await {
                warn!(node, error = %e, "cannot share a storage node's front report");
            }
        }
        self.record(node, open);
    }

    /// Shares reports with the other instances on `store`'s database: reads
    /// theirs now and whenever one is announced, until `stop`. Nothing to
    /// share on a store no other instance can use.
    pub async fn share_through(
        self: &Arc<Self>,
        store: Arc<dyn Store>,
        stop: CancellationToken,
    ) -> StoreResult<()> {
        let Some(heard) = store.announcements(&[FRONT_REPORTS_TOPIC]).await? else {
            return Ok(());
        };
        self.load(store.as_ref()).await?;
        let _ = self.shared.set(Arc::clone(&store));
        let reports = Arc::clone(self);
        // Announced, or perhaps missed: read them all again.
        crate::changes::follow(heard, stop, "front reports", move || {
            let (reports, store) = (Arc::clone(&reports), Arc::clone(&store));
            async move { reports.load(store.as_ref()).await }
        });
        Ok(())
    }

    /// Records every stored report that differs from what is known here.
    async fn load(&self, store: &dyn Store) -> StoreResult<()> {
        for (node, open) in store.front_reports().await? {
            let Ok(open) = serde_json::from_str::<Vec<FrontOpen>>(&open) else {
                warn!(node, "a stored front report does not parse; ignored");
                continue;
            };
            let known = self.reports.borrow().1.get(&node).map(|r| r.open.clone());
            if known.as_ref() != Some(&open) {
                self.record(&node, open);
            }
        }
        Ok(())
    }

    /// Replaces what the node has open, and wakes whoever waits on it.
    pub fn record(&self, node: &str, open: Vec<FrontOpen>) {
        self.reports.send_modify(|(seq, all)| {
            *seq += 1;
            all.insert(node.to_string(), Report { seq: *seq, open });
        });
    }

    /// The number of the last report (of any node): a wait for reports
    /// after a change passes it.
    pub fn last_seq(&self) -> u64 {
        self.reports.borrow().0
    }

    /// What the node last reported of the volume.
    pub fn reported(&self, node: &str, volume: &str) -> Option<FrontOpen> {
        self.reports
            .borrow()
            .1
            .get(node)
            .and_then(|r| r.open.iter().find(|o| o.volume == volume))
            .cloned()
    }

    /// Waits (up to `wait`) until a report of the node newer than `after`
    /// no longer has the volume open; false when none came in time (a dead
    /// node never reports).
    pub async fn wait_closed(&self, node: &str, volume: &str, after: u64, wait: Duration) -> bool {
        let mut rx = self.reports.subscribe();
        let closed = |(_, all): &(u64, HashMap<String, Report>)| {
            all.get(node).is_some_and(|r| {
                r.seq > after
                    && !r
                        .open
                        .iter()
                        .any(|o| o.volume == volume && o.error.is_empty())
            })
        };
        let waited = tokio::time::timeout(wait, rx.wait_for(closed)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// Waits (up to `wait`) until a report of the node newer than `after`
    /// ([`FrontReports::last_seq`]) has the volume at `epoch`: open, or
    /// failed with its reason. A node reports after it applied the fronts
    /// it was answered, so a report made after a change shows the change.
    pub async fn wait_open(
        &self,
        node: &str,
        volume: &str,
        epoch: u64,
        after: u64,
        wait: Duration,
    ) -> FrontOutcome {
        let mut rx = self.reports.subscribe();
        let at_epoch = |(_, all): &(u64, HashMap<String, Report>)| {
            all.get(node)
                .filter(|r| r.seq > after)
                .and_then(|r| {
                    r.open
                        .iter()
                        .find(|o| o.volume == volume && o.epoch == epoch)
                })
                .map(|o| o.error.clone())
        };
        let waited = tokio::time::timeout(wait, rx.wait_for(|all| at_epoch(all).is_some())).await;
        match waited {
            Ok(Ok(seen)) => match at_epoch(&seen) {
                Some(error) if error.is_empty() => FrontOutcome::Open,
                Some(error) => FrontOutcome::Failed(error),
                None => FrontOutcome::TimedOut,
            },
            // The sender lives as long as `self`: never closed while waited on.
            Ok(Err(_)) | Err(_) => FrontOutcome::TimedOut,
        }
    }
}

/// Writes a node's report to the store and tells the other instances.
async fn publish(store: &dyn Store, node: &str, open: &[FrontOpen]) -> StoreResult<()> {
    let encoded = serde_json::to_string(open)
        .map_err(|e| svs_store::StoreError::Corrupt(format!("front report: {e}")))?;
    let now_ms = svs_common::clock::Clock::now_ms(&svs_common::clock::SystemClock);
    store.set_front_report(node, &encoded, now_ms).await?;
    store.announce(FRONT_REPORTS_TOPIC).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, fronts: u64) -> FrontCandidate {
        FrontCandidate {
            node: name.into(),
            online: true,
            has_front_address: true,
            holds_healthy_copy: true,
            fronts,
        }
    }

    #[test]
    fn the_node_running_the_fewest_fronts_takes_it_then_by_name() {
        let nodes = [node("sn-c", 1), node("sn-b", 0), node("sn-a", 0)];
        assert_eq!(choose_front_node(None, &nodes), Some("sn-a"));
        let nodes = [node("sn-a", 2), node("sn-b", 1)];
        assert_eq!(choose_front_node(None, &nodes), Some("sn-b"));
    }

    #[test]
    fn the_current_front_node_keeps_it_while_usable_even_when_busier() {
        let nodes = [node("sn-a", 0), node("sn-b", 5)];
        assert_eq!(choose_front_node(Some("sn-b"), &nodes), Some("sn-b"));
        let mut offline = node("sn-b", 5);
        offline.online = false;
        let nodes = [node("sn-a", 0), offline];
        assert_eq!(choose_front_node(Some("sn-b"), &nodes), Some("sn-a"));
        // A current node no longer listed is simply replaced.
        assert_eq!(
            choose_front_node(Some("gone"), &[node("sn-a", 3)]),
            Some("sn-a")
        );
    }

    #[test]
    fn a_node_offline_or_without_front_address_never_runs_it_nor_one_without_a_healthy_copy_takes_it(
    ) {
        let mut offline = node("sn-a", 0);
        offline.online = false;
        let mut no_address = node("sn-b", 0);
        no_address.has_front_address = false;
        let mut lost = node("sn-c", 0);
        lost.holds_healthy_copy = false;
        let nodes = [offline, no_address, lost];
        assert_eq!(choose_front_node(None, &nodes), None);
        assert_eq!(choose_front_node(Some("sn-a"), &nodes), None);
        assert_eq!(choose_front_node(Some("sn-b"), &nodes), None);
        // The node running it keeps it when only its own copy is lost.
        assert_eq!(choose_front_node(Some("sn-c"), &nodes), Some("sn-c"));
        assert_eq!(choose_front_node(None, &[]), None);
    }

    fn open(volume: &str, epoch: u64, error: &str) -> FrontOpen {
        FrontOpen {
            volume: volume.into(),
            epoch,
            error: error.into(),
        }
    }

    #[tokio::test]
    async fn a_wait_ends_with_the_report_of_its_epoch_only() {
        let reports = std::sync::Arc::new(FrontReports::default());
        reports.record("sn-1", vec![open("v1", 1, "")]);
        let short = Duration::from_millis(50);
        assert_eq!(
            reports.wait_open("sn-1", "v1", 1, 0, short).await,
            FrontOutcome::Open
        );
        // A report from before the change does not count.
        let seen = reports.last_seq();
        assert_eq!(
            reports.wait_open("sn-1", "v1", 1, seen, short).await,
            FrontOutcome::TimedOut
        );
        // An older epoch open is not the one asked for.
        assert_eq!(
            reports.wait_open("sn-1", "v1", 2, 0, short).await,
            FrontOutcome::TimedOut
        );
        let later = std::sync::Arc::clone(&reports);
        let waiting = tokio::spawn(async move {
            later
                .wait_open("sn-1", "v1", 2, seen, Duration::from_secs(5))
                .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        reports.record("sn-1", vec![open("v1", 2, "no slice server answers")]);
        assert_eq!(
            waiting.await.expect("joined"),
            FrontOutcome::Failed("no slice server answers".into())
        );
        assert_eq!(
            reports.reported("sn-1", "v1"),
            Some(open("v1", 2, "no slice server answers"))
        );
        assert_eq!(reports.reported("sn-2", "v1"), None);
    }

    #[tokio::test]
    async fn a_close_is_a_newer_report_without_the_volume_open() {
        let reports = std::sync::Arc::new(FrontReports::default());
        let short = Duration::from_millis(50);
        reports.record("sn-1", vec![open("v1", 1, ""), open("v2", 1, "")]);
        let seen = reports.last_seq();
        // Nothing newer, or another node's report: not closed.
        assert!(!reports.wait_closed("sn-1", "v1", seen, short).await);
        reports.record("sn-2", vec![]);
        assert!(!reports.wait_closed("sn-1", "v1", seen, short).await);
        let later = std::sync::Arc::clone(&reports);
        let waiting = tokio::spawn(async move {
            later
                .wait_closed("sn-1", "v1", seen, Duration::from_secs(5))
                .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        // A failed opening is not open either.
        reports.record("sn-1", vec![open("v1", 2, "refused"), open("v2", 1, "")]);
        assert!(waiting.await.expect("joined"));
        assert!(!reports.wait_closed("sn-1", "v2", seen, short).await);
    }

    /// Two instances on one PostgreSQL database: a report a node made to
    /// one wakes a job waiting on the other.
    #[tokio::test]
    async fn a_report_made_to_one_instance_is_seen_by_another() {
        let db = svs_store::test_postgres::TestDatabase::new().await;
        let settings = svs_store::PgSettings::default();
        let stop = CancellationToken::new();
        let mut instances = Vec::new();
        for _ in 0..2 {
            let store: Arc<dyn Store> = Arc::new(
                svs_store::SqlStore::open_postgres(&db.url, &settings)
                    .await
                    .expect("store"),
            );
            let reports = Arc::new(FrontReports::default());
            reports
                .share_through(store, stop.clone())
                .await
                .expect("shared");
            instances.push(reports);
        }
        let (polled, waiting) = (&instances[0], &instances[1]);
        let after = waiting.last_seq();
        let wait = waiting.wait_open("sn-1", "vol-1", 7, after, Duration::from_secs(10));
        let open = FrontOpen {
            volume: "vol-1".into(),
            epoch: 7,
            error: String::new(),
        };
        let (outcome, ()) = tokio::join!(wait, polled.report("sn-1", vec![open.clone()]));
        assert_eq!(outcome, FrontOutcome::Open);
        assert_eq!(waiting.reported("sn-1", "vol-1"), Some(open));
        stop.cancel();
    }
}
