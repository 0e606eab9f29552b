//! Rules the store enforces when it changes stored objects. Each is a pure
//! function of the rows it needs: the store loads them inside its
//! transaction, asks the rule, and writes the outcome or returns the refusal,
//! so every backend applies the same rules with the same messages.

use crate::model::{Gib, JobState, MediumRecord, Resiliency, VolumeState};
use thiserror::Error;

/// A stored medium, with the space its slices and running jobs' bookings
/// hold on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMedium {
    pub record: MediumRecord,
    pub held: Gib,
}

/// A new media configuration would lose or misplace slices: one message per
/// medium at fault, joined.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}", .problems.join("; "))]
pub struct MediaChangeRefused {
    pub problems: Vec<String>,
}

/// Checks a new media configuration against the stored media and returns
/// the ids of stored media to forget (no longer configured, holding
/// nothing). A medium holding something may not disappear, move to another
/// node, zone or directory, nor shrink below what it holds; media that hold
/// nothing may change freely.
pub fn media_to_forget(
    stored: &[StoredMedium],
    configured: &[MediumRecord],
) -> Result<Vec<String>, MediaChangeRefused> {
    let mut problems = Vec::new();
    let mut forget = Vec::new();
    for s in stored {
        let (id, held) = (&s.record.medium.id, s.held);
        let (node, zone, directory) = (
            &s.record.medium.node,
            &s.record.medium.zone,
            &s.record.directory,
        );
        match configured.iter().find(|m| &m.medium.id == id) {
            Some(m) if held > 0 && (&m.medium.node != node || &m.medium.zone != zone) => problems
                .push(format!(
                    "medium '{id}' holds slices on node '{node}' in zone '{zone}' \
                     and cannot move to node '{}' in zone '{}'",
                    m.medium.node, m.medium.zone
                )),
            Some(m) if held > 0 && &m.directory != directory => problems.push(format!(
                "medium '{id}' holds slices in {directory} but is now configured at {}",
                m.directory
            )),
            None if held > 0 => problems.push(format!(
                "medium '{id}' holds {held} GiB of slices but is no longer configured"
            )),
            Some(m) if m.medium.size < held => problems.push(format!(
                "medium '{id}' is configured with {} GiB but holds {held} GiB of slices",
                m.medium.size
            )),
            None => forget.push(id.clone()),
            Some(_) => {}
        }
    }
    if problems.is_empty() {
        Ok(forget)
    } else {
        Err(MediaChangeRefused { problems })
    }
}

/// A medium or node change refused because of what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InfrastructureInUse {
    #[error(
        "medium '{medium}' holds slices of volume(s) {}; delete those volumes first",
        quoted(.volumes)
    )]
    MediumHoldsSlices {
        medium: String,
        volumes: Vec<String>,
    },
    #[error(
        "medium '{medium}' has space booked by running job(s) {}; try again when they end",
        .jobs.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
    )]
    MediumBooked { medium: String, jobs: Vec<i64> },
    #[error(
        "medium '{medium}' cannot shrink to {size} GiB: {used} GiB of it is in use \
         (slices, snapshots and running jobs' bookings)"
    )]
    MediumShrink {
        medium: String,
        size: Gib,
        used: Gib,
    },
    #[error(
        "node '{node}' has media holding slices of volume(s) {}; delete those volumes, \
         then remove the node's media",
        quoted(.volumes)
    )]
    NodeHoldsSlices { node: String, volumes: Vec<String> },
    #[error(
        "node '{node}' has attachments of volume(s) {}; detach them first",
        quoted(.volumes)
    )]
    NodeAttached { node: String, volumes: Vec<String> },
    #[error("node '{node}' has media {}; remove them first", quoted(.media))]
    NodeHasMedia { node: String, media: Vec<String> },
}

/// `'a', 'b'`: names as the messages quote them.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A medium may be removed only when no slice is on it (`volumes`: the
/// distinct volumes with a slice there) and no running job booked space on
/// it (`booking_jobs`).
pub fn check_medium_removal(
    medium: &str,
    volumes: &[String],
    booking_jobs: &[i64],
) -> Result<(), InfrastructureInUse> {
    if !volumes.is_empty() {
        return Err(InfrastructureInUse::MediumHoldsSlices {
            medium: medium.to_string(),
            volumes: volumes.to_vec(),
        });
    }
    if !booking_jobs.is_empty() {
        return Err(InfrastructureInUse::MediumBooked {
            medium: medium.to_string(),
            jobs: booking_jobs.to_vec(),
        });
    }
    Ok(())
}

/// A medium may take any size down to what is in use on it.
pub fn check_medium_resize(medium: &str, size: Gib, used: Gib) -> Result<(), InfrastructureInUse> {
    if size < used {
        return Err(InfrastructureInUse::MediumShrink {
            medium: medium.to_string(),
            size,
            used,
        });
    }
    Ok(())
}

/// A node may be removed only when nothing depends on it: no media (first
/// naming the volumes whose slices they hold) and no attachments.
pub fn check_node_removal(
    node: &str,
    slice_volumes: &[String],
    attached_volumes: &[String],
    media: &[String],
) -> Result<(), InfrastructureInUse> {
    if !slice_volumes.is_empty() {
        return Err(InfrastructureInUse::NodeHoldsSlices {
            node: node.to_string(),
            volumes: slice_volumes.to_vec(),
        });
    }
    if !attached_volumes.is_empty() {
        return Err(InfrastructureInUse::NodeAttached {
            node: node.to_string(),
            volumes: attached_volumes.to_vec(),
        });
    }
    if !media.is_empty() {
        return Err(InfrastructureInUse::NodeHasMedia {
            node: node.to_string(),
            media: media.to_vec(),
        });
    }
    Ok(())
}

/// A policy change refused because volumes use the policy.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyInUse {
    #[error("policy '{name}' is used by {volumes} volume(s)")]
    Delete { name: String, volumes: u64 },
    #[error("policy '{name}' is used by {volumes} volume(s); its resiliency cannot change")]
    ResiliencyChange { name: String, volumes: u64 },
}

/// A policy may be deleted only when no volume uses it.
pub fn check_policy_delete(name: &str, volumes: u64) -> Result<(), PolicyInUse> {
    if volumes > 0 {
        return Err(PolicyInUse::Delete {
            name: name.to_string(),
            volumes,
        });
    }
    Ok(())
}

/// Resiliency decides how many copies volumes keep and where: it may not
/// change while volumes use the policy. Every other field may.
pub fn check_policy_update(
    name: &str,
    volumes: u64,
    current: Resiliency,
    new: Resiliency,
) -> Result<(), PolicyInUse> {
    if volumes > 0 && current != new {
        return Err(PolicyInUse::ResiliencyChange {
            name: name.to_string(),
            volumes,
        });
    }
    Ok(())
}

/// A volume's state once the job working on it has ended: a resize leaves it
/// Ready however it ended (the volume keeps its old size on failure); a
/// creation makes it Ready only when done (a failed creation leaves it
/// Creating, for its deletion); any other state stays.
pub fn volume_state_after_job(state: VolumeState, job_end: JobState) -> VolumeState {
    match state {
        VolumeState::Resizing => VolumeState::Ready,
        VolumeState::Creating if job_end == JobState::Done => VolumeState::Ready,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Medium;

    fn record(id: &str, size: Gib) -> MediumRecord {
        MediumRecord {
            medium: Medium {
                id: id.into(),
                node: format!("node-{id}"),
                zone: format!("zone-{id}"),
                size,
            },
            directory: format!("/media/{id}"),
        }
    }

    fn stored(id: &str, size: Gib, held: Gib) -> StoredMedium {
        StoredMedium {
            record: record(id, size),
            held,
        }
    }

    #[test]
    fn media_holding_nothing_may_go_and_used_media_may_grow() {
        let now = [stored("m1", 20, 10), stored("m2", 20, 0)];
        assert_eq!(
            media_to_forget(&now, &[record("m1", 30)]),
            Ok(vec!["m2".to_string()])
        );
    }

    #[test]
    fn a_medium_holding_slices_may_not_disappear() {
        let refused = media_to_forget(&[stored("m1", 20, 10)], &[]);
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("medium 'm1' holds 10 GiB of slices but is no longer configured".to_string())
        );
    }

    #[test]
    fn a_medium_may_not_shrink_below_what_it_holds() {
        let refused = media_to_forget(&[stored("m1", 20, 10)], &[record("m1", 5)]);
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("medium 'm1' is configured with 5 GiB but holds 10 GiB of slices".to_string())
        );
        assert!(media_to_forget(&[stored("m1", 20, 10)], &[record("m1", 10)]).is_ok());
    }

    #[test]
    fn a_used_medium_may_not_move_to_another_node_zone_or_directory() {
        let now = [stored("m1", 20, 1)];
        let mut other_node = record("m1", 20);
        other_node.medium.node = "elsewhere".into();
        assert_eq!(
            media_to_forget(&now, &[other_node]).map_err(|e| e.to_string()),
            Err(
                "medium 'm1' holds slices on node 'node-m1' in zone 'zone-m1' \
                 and cannot move to node 'elsewhere' in zone 'zone-m1'"
                    .to_string()
            )
        );
        let mut other_directory = record("m1", 20);
        other_directory.directory = "/elsewhere".into();
        assert_eq!(
            media_to_forget(&now, &[other_directory]).map_err(|e| e.to_string()),
            Err(
                "medium 'm1' holds slices in /media/m1 but is now configured at /elsewhere"
                    .to_string()
            )
        );
        // Holding nothing, it may go anywhere.
        let mut moved = record("m1", 20);
        moved.medium.zone = "z9".into();
        assert!(media_to_forget(&[stored("m1", 20, 0)], &[moved]).is_ok());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let now = [stored("m1", 20, 10), stored("m2", 20, 4)];
        let refused = media_to_forget(&now, &[]).map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(
                "medium 'm1' holds 10 GiB of slices but is no longer configured; \
                 medium 'm2' holds 4 GiB of slices but is no longer configured"
                    .to_string()
            )
        );
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_medium_is_removed_only_when_it_holds_and_books_nothing() {
        assert_eq!(check_medium_removal("m1", &[], &[]), Ok(()));
        assert_eq!(
            check_medium_removal("m1", &names(&["v1", "v2"]), &[7]).map_err(|e| e.to_string()),
            Err(
                "medium 'm1' holds slices of volume(s) 'v1', 'v2'; delete those volumes first"
                    .to_string()
            )
        );
        assert_eq!(
            check_medium_removal("m1", &[], &[7, 9]).map_err(|e| e.to_string()),
            Err(
                "medium 'm1' has space booked by running job(s) 7, 9; try again when they end"
                    .to_string()
            )
        );
    }

    #[test]
    fn a_medium_shrinks_only_down_to_what_is_in_use() {
        assert_eq!(check_medium_resize("m1", 10, 10), Ok(()));
        assert_eq!(check_medium_resize("m1", 50, 10), Ok(()));
        assert_eq!(
            check_medium_resize("m1", 9, 10).map_err(|e| e.to_string()),
            Err(
                "medium 'm1' cannot shrink to 9 GiB: 10 GiB of it is in use (slices, \
                 snapshots and running jobs' bookings)"
                    .to_string()
            )
        );
    }

    #[test]
    fn a_node_is_removed_only_without_slices_attachments_or_media() {
        assert_eq!(check_node_removal("n", &[], &[], &[]), Ok(()));
        let err = |s: &[&str], a: &[&str], m: &[&str]| {
            check_node_removal("n", &names(s), &names(a), &names(m))
                .map_err(|e| e.to_string())
                .unwrap_err()
        };
        assert_eq!(
            err(&["v1"], &["v2"], &["m1"]),
            "node 'n' has media holding slices of volume(s) 'v1'; delete those volumes, \
             then remove the node's media"
        );
        assert_eq!(
            err(&[], &["v2"], &["m1"]),
            "node 'n' has attachments of volume(s) 'v2'; detach them first"
        );
        assert_eq!(
            err(&[], &[], &["m1", "m2"]),
            "node 'n' has media 'm1', 'm2'; remove them first"
        );
    }

    #[test]
    fn a_used_policy_keeps_its_resiliency_and_cannot_be_deleted() {
        let one = Resiliency {
            media: 1,
            node: 0,
            zone: 0,
        };
        let two = Resiliency { media: 2, ..one };
        assert_eq!(check_policy_update("p", 0, one, two), Ok(()));
        assert_eq!(check_policy_update("p", 3, one, one), Ok(()));
        assert_eq!(
            check_policy_update("p", 3, one, two).map_err(|e| e.to_string()),
            Err("policy 'p' is used by 3 volume(s); its resiliency cannot change".to_string())
        );
        assert_eq!(check_policy_delete("p", 0), Ok(()));
        assert_eq!(
            check_policy_delete("p", 2).map_err(|e| e.to_string()),
            Err("policy 'p' is used by 2 volume(s)".to_string())
        );
    }

    #[test]
    fn a_volume_is_ready_after_a_resize_or_a_successful_creation() {
        use JobState::{Done, Error};
        use VolumeState::{Creating, Deleting, Ready, Resizing};
        assert_eq!(volume_state_after_job(Resizing, Done), Ready);
        assert_eq!(volume_state_after_job(Resizing, Error), Ready);
        assert_eq!(volume_state_after_job(Creating, Done), Ready);
        assert_eq!(volume_state_after_job(Creating, Error), Creating);
        assert_eq!(volume_state_after_job(Deleting, Error), Deleting);
        assert_eq!(volume_state_after_job(Ready, Done), Ready);
    }
}
