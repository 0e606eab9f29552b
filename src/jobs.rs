//! The job runner: executes persisted jobs (create, delete, resize) and
//! resumes unfinished ones at start.
//!
//! Every step records its intent in the store before touching media and is
//! idempotent, so after a crash a job simply runs again from its recorded
//! steps: a slice copy restarts from the beginning of that slice, a switched
//! slice only has its source removed. A job ends `Done` or `Error`, never
//! stays `Running` once the service is up.

use crate::exports::ExportRegistry;
use crate::service::now_ms;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svs_dataplane::{CopyOptions, DataPlane, DataPlaneError, SliceKey, VolumeLayout};
use svs_domain::{
    column_size, place_volume, plan_resize, validate_new_size, AttachmentArgs, JobKind, JobSpec,
    MediumState, PlacementRequest, ResizeRequest, ResizeVolumeArgs, Slice, GIB,
    MOVEMENT_PLAN_FOUND,
};
use svs_store::{Job, JobEnd, ResizeStep, StepState, Store, StoreError, Volume};
use thiserror::Error;
use tokio::task::JoinSet;
use tracing::{error, info, warn, Instrument};

/// Why a job step failed.
#[derive(Debug, Error)]
enum JobError {
    /// Ends the job in Error with this message as its last detail.
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    DataPlane(#[from] DataPlaneError),
    /// The service is stopping: leave the job as it is for the next start.
    #[error("service is stopping")]
    Stopping,
}

pub struct JobRunner {
    store: Arc<dyn Store>,
    media: Arc<dyn DataPlane>,
    /// Attached volumes: their shared I/O (live moves go through it).
    exports: Arc<ExportRegistry>,
    /// Bytes per second for slice copies; None = unthrottled.
    rate_limit: Option<u64>,
    /// Held while reading free space, planning and booking the plan, so two
    /// jobs never book the same free space.
    allocation: tokio::sync::Mutex<()>,
    stopping: Arc<AtomicBool>,
    tasks: Mutex<JoinSet<()>>,
}

impl JobRunner {
    pub fn new(
        store: Arc<dyn Store>,
        media: Arc<dyn DataPlane>,
        exports: Arc<ExportRegistry>,
        rate_limit: Option<u64>,
    ) -> Arc<JobRunner> {
        Arc::new(JobRunner {
            store,
            media,
            exports,
            rate_limit,
            allocation: tokio::sync::Mutex::new(()),
            stopping: Arc::new(AtomicBool::new(false)),
            tasks: Mutex::new(JoinSet::new()),
        })
    }

    /// Starts every Pending or Running job left by an earlier run.
    pub async fn resume_unfinished(self: &Arc<Self>) -> Result<usize, StoreError> {
        let jobs = self.store.unfinished_jobs().await?;
        for job in &jobs {
            info!(job = job.id, kind = %job.kind, state = job.state.as_str(), "resuming job");
            self.submit(job.id);
        }
        Ok(jobs.len())
    }

    /// Runs a job (already persisted) in the background.
    pub fn submit(self: &Arc<Self>, job_id: i64) {
        let runner = Arc::clone(self);
        let span = tracing::info_span!("job", job = job_id);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move { runner.run(job_id).await }.instrument(span));
    }

    /// Asks running jobs to stop at their next step and waits for them. Their
    /// state stays in the store and they resume at the next start.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let mut tasks = match self.tasks.lock() {
            Ok(mut t) => std::mem::take(&mut *t),
            Err(_) => return,
        };
        while tasks.join_next().await.is_some() {}
    }

    async fn run(self: Arc<Self>, job_id: i64) {
        let job = match self.store.job_by_id(job_id).await {
            Ok(Some(job)) if !job.state.is_finished() => job,
            Ok(_) => return,
            Err(e) => {
                error!(error = %e, "cannot load job");
                return;
            }
        };
        if let Err(e) = self.store.set_job_running(job.id, now_ms()).await {
            error!(error = %e, "cannot mark job running");
            return;
        }
        info!(kind = %job.kind, object = %job.object, "job running");
        let result = match job.spec() {
            Ok(JobSpec::VolumeCreate(_)) => self.create_volume(&job).await,
            Ok(JobSpec::VolumeDelete(_)) => self.delete_volume(&job).await,
            Ok(JobSpec::VolumeModifyExtend(args)) => self.resize_volume(&job, &args).await,
            Ok(JobSpec::AttachmentCreate(args)) => self.attach(&job, &args.node).await,
            Ok(JobSpec::AttachmentDelete(args)) => self.detach(&job, &args.node).await,
            Ok(JobSpec::AttachmentModify(args)) => self.modify_attachment(&job, &args).await,
            Err(e) => Err(JobError::Failed(e.to_string())),
        };
        if result.is_err()
            && !matches!(result, Err(JobError::Stopping))
            && job.kind() == Some(JobKind::VolumeCreate)
        {
            // A volume whose creation failed is not kept half-made.
            self.discard_volume(&job.object).await;
        }
        let end = match result {
            Ok(()) => return,
            Err(JobError::Stopping) => {
                info!("job interrupted by shutdown; it resumes at next start");
                return;
            }
            Err(JobError::Failed(message)) => message,
            Err(JobError::DataPlane(e)) => format!("I/O error: {e}"),
            Err(e) => {
                // Store failures are logged; clients see only that it failed.
                error!(error = %e, "job failed");
                "internal error: see the service log".to_string()
            }
        };
        warn!(detail = %end, "job ended in Error");
        if let Err(e) = self
            .store
            .finish_job(job.id, &JobEnd::error(end, now_ms()))
            .await
        {
            error!(error = %e, "cannot record job failure");
        }
    }

    fn check_stopping(&self) -> Result<(), JobError> {
        if self.stopping.load(Ordering::SeqCst) {
            Err(JobError::Stopping)
        } else {
            Ok(())
        }
    }

    async fn media_states(&self) -> Result<Vec<MediumState>, StoreError> {
        Ok(self
            .store
            .media_usage()
            .await?
            .into_iter()
            .map(|u| MediumState {
                used: u.used(),
                medium: u.record.medium,
            })
            .collect())
    }

    async fn volume(&self, job: &Job) -> Result<Volume, JobError> {
        self.store
            .volume_by_id(&job.object)
            .await?
            .ok_or_else(|| JobError::Failed(format!("volume {} no longer exists", job.object)))
    }

    /// Runs blocking data-plane work off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn DataPlane) -> Result<T, DataPlaneError> + Send + 'static,
    ) -> Result<T, JobError> {
        let media = Arc::clone(&self.media);
        match tokio::task::spawn_blocking(move || f(media.as_ref())).await {
            Ok(r) => r.map_err(|e| match e {
                DataPlaneError::Cancelled => JobError::Stopping,
                other => JobError::DataPlane(other),
            }),
            Err(e) => Err(JobError::Failed(format!("data plane task failed: {e}"))),
        }
    }

    async fn progress(&self, job: &Job, progress: u8, status: &str) -> Result<(), JobError> {
        self.store
            .set_job_progress(job.id, progress, status)
            .await?;
        Ok(())
    }

    async fn done(&self, job: &Job, detail: String) -> Result<(), JobError> {
        info!(detail = %detail, "job done");
        self.store
            .finish_job(job.id, &JobEnd::done(detail, now_ms()))
            .await?;
        Ok(())
    }

    // ---- volume_create ----

    async fn create_volume(&self, job: &Job) -> Result<(), JobError> {
        let volume = self.volume(job).await?;
        let mut slices = self.store.volume_slices(&volume.id).await?;
        if slices.is_empty() {
            let _booking = self.allocation.lock().await;
            let media = self.media_states().await?;
            let request = PlacementRequest {
                size: volume.size,
                resiliency: volume.resiliency,
                zone: volume.zone.clone(),
            };
            match place_volume(&media, &request) {
                Ok(placements) => {
                    slices = self.store.place_slices(&volume.id, &placements).await?;
                }
                Err(e) => {
                    // Nothing was allocated: the volume is not created.
                    self.store.delete_volume(&volume.id).await?;
                    return Err(JobError::Failed(format!(
                        "Could not create volume '{}': {e}",
                        volume.name
                    )));
                }
            }
        }
        let total = slices.len().max(1);
        for (i, row) in slices.iter().enumerate() {
            self.check_stopping()?;
            let key = slice_key(&volume.id, &row.slice);
            let medium = row.slice.medium.clone();
            let bytes = row.slice.size * GIB;
            let created = self
                .blocking(move |dp| dp.create_slice(&medium, &key, bytes))
                .await;
            if let Err(e) = created {
                if matches!(e, JobError::Stopping) {
                    return Err(e);
                }
                return Err(JobError::Failed(format!(
                    "Could not create volume '{}': {e}",
                    volume.name
                )));
            }
            let pct = u8::try_from((i + 1) * 100 / total).unwrap_or(100).min(99);
            self.progress(job, pct, &format!("Created slice {} of {total}", i + 1))
                .await?;
        }
        self.done(
            job,
            format!(
                "Volume '{}' created: {} GiB in {} slice(s)",
                volume.name,
                volume.size,
                slices.len()
            ),
        )
        .await
    }

    /// Best-effort removal of a volume whose creation failed.
    async fn discard_volume(&self, volume_id: &str) {
        let slices = match self.store.volume_slices(volume_id).await {
            Ok(slices) => slices,
            Err(e) => {
                error!(error = %e, "cannot list slices of a failed volume");
                return;
            }
        };
        for row in &slices {
            let key = slice_key(volume_id, &row.slice);
            let medium = row.slice.medium.clone();
            if let Err(e) = self
                .blocking(move |dp| dp.delete_slice(&medium, &key))
                .await
            {
                warn!(error = %e, "cannot remove slice of a failed volume");
            }
        }
        if let Err(e) = self.store.delete_volume(volume_id).await {
            error!(error = %e, "cannot remove failed volume");
        }
    }

    // ---- volume_delete ----

    async fn delete_volume(&self, job: &Job) -> Result<(), JobError> {
        let Some(volume) = self.store.volume_by_id(&job.object).await? else {
            // Already removed by an earlier run of this job.
            return self
                .done(job, format!("Volume {} deleted", job.object))
                .await;
        };
        // Forced delete of an attached volume: its exports go first.
        for a in self.store.all_attachments().await? {
            if a.volume_id == volume.id {
                self.exports.detach(&a.export_name);
            }
        }
        let slices = self.store.volume_slices(&volume.id).await?;
        let total = slices.len().max(1);
        for (i, row) in slices.iter().enumerate() {
            self.check_stopping()?;
            let key = slice_key(&volume.id, &row.slice);
            let medium = row.slice.medium.clone();
            self.blocking(move |dp| dp.delete_slice(&medium, &key))
                .await?;
            let pct = u8::try_from((i + 1) * 100 / total).unwrap_or(100).min(99);
            self.progress(job, pct, &format!("Removed slice {} of {total}", i + 1))
                .await?;
        }
        self.store.delete_volume(&volume.id).await?;
        self.done(job, format!("Volume '{}' deleted", volume.name))
            .await
    }

    // ---- volume_modify_extend ----

    async fn resize_volume(&self, job: &Job, args: &ResizeVolumeArgs) -> Result<(), JobError> {
        let volume = self.volume(job).await?;
        let new_size = args.size;
        let allow_movement = args.allow_data_movement;

        let mut steps = self.store.resize_steps(job.id).await?;
        if steps.is_empty() {
            // The size the request was checked against may have changed.
            validate_new_size(volume.size, new_size)
                .map_err(|e| JobError::Failed(e.to_string()))?;
            let _booking = self.allocation.lock().await;
            let media = self.media_states().await?;
            let slices: Vec<Slice> = self
                .store
                .volume_slices(&volume.id)
                .await?
                .into_iter()
                .map(|r| r.slice)
                .collect();
            let request = ResizeRequest {
                current_size: volume.size,
                new_size,
                slices: &slices,
                resiliency: volume.resiliency,
                allow_data_movement: allow_movement,
            };
            let plan =
                plan_resize(&media, &request).map_err(|e| JobError::Failed(e.to_string()))?;
            let detail = (!plan.is_in_place()).then_some(MOVEMENT_PLAN_FOUND);
            self.store.save_resize_plan(job.id, &plan, detail).await?;
            steps = self.store.resize_steps(job.id).await?;
        }

        let moves: Vec<&ResizeStep> = steps.iter().filter(|s| s.to_medium.is_some()).collect();
        let move_count = moves.len();
        for (i, step) in moves.iter().enumerate() {
            self.check_stopping()?;
            if let Err(e) = self.move_slice(job, &volume, step, i, move_count).await {
                if !matches!(e, JobError::Stopping) {
                    self.discard_unswitched_copies(&volume.id, &steps).await;
                }
                return Err(e);
            }
        }

        // Every slice now sits where it stays: grow each to the new size.
        self.progress(job, if move_count > 0 { 95 } else { 50 }, "Growing slices")
            .await?;
        let slices = self.store.volume_slices(&volume.id).await?;
        let columns = slices
            .iter()
            .map(|r| r.slice.column)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let new_slice_size = column_size(new_size, u32::try_from(columns).unwrap_or(1));
        for row in &slices {
            self.check_stopping()?;
            let key = slice_key(&volume.id, &row.slice);
            let medium = row.slice.medium.clone();
            let bytes = new_slice_size * GIB;
            self.blocking(move |dp| dp.grow_slice(&medium, &key, bytes))
                .await?;
        }
        let detail = format!(
            "Volume '{}' resized from {} GiB to {new_size} GiB{}",
            volume.name,
            volume.size,
            if move_count > 0 {
                format!(" after moving {move_count} slice(s)")
            } else {
                " in place".to_string()
            }
        );
        info!(detail = %detail, "job done");
        self.store
            .complete_resize(
                job.id,
                &volume.id,
                new_size,
                new_slice_size,
                &JobEnd::done(detail, now_ms()),
            )
            .await?;
        self.exports.set_size(&volume.id, new_size * GIB);
        Ok(())
    }

    /// Copy, verify, switch placement, remove the source: each recorded, so a
    /// restart continues from the last recorded state.
    async fn move_slice(
        &self,
        job: &Job,
        volume: &Volume,
        step: &ResizeStep,
        index: usize,
        count: usize,
    ) -> Result<(), JobError> {
        let target = step.to_medium.clone().unwrap_or_default();
        let row = self
            .store
            .volume_slices(&volume.id)
            .await?
            .into_iter()
            .find(|r| r.slice.id == step.slice_id)
            .ok_or_else(|| JobError::Failed(format!("slice {} disappeared", step.slice_id)))?;
        let key = slice_key(&volume.id, &row.slice);
        let label = format!(
            "slice c{}-k{} from {} to {target}",
            row.slice.copy, row.slice.column, step.from_medium
        );

        if step.state == StepState::Planned {
            let base = (index * 90 / count.max(1)) as u64;
            let span = (90 / count.max(1)) as u64;
            let status = format!("Moving {label} ({} of {count})", index + 1);
            self.progress(job, u8::try_from(base).unwrap_or(0), &status)
                .await?;

            // Progress is sampled from the copy thread and written by this task.
            let shared = Arc::new(Mutex::new((0u64, 0u64)));
            let cancel = Arc::new(AtomicBool::new(false));
            let options = CopyOptions {
                rate_limit: self.rate_limit,
                cancel: Arc::clone(&cancel),
            };
            let (from, to, k, sink) = (
                step.from_medium.clone(),
                target.clone(),
                key.clone(),
                Arc::clone(&shared),
            );
            let media = Arc::clone(&self.media);
            // An attached volume is in use: move through its shared I/O so
            // writes during the copy are kept, and switch with I/O paused.
            let live = self.exports.volume_io(&volume.id);
            let (store, handle, switch) = (
                Arc::clone(&self.store),
                tokio::runtime::Handle::current(),
                (*step).clone(),
            );
            let (copy_no, column) = (row.slice.copy, row.slice.column);
            let copy = tokio::task::spawn_blocking(move || {
                let mut report = |done, total| {
                    if let Ok(mut p) = sink.lock() {
                        *p = (done, total);
                    }
                };
                match live {
                    Some(io) => io
                        .move_slice(copy_no, column, &to, &options, &mut report, &mut || {
                            handle
                                .block_on(store.switch_slice(&switch))
                                .map_err(|e| e.to_string())
                        })
                        .map(|()| None),
                    None => media
                        .copy_slice(&from, &to, &k, &options, &mut report)
                        .map(Some),
                }
            });
            tokio::pin!(copy);
            let mut last_pct = u64::MAX;
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            let started = Instant::now();
            let result = loop {
                tokio::select! {
                    r = &mut copy => break r,
                    _ = tick.tick() => {
                        if self.stopping.load(Ordering::SeqCst) {
                            cancel.store(true, Ordering::SeqCst);
                        }
                        let (done, total) = shared.lock().map(|p| *p).unwrap_or((0, 0));
                        let pct = base + (done * span).checked_div(total).unwrap_or(0);
                        if pct != last_pct {
                            last_pct = pct;
                            self.progress(job, u8::try_from(pct).unwrap_or(0), &status).await?;
                        }
                    }
                }
            };
            let digest = match result {
                Ok(Ok(d)) => d,
                Ok(Err(DataPlaneError::Cancelled)) => return Err(JobError::Stopping),
                Ok(Err(e)) => return Err(JobError::Failed(format!("Moving {label} failed: {e}"))),
                Err(e) => return Err(JobError::Failed(format!("Moving {label} failed: {e}"))),
            };
            info!(slice = %label, secs = started.elapsed().as_secs_f64(), "slice copied and verified");
            let detail = match digest {
                // Offline copy: verified as a whole; switch the placement now.
                Some(digest) => {
                    self.check_stopping()?;
                    self.store.switch_slice(step).await?;
                    format!("Moved {label}: copy verified (xxh3-128 {:032x})", digest.0)
                }
                // Live copy: verified chunk by chunk, switched with I/O paused.
                None => format!("Moved {label} while in use: copy verified chunk by chunk"),
            };
            self.store.add_job_detail(job.id, &detail).await?;
        }
        if step.state != StepState::Done {
            let (from, k) = (step.from_medium.clone(), key.clone());
            self.blocking(move |dp| dp.delete_slice(&from, &k)).await?;
            self.store.finish_step(step.id).await?;
        }
        Ok(())
    }

    /// After a failed movement: remove any copy on a target that never
    /// became the slice's placement (complete or partial).
    async fn discard_unswitched_copies(&self, volume_id: &str, steps: &[ResizeStep]) {
        let Ok(current) = self
            .store
            .resize_steps(steps.first().map_or(0, |s| s.job_id))
            .await
        else {
            return;
        };
        let slices = self
            .store
            .volume_slices(volume_id)
            .await
            .unwrap_or_default();
        for step in current.iter().filter(|s| s.state == StepState::Switched) {
            // The slice lives on the target; its old copy must not linger.
            if let Some(row) = slices.iter().find(|r| r.slice.id == step.slice_id) {
                let (from, key) = (step.from_medium.clone(), slice_key(volume_id, &row.slice));
                if self
                    .blocking(move |dp| dp.delete_slice(&from, &key))
                    .await
                    .is_ok()
                {
                    let _ = self.store.finish_step(step.id).await;
                }
            }
        }
        for step in current.iter().filter(|s| s.state == StepState::Planned) {
            let (Some(target), Some(row)) = (
                step.to_medium.clone(),
                slices.iter().find(|r| r.slice.id == step.slice_id),
            ) else {
                continue;
            };
            let key = slice_key(volume_id, &row.slice);
            if let Err(e) = self
                .blocking(move |dp| dp.delete_slice(&target, &key))
                .await
            {
                warn!(error = %e, "cannot remove an abandoned copy");
            }
        }
    }
}

impl JobRunner {
    // ---- attachments ----

    async fn attach(&self, job: &Job, node: &str) -> Result<(), JobError> {
        let volume = self.volume(job).await?;
        let node = node.to_string();
        let attachment = self
            .store
            .get_attachment(&volume.id, &node)
            .await?
            .ok_or_else(|| {
                JobError::Failed(format!("attachment to node '{node}' no longer exists"))
            })?;
        let layout = volume_layout(&volume, &self.store.volume_slices(&volume.id).await?);
        let exports = Arc::clone(&self.exports);
        let (name, n, ro) = (
            attachment.export_name.clone(),
            node.clone(),
            attachment.readonly,
        );
        let opened = tokio::task::spawn_blocking(move || exports.attach(&name, &n, ro, &layout))
            .await
            .map_err(|e| JobError::Failed(e.to_string()))?;
        if let Err(e) = opened {
            self.store.delete_attachment(&volume.id, &node).await?;
            return Err(JobError::Failed(format!(
                "Could not attach volume '{}' to node '{node}': {e}",
                volume.name
            )));
        }
        self.store
            .set_attachment_state(&volume.id, &node, "Attached")
            .await?;
        self.done(
            job,
            format!("Volume '{}' attached to node '{node}'", volume.name),
        )
        .await
    }

    async fn detach(&self, job: &Job, node: &str) -> Result<(), JobError> {
        let volume = self.volume(job).await?;
        if let Some(a) = self.store.get_attachment(&volume.id, node).await? {
            // Closes the node's connections before the record goes.
            self.exports.detach(&a.export_name);
            self.store.delete_attachment(&volume.id, node).await?;
        }
        self.done(
            job,
            format!("Volume '{}' detached from node '{node}'", volume.name),
        )
        .await
    }

    async fn modify_attachment(&self, job: &Job, args: &AttachmentArgs) -> Result<(), JobError> {
        let volume = self.volume(job).await?;
        let node = &args.node;
        let a = self
            .store
            .get_attachment(&volume.id, node)
            .await?
            .ok_or_else(|| {
                JobError::Failed(format!("attachment to node '{node}' no longer exists"))
            })?;
        let (readonly, mountpoint) = (args.readonly, args.mountpoint.clone());
        self.store
            .update_attachment(&volume.id, node, readonly, &mountpoint)
            .await?;
        self.exports.set_readonly(&a.export_name, readonly);
        self.done(
            job,
            format!(
                "Attachment of volume '{}' to node '{node}' is now {}",
                volume.name,
                if readonly { "read-only" } else { "read-write" }
            ),
        )
        .await
    }
}

/// Where each slice of a volume is, for opening it for I/O.
pub fn volume_layout(volume: &Volume, slices: &[svs_store::SliceRow]) -> VolumeLayout {
    let copies = slices.iter().map(|r| r.slice.copy + 1).max().unwrap_or(0) as usize;
    let columns = slices.iter().map(|r| r.slice.column + 1).max().unwrap_or(0) as usize;
    let mut media = vec![vec![String::new(); columns]; copies];
    for r in slices {
        media[r.slice.copy as usize][r.slice.column as usize] = r.slice.medium.clone();
    }
    VolumeLayout {
        volume_id: volume.id.clone(),
        size: volume.size * GIB,
        media,
    }
}

pub fn slice_key(volume_id: &str, slice: &Slice) -> SliceKey {
    SliceKey {
        volume_id: volume_id.to_string(),
        copy: slice.copy,
        column: slice.column,
    }
}
