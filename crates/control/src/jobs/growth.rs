//! Growing a volume's filesystem to fill the volume: the last step of a
//! resize (`volume_modify_extend`), and on its own the
//! `volume_grow_filesystem` job that tries again after a growth failed.
//!
//! The hosts' agents grow a filesystem they hold mounted read-write (the
//! job asks and waits for their reports, see `agents`); svs grows one that
//! nothing has attached. Either way the volume's filesystem record follows
//! the outcome: a failure leaves the size the filesystem really fills and
//! why, so the volume shows the mismatch until a growth succeeds.

use super::agents::{agent_growers, wait_for_growth};
use super::{JobContext, JobError};
use crate::attributes::{Filesystem, VolumeAttributes};
use svs_domain::{Gib, GrowFilesystemArgs, GIB};
use svs_hostdev::{filesystem_size, SUPERBLOCK_BYTES};
use svs_store::{Job, Volume};

/// The filesystem svs made on the volume, if it made one.
pub(super) fn provisioned(volume: &Volume) -> Option<Filesystem> {
    let attributes = VolumeAttributes::from_record(&volume.attributes);
    attributes
        .filesystem
        .filter(|_| attributes.filesystem_provisioned)
}

/// `10 GiB`, or `9.8 GiB` when not whole.
pub(crate) fn gib_text(bytes: u64) -> String {
    if bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else {
        format!("{:.1} GiB", bytes as f64 / GIB as f64)
    }
}

/// The step after the slices of an attached volume grew: the agents of
/// `growers` grow the filesystem to `new_size` GiB (the volume already has
/// that size, and its filesystem record says `before`, the size the
/// filesystem filled). The note for the details.
pub(super) async fn grow_by_agents(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    fs: Filesystem,
    growers: &[String],
    (before, new_size): (Gib, Gib),
) -> Result<String, JobError> {
    let outcome = wait_for_growth(ctx, job, volume, fs, growers, (before, new_size)).await;
    record_outcome(ctx, volume, before, &outcome).await?;
    outcome
}

/// Grows the filesystem of a volume nothing has attached, here, to fill
/// its `new_size` GiB (its slices have that size). The note for the
/// details says the size the filesystem really had before.
pub(super) async fn grow_unattached(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    fs: Filesystem,
    new_size: Gib,
) -> Result<String, JobError> {
    ctx.progress(job, 97, &format!("Growing filesystem {}", fs.as_str()))
        .await?;
    let io = ctx.volume_io(volume).await?;
    io.set_size(new_size * GIB);
    let head = ctx
        .on_io(&io, |io| {
            let mut head = vec![0u8; SUPERBLOCK_BYTES];
            io.read(0, &mut head).map(|()| head)
        })
        .await?
        .map_err(|e| JobError::Transient(format!("Cannot read the filesystem: {e}")))?;
    let Some((_, bytes)) = filesystem_size(&head) else {
        return Err(JobError::Failed(format!(
            "Could not grow the {} filesystem: no {} filesystem found on the volume",
            fs.as_str(),
            fs.as_str()
        )));
    };
    let before = bytes / GIB;
    if bytes >= new_size * GIB {
        ctx.store
            .set_volume_filesystem(&volume.id, None, None)
            .await?;
        return Ok(format!(
            "Filesystem {} already fills {new_size} GiB",
            fs.as_str()
        ));
    }
    let outcome = ctx.grow_filesystem(io, fs).await.map(|()| {
        format!(
            "Filesystem grown from {} to {new_size} GiB",
            gib_text(bytes)
        )
    });
    record_outcome(ctx, volume, before, &outcome).await?;
    outcome
}

/// The volume's filesystem record after a growth: it fills the volume, or
/// it still fills `before` GiB and says why not more.
async fn record_outcome(
    ctx: &JobContext,
    volume: &Volume,
    before: Gib,
    outcome: &Result<String, JobError>,
) -> Result<(), JobError> {
    let (size, error) = match outcome {
        Ok(_) => (None, None),
        Err(JobError::Failed(m) | JobError::Transient(m)) => (Some(before), Some(m.as_str())),
        // Stopping, or the store failed: the record stays as it was.
        Err(_) => return Ok(()),
    };
    ctx.store
        .set_volume_filesystem(&volume.id, size, error)
        .await?;
    Ok(())
}

/// `volume_grow_filesystem`: after a growth failed (the volume shows its
/// filesystem smaller than itself), grows it again to fill the volume.
pub(super) async fn grow_filesystem_again(
    ctx: &JobContext,
    job: &Job,
    _args: &GrowFilesystemArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let Some(fs) = provisioned(&volume) else {
        return Err(JobError::Failed(format!(
            "Volume '{}' has no filesystem made by svs",
            volume.name
        )));
    };
    let before = volume.filesystem_size.unwrap_or(volume.size);
    let growers = agent_growers(ctx, &volume).await?;
    let note = if !growers.is_empty() {
        ctx.changes.notify();
        grow_by_agents(ctx, job, &volume, fs, &growers, (before, volume.size)).await?
    } else if ctx.exports.volume_io(&volume.id).is_some() {
        return Err(JobError::Failed(format!(
            "Filesystem {} not grown: volume '{}' is attached, but no host agent holds it mounted \
             read-write; grow it on its host, or detach it and try again",
            fs.as_str(),
            volume.name
        )));
    } else {
        grow_unattached(ctx, job, &volume, fs, volume.size).await?
    };
    ctx.done(job, format!("Volume '{}': {note}", volume.name))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_whole_or_tenth_gib() {
        assert_eq!(gib_text(10 * GIB), "10 GiB");
        assert_eq!(gib_text(9 * GIB + 8 * GIB / 10), "9.8 GiB");
    }
}
