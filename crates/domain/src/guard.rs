//! The single list of operations a running data movement blocks (seed,
//! "Resize a volume", behaviour 5). Every endpoint that performs one of these
//! calls [`ensure_not_moving`]; nothing else decides it.

use thiserror::Error;

/// The nine operations refused on a volume while its data is being moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockedOperation {
    AttachmentCreate,
    AttachmentDelete,
    AttachmentModify,
    SnapshotCreate,
    SnapshotDelete,
    SnapshotModify,
    SnapshotRollback,
    VolumeRecovery,
    DataMovement,
}

impl BlockedOperation {
    pub const ALL: [BlockedOperation; 9] = [
        BlockedOperation::AttachmentCreate,
        BlockedOperation::AttachmentDelete,
        BlockedOperation::AttachmentModify,
        BlockedOperation::SnapshotCreate,
        BlockedOperation::SnapshotDelete,
        BlockedOperation::SnapshotModify,
        BlockedOperation::SnapshotRollback,
        BlockedOperation::VolumeRecovery,
        BlockedOperation::DataMovement,
    ];

    pub fn describe(&self) -> &'static str {
        match self {
            BlockedOperation::AttachmentCreate => "attachment create",
            BlockedOperation::AttachmentDelete => "attachment delete",
            BlockedOperation::AttachmentModify => "attachment modify",
            BlockedOperation::SnapshotCreate => "snapshot create",
            BlockedOperation::SnapshotDelete => "snapshot delete",
            BlockedOperation::SnapshotModify => "snapshot modify",
            BlockedOperation::SnapshotRollback => "snapshot rollback",
            BlockedOperation::VolumeRecovery => "volume recovery",
            BlockedOperation::DataMovement => "another data movement",
        }
    }
}

/// A data movement in progress on a volume: the job carrying it, the
/// seconds it still needs at the pace it kept (None: not known yet), and
/// whether it is being cancelled (its undo's time is not that pace's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveMovement {
    pub volume_name: String,
    pub job_id: i64,
    pub left_secs: Option<u64>,
    pub cancelling: bool,
    /// Paused on request or by the movement window.
    pub paused: bool,
}

/// `<operation> is not allowed on volume '<v>' while data movement job <id>
/// is in progress`, and `; it is being cancelled`, `; it is paused`, or
/// when the job's pace says it, `; about <time> left`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{operation} is not allowed on volume '{volume}' while data movement job {job_id} is in progress{}",
    when(*.cancelling, *.paused, *.left_secs))]
pub struct MovementBlocked {
    pub operation: &'static str,
    pub volume: String,
    pub job_id: i64,
    pub left_secs: Option<u64>,
    pub cancelling: bool,
    pub paused: bool,
}

/// The end of a refusal: what is known of when the movement ends.
fn when(cancelling: bool, paused: bool, left_secs: Option<u64>) -> String {
    if cancelling {
        return "; it is being cancelled".to_string();
    }
    if paused {
        return "; it is paused".to_string();
    }
    left_secs
        .map(|s| format!("; about {} left", crate::units::human_duration(s)))
        .unwrap_or_default()
}

/// Refuses `op` when the volume has a data movement running.
pub fn ensure_not_moving(
    op: BlockedOperation,
    active: Option<&ActiveMovement>,
) -> Result<(), MovementBlocked> {
    match active {
        None => Ok(()),
        Some(m) => Err(MovementBlocked {
            operation: op.describe(),
            volume: m.volume_name.clone(),
            job_id: m.job_id,
            left_secs: m.left_secs,
            cancelling: m.cancelling,
            paused: m.paused,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_operation_is_blocked_during_movement() {
        let m = ActiveMovement {
            volume_name: "db".into(),
            job_id: 7,
            left_secs: None,
            cancelling: false,
            paused: false,
        };
        for op in BlockedOperation::ALL {
            let err = ensure_not_moving(op, Some(&m)).unwrap_err();
            assert_eq!(err.job_id, 7);
            assert!(err.to_string().contains("job 7"), "{err}");
            assert!(err.to_string().contains(op.describe()), "{err}");
        }
    }

    #[test]
    fn the_refusal_says_how_long_the_movement_still_takes_once_known() {
        let m = ActiveMovement {
            volume_name: "db".into(),
            job_id: 7,
            left_secs: Some(130),
            cancelling: false,
            paused: false,
        };
        let err = ensure_not_moving(BlockedOperation::ALL[0], Some(&m)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is not allowed on volume 'db' while data movement job 7 is in progress; \
                 about 2 min 10 s left",
                BlockedOperation::ALL[0].describe()
            )
        );
        let paused = ActiveMovement {
            paused: true,
            ..m.clone()
        };
        let err = ensure_not_moving(BlockedOperation::ALL[0], Some(&paused)).unwrap_err();
        assert!(
            err.to_string().ends_with("is in progress; it is paused"),
            "{err}"
        );
        let undoing = ActiveMovement {
            cancelling: true,
            ..m
        };
        let err = ensure_not_moving(BlockedOperation::ALL[0], Some(&undoing)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is not allowed on volume 'db' while data movement job 7 is in progress; \
                 it is being cancelled",
                BlockedOperation::ALL[0].describe()
            )
        );
    }

    #[test]
    fn nothing_is_blocked_without_movement() {
        for op in BlockedOperation::ALL {
            assert!(ensure_not_moving(op, None).is_ok());
        }
    }
}
