//! Records from rows: how each kind of object is read from a result row,
//! shared by every backend. The backends differ in their SQL, not in their
//! columns: each table has the same columns of the same kinds on SQLite and
//! PostgreSQL (integers are 64-bit, flags are 0/1 integers, JSON is text),
//! so one mapping serves both through [`Columns`].

use crate::records::*;
use crate::{StoreError, StoreResult};
use serde_json::{Map, Value};
use sqlx::postgres::Postgres;
use sqlx::sqlite::Sqlite;
use svs_domain::{
    AttachmentManager, Consistency, Gib, JobState, ManagedBy, Medium, Resiliency, Slice,
    SnapshotState, VolumeState, VolumeType,
};

/// A value of a column, decodable from either backend's rows.
pub(crate) trait Column:
    for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
{
}

impl<T> Column for T where
    T: for<'r> sqlx::Decode<'r, Sqlite>
        + sqlx::Type<Sqlite>
        + for<'r> sqlx::Decode<'r, Postgres>
        + sqlx::Type<Postgres>
{
}

/// A result row of either database (`sql::db::Row`), its columns read by
/// name.
pub(crate) trait Columns {
    fn try_get<T: Column, I: AsRef<str>>(&self, column: I) -> Result<T, sqlx::Error>;
}

pub(crate) fn json_map(text: &str) -> StoreResult<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(StoreError::Corrupt(format!(
            "expected a JSON object, got {text:?}"
        ))),
    }
}

pub(crate) fn gib(row: &impl Columns, col: &str) -> StoreResult<Gib> {
    let v: i64 = row.try_get(col)?;
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {col}: {v}")))
}

pub(crate) fn to_i64(v: Gib) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("size out of range: {v}")))
}

pub(crate) fn small(row: &impl Columns, col: &str) -> StoreResult<u8> {
    let v: i64 = row.try_get(col)?;
    u8::try_from(v).map_err(|_| StoreError::Corrupt(format!("{col} out of range: {v}")))
}

pub(crate) fn resiliency(row: &impl Columns) -> StoreResult<Resiliency> {
    Ok(Resiliency {
        media: small(row, "resiliency_media")?,
        node: small(row, "resiliency_node")?,
        zone: small(row, "resiliency_zone")?,
    })
}

/// The volume's current job (id, progress, status) from the joined columns
/// `job_id`, `job_progress` and `job_status`.
pub(crate) fn active_job(row: &impl Columns) -> StoreResult<Option<(i64, u8, String)>> {
    let Some(id) = row.try_get::<Option<i64>, _>("job_id")? else {
        return Ok(None);
    };
    let progress: Option<i64> = row.try_get("job_progress")?;
    let status: Option<String> = row.try_get("job_status")?;
    Ok(Some((
        id,
        u8::try_from(progress.unwrap_or(0).clamp(0, 100)).unwrap_or(0),
        status.unwrap_or_default(),
    )))
}

/// The `stale_generation` column of a row.
pub(crate) fn stale_generation(row: &impl Columns) -> StoreResult<Option<u64>> {
    row.try_get::<Option<i64>, _>("stale_generation")?
        .map(|g| u64::try_from(g).map_err(|_| StoreError::Corrupt(format!("stale generation {g}"))))
        .transpose()
}

pub(crate) fn user_row(row: &impl Columns) -> StoreResult<User> {
    Ok(User {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        tenant: row.try_get("tenant")?,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        password_hash: row.try_get("password_hash")?,
        is_admin: row.try_get::<i64, _>("is_admin")? != 0,
        disabled: row.try_get::<i64, _>("disabled")? != 0,
        token_generation: row.try_get("token_generation")?,
        created_ms: row.try_get("created_ms")?,
    })
}

pub(crate) fn refresh_row(r: &impl Columns) -> StoreResult<RefreshTokenRecord> {
    Ok(RefreshTokenRecord {
        user_id: r.try_get("user_id")?,
        family: r.try_get("family")?,
        expires_ms: r.try_get("expires_ms")?,
        revoked: r.try_get::<i64, _>("revoked")? != 0,
        retired: r.try_get::<i64, _>("retired")? != 0,
    })
}

/// A medium's record from a row with its `id`, `node`, `zone`, `directory`
/// and `size_gib` columns.
pub(crate) fn medium_record(row: &impl Columns) -> StoreResult<MediumRecord> {
    Ok(MediumRecord {
        medium: Medium {
            id: row.try_get("id")?,
            node: row.try_get("node")?,
            zone: row.try_get("zone")?,
            size: gib(row, "size_gib")?,
        },
        directory: row.try_get("directory")?,
    })
}

/// Who manages a medium or node, from its row's `managed_by` column.
pub(crate) fn managed_by(row: &impl Columns) -> StoreResult<ManagedBy> {
    let text: String = row.try_get("managed_by")?;
    ManagedBy::parse(&text).ok_or_else(|| StoreError::Corrupt(format!("managed_by '{text}'")))
}

pub(crate) fn policy_row(row: &impl Columns) -> StoreResult<Policy> {
    Ok(Policy {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        resiliency: resiliency(row)?,
        attributes: json_map(&row.try_get::<String, _>("attributes")?)?,
        created_ms: row.try_get("created_ms")?,
        created_by_name: row.try_get("created_by_name")?,
        created_by_email: row.try_get("created_by_email")?,
        updated_ms: row.try_get("updated_ms")?,
        updated_by_name: row.try_get("updated_by_name")?,
        updated_by_email: row.try_get("updated_by_email")?,
    })
}

pub(crate) fn volume_row(row: &impl Columns) -> StoreResult<Volume> {
    let kind: String = row.try_get("type")?;
    let state: String = row.try_get("state")?;
    let job = active_job(row)?;
    Ok(Volume {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        name: row.try_get("name")?,
        kind: VolumeType::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("volume type {kind:?}")))?,
        size: gib(row, "size_gib")?,
        policy: row.try_get("policy_name")?,
        resiliency: resiliency(row)?,
        zone: row.try_get("zone")?,
        attributes: json_map(&row.try_get::<String, _>("attributes")?)?,
        state: VolumeState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("volume state {state:?}")))?,
        job,
        first_node: row.try_get("first_node")?,
        first_zone: row.try_get("first_zone")?,
        lost_slices: gib(row, "lost_slices")?,
        lost_columns: gib(row, "lost_columns")?,
        recovery_job: row.try_get("recovery_job")?,
        filesystem_size: row
            .try_get::<Option<i64>, _>("fs_size_gib")?
            .map(|v| {
                u64::try_from(v).map_err(|_| StoreError::Corrupt("negative fs_size_gib".into()))
            })
            .transpose()?,
        filesystem_error: row.try_get("fs_error")?,
        created_ms: row.try_get("created_ms")?,
    })
}

pub(crate) fn slice_row(row: &impl Columns) -> StoreResult<SliceRow> {
    Ok(SliceRow {
        slice: Slice {
            id: row.try_get("id")?,
            copy: u32::try_from(row.try_get::<i64, _>("copy")?)
                .map_err(|_| StoreError::Corrupt("slice copy".into()))?,
            column: u32::try_from(row.try_get::<i64, _>("col")?)
                .map_err(|_| StoreError::Corrupt("slice column".into()))?,
            medium: row.try_get("medium_id")?,
            size: gib(row, "size_gib")?,
        },
        node: row.try_get("node")?,
        zone: row.try_get("zone")?,
        lost: row.try_get::<String, _>("medium_state")? == "Failed"
            || row.try_get::<Option<i64>, _>("lost_ms")?.is_some(),
        stale_generation: stale_generation(row)?,
    })
}

/// The columns [`slice_row`] reads, of `slices s JOIN media m ON m.id =
/// s.medium_id`.
pub(crate) const SLICE_COLUMNS: &str = "s.id, s.copy, s.col, s.medium_id, s.size_gib, \
    s.lost_ms, s.stale_generation, m.node, m.zone, m.state AS medium_state";

/// Volumes with all their slices, from rows of [`SLICE_COLUMNS`] with the
/// slice's `volume_id`, its volume's `volume_name` and `volume_zone` and its
/// policy's `resiliency_*` columns, ordered by volume id, then copy and
/// column: each volume once, its slices in the rows' order.
pub(crate) fn placed_volumes<R: Columns>(rows: &[R]) -> StoreResult<Vec<PlacedVolume>> {
    let mut volumes: Vec<PlacedVolume> = Vec::new();
    for row in rows {
        let volume_id: String = row.try_get("volume_id")?;
        let slice = slice_row(row)?;
        match volumes.last_mut() {
            Some(volume) if volume.volume_id == volume_id => volume.slices.push(slice),
            _ => volumes.push(PlacedVolume {
                volume_id,
                name: row.try_get("volume_name")?,
                resiliency: resiliency(row)?,
                zone: row.try_get("volume_zone")?,
                slices: vec![slice],
            }),
        }
    }
    Ok(volumes)
}

/// Whether a switch of `step` books the slice's old size on its source until
/// the job ends (see `VolumeStore::switch_slice`): a forward move of a
/// healthy copy. A lost copy (`lost_ms` set) is not moved back by a cancel.
pub(crate) fn holds_source(step: &ResizeStep, lost_ms: Option<i64>) -> bool {
    !step.undo && lost_ms.is_none() && step.to_medium.as_deref() != Some(&step.from_medium)
}

pub(crate) fn step_row(row: &impl Columns) -> StoreResult<ResizeStep> {
    let state: String = row.try_get("state")?;
    Ok(ResizeStep {
        id: row.try_get("id")?,
        job_id: row.try_get("job_id")?,
        slice_id: row.try_get("slice_id")?,
        from_medium: row.try_get("from_medium")?,
        to_medium: row.try_get("to_medium")?,
        old_size: gib(row, "old_size")?,
        new_size: gib(row, "new_size")?,
        state: StepState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("step state {state:?}")))?,
        checkpoint: match row.try_get::<i64, _>("copy_checkpoint")? {
            0 => None,
            offset => Some(CopyCheckpoint {
                offset: u64::try_from(offset)
                    .map_err(|_| StoreError::Corrupt(format!("copy checkpoint {offset}")))?,
                live: row.try_get::<i64, _>("copy_checkpoint_live")? != 0,
            }),
        },
        undo: row.try_get::<i64, _>("undo")? != 0,
        failure: row.try_get("failure")?,
        failures: u32::try_from(row.try_get::<i64, _>("failures")?).unwrap_or(u32::MAX),
    })
}

/// From `slice_id, volume_id, volume_name, copy, col`.
pub(crate) fn step_slice_row(row: &impl Columns) -> StoreResult<StepSlice> {
    Ok(StepSlice {
        slice_id: row.try_get("slice_id")?,
        volume_id: row.try_get("volume_id")?,
        volume_name: row.try_get("volume_name")?,
        copy: u32::try_from(row.try_get::<i64, _>("copy")?)
            .map_err(|_| StoreError::Corrupt("slice copy".into()))?,
        column: u32::try_from(row.try_get::<i64, _>("col")?)
            .map_err(|_| StoreError::Corrupt("slice column".into()))?,
    })
}

pub(crate) fn job_row(row: &impl Columns) -> StoreResult<Job> {
    let state: String = row.try_get("state")?;
    let args: String = row.try_get("args")?;
    let details: String = row.try_get("details")?;
    Ok(Job {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        kind: row.try_get("type")?,
        object: row.try_get("object")?,
        object_name: row.try_get("object_name")?,
        args: serde_json::from_str(&args)
            .map_err(|e| StoreError::Corrupt(format!("job args: {e}")))?,
        state: JobState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("job state {state:?}")))?,
        status: row.try_get("status")?,
        progress: small(row, "progress")?,
        starttime_ms: row.try_get("starttime_ms")?,
        endtime_ms: row.try_get("endtime_ms")?,
        user_id: row.try_get("user_id")?,
        username: row.try_get("username")?,
        useremail: row.try_get("useremail")?,
        details: serde_json::from_str(&details)
            .map_err(|e| StoreError::Corrupt(format!("job details: {e}")))?,
        data_movement: row.try_get::<i64, _>("data_movement")? != 0,
        created_ms: row.try_get("created_ms")?,
        cancel_requested: row.try_get::<Option<i64>, _>("cancel_ms")?.is_some(),
        committed: row.try_get::<i64, _>("committed")? != 0,
        paused: row.try_get::<Option<i64>, _>("paused_ms")?.is_some(),
        movement_rate: rate(row, "movement_rate")?,
    })
}

/// A nullable byte rate column.
fn rate(row: &impl Columns, column: &str) -> StoreResult<Option<u64>> {
    row.try_get::<Option<i64>, _>(column)?
        .map(|r| u64::try_from(r).map_err(|_| StoreError::Corrupt(format!("{column} {r}"))))
        .transpose()
}

/// What steers a job, from `id, cancel_ms, paused_ms, movement_rate`.
pub(crate) fn job_control_row(row: &impl Columns) -> StoreResult<JobControl> {
    Ok(JobControl {
        id: row.try_get("id")?,
        cancel_requested: row.try_get::<Option<i64>, _>("cancel_ms")?.is_some(),
        paused: row.try_get::<Option<i64>, _>("paused_ms")?.is_some(),
        movement_rate: rate(row, "movement_rate")?,
    })
}

/// What the node's agent reported, from `host_*` columns (None until it
/// reported).
pub(crate) fn host_report(row: &impl Columns) -> StoreResult<Option<HostReport>> {
    let Some(state) = row.try_get::<Option<String>, _>("host_state")? else {
        return Ok(None);
    };
    let unsigned = |col: &str| -> StoreResult<Option<u64>> {
        row.try_get::<Option<i64>, _>(col)?
            .map(|v| u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {col}"))))
            .transpose()
    };
    Ok(Some(HostReport {
        state,
        detail: row.try_get("host_detail")?,
        device: row.try_get("host_device")?,
        mount_path: row.try_get("host_mountpath")?,
        filesystem_bytes: unsigned("fs_bytes")?,
        filesystem_size: unsigned("fs_size_gib")?,
        grow_error: row.try_get("grow_error")?,
        grow_job: row.try_get("grow_job")?,
        updated_ms: row
            .try_get::<Option<i64>, _>("host_updated_ms")?
            .unwrap_or(0),
    }))
}

pub(crate) fn attachment_row(row: &impl Columns) -> StoreResult<Attachment> {
    let job = active_job(row)?;
    Ok(Attachment {
        volume_id: row.try_get("volume_id")?,
        volume_name: row.try_get("volume_name")?,
        node: row.try_get("node")?,
        tenant_id: row.try_get("tenant_id")?,
        snapshot: row.try_get("snapshot")?,
        snapshot_name: row.try_get("snapshot_name")?,
        readonly: row.try_get::<i64, _>("readonly")? != 0,
        mountpoint: row.try_get("mountpoint")?,
        export_name: row.try_get("export_name")?,
        state: row.try_get("state")?,
        job,
        created_ms: row.try_get("created_ms")?,
        host: host_report(row)?,
        manager: {
            let m: String = row.try_get("manager")?;
            AttachmentManager::parse(&m)
                .ok_or_else(|| StoreError::Corrupt(format!("attachment manager {m:?}")))?
        },
        volume_size: u64::try_from(row.try_get::<i64, _>("volume_size")?)
            .map_err(|_| StoreError::Corrupt("negative volume size".into()))?,
        front_node: row.try_get("front_node")?,
        front_address: row.try_get("front_address")?,
    })
}

pub(crate) fn snapshot_row(row: &impl Columns) -> StoreResult<Snapshot> {
    let consistency: String = row.try_get("consistency")?;
    let state: String = row.try_get("state")?;
    let count = |col: &str| -> StoreResult<u64> {
        let v: i64 = row.try_get(col)?;
        u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {col}: {v}")))
    };
    Ok(Snapshot {
        id: row.try_get("id")?,
        seq: count("seq")?,
        volume_id: row.try_get("volume_id")?,
        volume_name: row.try_get("volume_name")?,
        tenant_id: row.try_get("tenant_id")?,
        name: row.try_get("name")?,
        consistency: Consistency::parse(&consistency)
            .ok_or_else(|| StoreError::Corrupt(format!("snapshot consistency {consistency:?}")))?,
        volume_size: gib(row, "volume_size_gib")?,
        state: SnapshotState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("snapshot state {state:?}")))?,
        used_bytes: count("used_bytes")?,
        attributes: json_map(&row.try_get::<String, _>("attributes")?)?,
        attachments: count("attachments")?,
        created_ms: row.try_get("created_ms")?,
    })
}

pub(crate) fn node_attachment(row: &impl Columns) -> StoreResult<NodeAttachment> {
    let kind: String = row.try_get("volume_type")?;
    let size = |col: &str| -> StoreResult<Option<u64>> {
        row.try_get::<Option<i64>, _>(col)?
            .map(|v| u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {col}"))))
            .transpose()
    };
    Ok(NodeAttachment {
        attachment: attachment_row(row)?,
        volume_kind: VolumeType::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("volume type {kind:?}")))?,
        volume_size: size("volume_size")?.unwrap_or(0),
        volume_attributes: json_map(&row.try_get::<String, _>("volume_attributes")?)?,
        snapshot_size: size("snapshot_size")?,
        grow_job: row.try_get("volume_grow_job")?,
    })
}

pub(crate) const JOB_COLUMNS: &str =
    "id, tenant_id, type, object, object_name, args, state, status, \
    progress, starttime_ms, endtime_ms, user_id, username, useremail, details, data_movement, \
    created_ms, cancel_ms, committed, paused_ms, movement_rate";

pub(crate) const SNAPSHOT_SELECT: &str = "SELECT s.seq, s.id, s.volume_id, v.name AS volume_name, \
    s.tenant_id, s.name, s.consistency, s.volume_size_gib, s.state, s.used_bytes, \
    s.attributes, s.created_ms, \
    (SELECT COUNT(*) FROM attachments a WHERE a.snapshot = s.id) AS attachments \
    FROM snapshots s JOIN volumes v ON v.id = s.volume_id";

pub(crate) const USER_SELECT: &str =
    "SELECT u.id, u.tenant_id, t.name AS tenant, u.email, u.name, \
    u.password_hash, u.is_admin, u.disabled, u.token_generation, u.created_ms \
    FROM users u JOIN tenants t ON t.id = u.tenant_id";

/// What a copy marked lost records as the generation it missed: its
/// volume's front epoch when it was marked (an SQL expression over
/// `slices`, for the UPDATEs that set `lost_ms`). The front of that epoch
/// stopped writing to it then, so the copy lacks that generation's writes.
pub(crate) const STALE_GENERATION: &str =
    "(SELECT v.front_epoch FROM volumes v WHERE v.id = slices.volume_id)";
