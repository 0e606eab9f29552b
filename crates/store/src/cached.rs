//! A store wrapper serving volume reads from memory.

use crate::records::*;
use crate::traits::*;
use crate::StoreResult;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use svs_domain::{Gib, ResizePlan, SliceMove, SlicePlacement, SnapshotState, VolumeState};

/// Wraps a store and serves `get_volume` (the hottest call of the API) from
/// memory; every other call goes to the wrapped store. The cache is dropped
/// after every change made through this wrapper (refresh tokens aside, which
/// no volume read shows), whether or not the change succeeded.
///
/// Correct only when every change to the data goes through this one value in
/// a single process: for SQLite, `svs serve` holds the data directory's lock,
/// so it is the only writer of volumes, slices, jobs and policies (`svs user
/// add` only adds users). A store shared by several svs instances (such as a
/// PostgreSQL one) must not be wrapped: an instance would never see the
/// others' changes and would serve stale volumes.
pub struct CachedStore<S> {
    inner: S,
    volumes: VolumeCache,
}

impl<S: Store> CachedStore<S> {
    pub fn new(inner: S) -> CachedStore<S> {
        CachedStore {
            inner,
            volumes: VolumeCache::default(),
        }
    }

    /// The wrapped store. Changes made through it bypass the cache.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Drops the cache after a change, then passes its result on. Also after
    /// a failure: a call may fail after it committed (a read that follows).
    fn changed<T>(&self, result: StoreResult<T>) -> StoreResult<T> {
        self.volumes.invalidate();
        result
    }
}

/// `get_volume` results by (tenant, name or id). A read that raced a write
/// must not store what it read: entries are only added while the generation
/// is the one seen before the query.
#[derive(Debug, Default)]
struct VolumeCache {
    generation: AtomicU64,
    entries: RwLock<HashMap<(i64, String), Volume>>,
}

/// Bound on cached volumes; the cache is emptied when it is full.
const VOLUME_CACHE_MAX: usize = 100_000;

impl VolumeCache {
    fn get(&self, key: &(i64, String)) -> Option<Volume> {
        self.entries.read().ok()?.get(key).cloned()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn insert(&self, seen: u64, key: (i64, String), volume: &Volume) {
        if let Ok(mut entries) = self.entries.write() {
            // Checked under the lock: `invalidate` bumps it under the same lock.
            if self.generation.load(Ordering::Acquire) != seen {
                return;
            }
            if entries.len() >= VOLUME_CACHE_MAX {
                entries.clear();
            }
            entries.insert(key, volume.clone());
        }
    }

    /// Called after every change that a volume read can see.
    fn invalidate(&self) {
        if let Ok(mut entries) = self.entries.write() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            entries.clear();
        }
    }
}

#[async_trait]
impl<S: Store> UserStore for CachedStore<S> {
    async fn user_count(&self) -> StoreResult<u64> {
        self.inner.user_count().await
    }

    async fn create_user(&self, user: &NewUser) -> StoreResult<User> {
        self.changed(self.inner.create_user(user).await)
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        self.inner.user_by_email(email).await
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        self.inner.user_by_id(id).await
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        self.inner.list_users().await
    }

    // Users are not cached, and no volume read shows one.
    async fn update_user(&self, id: i64, change: &UserChange) -> StoreResult<User> {
        self.inner.update_user(id, change).await
    }

    async fn delete_user(&self, id: i64) -> StoreResult<()> {
        self.inner.delete_user(id).await
    }

    async fn add_refresh_token(&self, token: &NewRefreshToken) -> StoreResult<()> {
        self.inner.add_refresh_token(token).await
    }

    async fn refresh_token(&self, token_hash: &str) -> StoreResult<Option<RefreshTokenRecord>> {
        self.inner.refresh_token(token_hash).await
    }

    async fn revoke_refresh_tokens(&self, user_id: i64) -> StoreResult<u64> {
        self.inner.revoke_refresh_tokens(user_id).await
    }

    async fn rotate_refresh_token(
        &self,
        token_hash: &str,
        new_hash: &str,
        now_ms: i64,
    ) -> StoreResult<RefreshRotation> {
        self.inner
            .rotate_refresh_token(token_hash, new_hash, now_ms)
            .await
    }

    async fn revoke_refresh_family(&self, family: &str) -> StoreResult<u64> {
        self.inner.revoke_refresh_family(family).await
    }

    async fn purge_refresh_tokens(&self, now_ms: i64) -> StoreResult<u64> {
        self.inner.purge_refresh_tokens(now_ms).await
    }
}

#[async_trait]
impl<S: Store> MediaStore for CachedStore<S> {
    async fn sync_media(&self, media: &[MediumRecord]) -> StoreResult<()> {
        self.changed(self.inner.sync_media(media).await)
    }

    async fn media_usage(&self) -> StoreResult<Vec<MediumUsage>> {
        self.inner.media_usage().await
    }

    async fn node_volume_counts(&self) -> StoreResult<HashMap<String, u64>> {
        self.inner.node_volume_counts().await
    }

    async fn sync_nodes(&self, nodes: &[NodeRecord]) -> StoreResult<()> {
        self.changed(self.inner.sync_nodes(nodes).await)
    }

    async fn list_nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        self.inner.list_nodes().await
    }

    async fn set_medium_failed(&self, id: &str, now_ms: i64) -> StoreResult<bool> {
        self.changed(self.inner.set_medium_failed(id, now_ms).await)
    }

    async fn set_node_address(&self, name: &str, address: Option<&str>) -> StoreResult<()> {
        self.changed(self.inner.set_node_address(name, address).await)
    }

    async fn create_node(&self, node: &NodeRecord) -> StoreResult<()> {
        self.inner.create_node(node).await
    }

    async fn create_medium(&self, medium: &MediumRecord) -> StoreResult<()> {
        self.changed(self.inner.create_medium(medium).await)
    }

    async fn set_medium_size(&self, id: &str, size: Gib) -> StoreResult<()> {
        self.changed(self.inner.set_medium_size(id, size).await)
    }

    async fn delete_medium(&self, id: &str) -> StoreResult<MediumRecord> {
        self.changed(self.inner.delete_medium(id).await)
    }

    async fn delete_node(&self, name: &str) -> StoreResult<()> {
        self.changed(self.inner.delete_node(name).await)
    }

    async fn drain_medium(&self, id: &str, job: &NewJob) -> StoreResult<(i64, bool)> {
        self.changed(self.inner.drain_medium(id, job).await)
    }

    async fn undrain_medium(&self, id: &str) -> StoreResult<()> {
        self.changed(self.inner.undrain_medium(id).await)
    }
}

/// Agents' credentials and reports: no volume read shows them.
#[async_trait]
impl<S: Store> NodeAgentStore for CachedStore<S> {
    async fn set_node_credential(&self, credential: &NodeCredential) -> StoreResult<()> {
        self.inner.set_node_credential(credential).await
    }

    async fn revoke_node_credential(&self, node: &str) -> StoreResult<bool> {
        self.inner.revoke_node_credential(node).await
    }

    async fn node_credential(&self, credential_id: &str) -> StoreResult<Option<NodeCredential>> {
        self.inner.node_credential(credential_id).await
    }

    async fn touch_node_agent(&self, node: &str, now_ms: i64) -> StoreResult<()> {
        self.inner.touch_node_agent(node, now_ms).await
    }

    async fn node_agents(&self) -> StoreResult<Vec<NodeAgentRecord>> {
        self.inner.node_agents().await
    }

    async fn node_attachments(&self, node: &str) -> StoreResult<Vec<NodeAttachment>> {
        self.inner.node_attachments(node).await
    }

    async fn set_host_report(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        report: &HostReport,
    ) -> StoreResult<()> {
        self.inner
            .set_host_report(volume_id, snapshot, node, report)
            .await
    }
}

#[async_trait]
impl<S: Store> StorageNodeStore for CachedStore<S> {
    async fn register_storage_node(
        &self,
        registration: &StorageRegistration,
    ) -> StoreResult<StorageRegistered> {
        // Copies may be marked lost: volumes' lost-slice counts change.
        self.changed(self.inner.register_storage_node(registration).await)
    }

    async fn storage_nodes(&self) -> StoreResult<Vec<StorageNodeRecord>> {
        self.inner.storage_nodes().await
    }

    async fn mark_storage_node_offline(
        &self,
        node: &str,
        heard_before_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Vec<String>>> {
        self.changed(
            self.inner
                .mark_storage_node_offline(node, heard_before_ms, now_ms)
                .await,
        )
    }

    async fn node_copies(&self, node: &str) -> StoreResult<Vec<NodeCopy>> {
        self.inner.node_copies(node).await
    }
}

#[async_trait]
impl<S: Store> FrontStore for CachedStore<S> {
    // No volume read shows a volume's front node: the cache stays.
    async fn set_front_node(&self, volume_id: &str, node: Option<&str>) -> StoreResult<()> {
        self.inner.set_front_node(volume_id, node).await
    }

    async fn volume_front(&self, volume_id: &str) -> StoreResult<VolumeFront> {
        self.inner.volume_front(volume_id).await
    }

    async fn clear_unattached_front(&self, volume_id: &str) -> StoreResult<bool> {
        self.inner.clear_unattached_front(volume_id).await
    }

    async fn node_fronts(&self, node: &str) -> StoreResult<Vec<NodeFront>> {
        self.inner.node_fronts(node).await
    }

    async fn unattached_fronts(&self) -> StoreResult<Vec<String>> {
        self.inner.unattached_fronts().await
    }

    async fn front_counts(&self) -> StoreResult<HashMap<String, u64>> {
        self.inner.front_counts().await
    }

    async fn set_front_report(&self, node: &str, open: &str, now_ms: i64) -> StoreResult<()> {
        self.inner.set_front_report(node, open, now_ms).await
    }

    async fn front_reports(&self) -> StoreResult<Vec<(String, String)>> {
        self.inner.front_reports().await
    }
}

#[async_trait]
impl<S: Store> PolicyStore for CachedStore<S> {
    async fn create_policy(&self, tenant_id: i64, policy: &PolicyWrite) -> StoreResult<Policy> {
        self.changed(self.inner.create_policy(tenant_id, policy).await)
    }

    async fn list_policies(&self, tenant_id: i64) -> StoreResult<Vec<Policy>> {
        self.inner.list_policies(tenant_id).await
    }

    async fn get_policy(&self, tenant_id: i64, name: &str) -> StoreResult<Option<Policy>> {
        self.inner.get_policy(tenant_id, name).await
    }

    async fn update_policy(
        &self,
        tenant_id: i64,
        name: &str,
        policy: &PolicyWrite,
    ) -> StoreResult<Policy> {
        self.changed(self.inner.update_policy(tenant_id, name, policy).await)
    }

    async fn delete_policy(&self, tenant_id: i64, name: &str) -> StoreResult<()> {
        self.changed(self.inner.delete_policy(tenant_id, name).await)
    }
}

#[async_trait]
impl<S: Store> VolumeStore for CachedStore<S> {
    async fn create_volume(&self, volume: &NewVolume, job: &NewJob) -> StoreResult<i64> {
        self.changed(self.inner.create_volume(volume, job).await)
    }

    async fn get_volume(&self, tenant_id: i64, name_or_id: &str) -> StoreResult<Option<Volume>> {
        let key = (tenant_id, name_or_id.to_string());
        if let Some(volume) = self.volumes.get(&key) {
            return Ok(Some(volume));
        }
        let seen = self.volumes.generation();
        let volume = self.inner.get_volume(tenant_id, name_or_id).await?;
        if let Some(v) = &volume {
            self.volumes.insert(seen, key, v);
        }
        Ok(volume)
    }

    async fn volume_by_id(&self, id: &str) -> StoreResult<Option<Volume>> {
        self.inner.volume_by_id(id).await
    }

    async fn list_volumes(&self, tenant_id: i64, page: Option<Page>) -> StoreResult<Vec<Volume>> {
        self.inner.list_volumes(tenant_id, page).await
    }

    async fn all_volumes(&self) -> StoreResult<Vec<Volume>> {
        self.inner.all_volumes().await
    }

    async fn volume_slices(&self, volume_id: &str) -> StoreResult<Vec<SliceRow>> {
        self.inner.volume_slices(volume_id).await
    }

    async fn placed_volumes_on(&self, media: &[String]) -> StoreResult<Vec<PlacedVolume>> {
        self.inner.placed_volumes_on(media).await
    }

    async fn start_volume_job(
        &self,
        volume_id: &str,
        state: VolumeState,
        job: &NewJob,
    ) -> StoreResult<i64> {
        self.changed(self.inner.start_volume_job(volume_id, state, job).await)
    }

    async fn place_slices(
        &self,
        volume_id: &str,
        placements: &[SlicePlacement],
    ) -> StoreResult<Vec<SliceRow>> {
        self.changed(self.inner.place_slices(volume_id, placements).await)
    }

    async fn delete_volume(&self, volume_id: &str) -> StoreResult<()> {
        self.changed(self.inner.delete_volume(volume_id).await)
    }

    async fn set_volume_attributes(
        &self,
        volume_id: &str,
        attributes: &serde_json::Map<String, serde_json::Value>,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .set_volume_attributes(volume_id, attributes)
                .await,
        )
    }

    async fn set_volume_filesystem(
        &self,
        volume_id: &str,
        size: Option<Gib>,
        error: Option<&str>,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .set_volume_filesystem(volume_id, size, error)
                .await,
        )
    }

    async fn save_resize_plan(
        &self,
        job_id: i64,
        plan: &ResizePlan,
        detail: Option<&str>,
    ) -> StoreResult<()> {
        self.changed(self.inner.save_resize_plan(job_id, plan, detail).await)
    }

    async fn resize_steps(&self, job_id: i64) -> StoreResult<Vec<ResizeStep>> {
        self.inner.resize_steps(job_id).await
    }

    async fn switch_slice(&self, step: &ResizeStep, details: &[String]) -> StoreResult<()> {
        self.changed(self.inner.switch_slice(step, details).await)
    }

    async fn record_step_failure(&self, step_id: i64, cause: &str) -> StoreResult<u32> {
        self.inner.record_step_failure(step_id, cause).await
    }

    async fn save_undo_steps(&self, job_id: i64, moves: &[SliceMove]) -> StoreResult<()> {
        self.inner.save_undo_steps(job_id, moves).await
    }

    async fn next_front_epoch(&self, volume_id: &str) -> StoreResult<u64> {
        self.changed(self.inner.next_front_epoch(volume_id).await)
    }

    async fn mark_slice_lost(
        &self,
        volume_id: &str,
        copy: u32,
        column: u32,
        medium: &str,
        now_ms: i64,
    ) -> StoreResult<bool> {
        // The volume's lost-slice counts change.
        self.changed(
            self.inner
                .mark_slice_lost(volume_id, copy, column, medium, now_ms)
                .await,
        )
    }

    async fn record_copy_checkpoint(
        &self,
        step_id: i64,
        checkpoint: Option<CopyCheckpoint>,
    ) -> StoreResult<()> {
        // Steps are not cached: nothing to invalidate.
        self.inner.record_copy_checkpoint(step_id, checkpoint).await
    }

    async fn finish_step(&self, step_id: i64) -> StoreResult<()> {
        self.changed(self.inner.finish_step(step_id).await)
    }

    async fn record_resize(
        &self,
        job_id: i64,
        volume_id: &str,
        new_size: Gib,
        new_slice_size: Gib,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .record_resize(job_id, volume_id, new_size, new_slice_size)
                .await,
        )
    }

    async fn complete_resize(
        &self,
        job_id: i64,
        volume_id: &str,
        new_size: Gib,
        new_slice_size: Gib,
        end: &JobEnd,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .complete_resize(job_id, volume_id, new_size, new_slice_size, end)
                .await,
        )
    }
}

#[async_trait]
impl<S: Store> JobStore for CachedStore<S> {
    async fn get_job(&self, tenant_id: i64, id: i64) -> StoreResult<Option<Job>> {
        self.inner.get_job(tenant_id, id).await
    }

    async fn list_jobs(&self, tenant_id: i64, filter: &JobFilter) -> StoreResult<Vec<Job>> {
        self.inner.list_jobs(tenant_id, filter).await
    }

    async fn job_by_id(&self, id: i64) -> StoreResult<Option<Job>> {
        self.inner.job_by_id(id).await
    }

    async fn unfinished_jobs(&self) -> StoreResult<Vec<Job>> {
        self.inner.unfinished_jobs().await
    }

    async fn active_volume_job(&self, volume_id: &str) -> StoreResult<Option<Job>> {
        self.inner.active_volume_job(volume_id).await
    }

    async fn create_job(&self, job: &NewJob) -> StoreResult<i64> {
        self.changed(self.inner.create_job(job).await)
    }

    // A volume read shows the job holding the volume.
    async fn hold_volume(&self, volume_id: &str, job_id: i64) -> StoreResult<bool> {
        self.changed(self.inner.hold_volume(volume_id, job_id).await)
    }

    async fn release_volume(&self, volume_id: &str, job_id: i64) -> StoreResult<()> {
        self.changed(self.inner.release_volume(volume_id, job_id).await)
    }

    async fn step_slices(&self, job_id: i64) -> StoreResult<Vec<StepSlice>> {
        self.inner.step_slices(job_id).await
    }

    async fn set_job_running(&self, id: i64, now_ms: i64) -> StoreResult<()> {
        self.changed(self.inner.set_job_running(id, now_ms).await)
    }

    async fn set_job_progress(&self, id: i64, progress: u8, status: &str) -> StoreResult<()> {
        self.changed(self.inner.set_job_progress(id, progress, status).await)
    }

    async fn add_job_detail(&self, id: i64, detail: &str) -> StoreResult<()> {
        self.changed(self.inner.add_job_detail(id, detail).await)
    }

    async fn finish_job(&self, id: i64, end: &JobEnd) -> StoreResult<()> {
        self.changed(self.inner.finish_job(id, end).await)
    }

    async fn request_job_cancel(
        &self,
        tenant_id: i64,
        id: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Job>> {
        self.inner.request_job_cancel(tenant_id, id, now_ms).await
    }

    async fn commit_job(&self, id: i64) -> StoreResult<bool> {
        self.inner.commit_job(id).await
    }

    async fn job_controls(&self, ids: &[i64]) -> StoreResult<Vec<JobControl>> {
        self.inner.job_controls(ids).await
    }

    async fn steer_job(
        &self,
        tenant_id: i64,
        id: i64,
        steering: &JobSteering,
        now_ms: i64,
    ) -> StoreResult<Option<Job>> {
        self.inner.steer_job(tenant_id, id, steering, now_ms).await
    }

    async fn delete_job(&self, tenant_id: i64, id: i64) -> StoreResult<bool> {
        self.inner.delete_job(tenant_id, id).await
    }

    async fn claim_jobs(&self, terms: &LeaseTerms<'_>, limit: usize) -> StoreResult<Vec<JobLease>> {
        self.inner.claim_jobs(terms, limit).await
    }

    async fn claim_job(&self, id: i64, terms: &LeaseTerms<'_>) -> StoreResult<Option<JobLease>> {
        self.inner.claim_job(id, terms).await
    }

    async fn renew_job_leases(
        &self,
        leases: &[JobLease],
        terms: &LeaseTerms<'_>,
    ) -> StoreResult<Vec<i64>> {
        self.inner.renew_job_leases(leases, terms).await
    }

    async fn release_job_lease(&self, lease: &JobLease) -> StoreResult<()> {
        self.inner.release_job_lease(lease).await
    }

    async fn end_all_job_leases(&self) -> StoreResult<u64> {
        self.inner.end_all_job_leases().await
    }
}

#[async_trait]
impl<S: Store> AttachmentStore for CachedStore<S> {
    async fn create_attachment(
        &self,
        attachment: &NewAttachment,
        job: &NewJob,
    ) -> StoreResult<i64> {
        self.changed(self.inner.create_attachment(attachment, job).await)
    }

    async fn list_attachments(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Attachment>> {
        self.inner.list_attachments(tenant_id, volume_id).await
    }

    async fn all_attachments(&self) -> StoreResult<Vec<Attachment>> {
        self.inner.all_attachments().await
    }

    async fn get_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
    ) -> StoreResult<Option<Attachment>> {
        self.inner.get_attachment(volume_id, snapshot, node).await
    }

    async fn set_attachment_state(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        state: &str,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .set_attachment_state(volume_id, snapshot, node, state)
                .await,
        )
    }

    async fn update_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        readonly: bool,
        mountpoint: &str,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .update_attachment(volume_id, snapshot, node, readonly, mountpoint)
                .await,
        )
    }

    async fn delete_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
    ) -> StoreResult<()> {
        self.changed(
            self.inner
                .delete_attachment(volume_id, snapshot, node)
                .await,
        )
    }
}

/// Snapshots are not cached; changes that claim a volume drop the cache.
#[async_trait]
impl<S: Store> SnapshotStore for CachedStore<S> {
    async fn create_snapshot(&self, snapshot: &NewSnapshot, job: &NewJob) -> StoreResult<i64> {
        self.changed(self.inner.create_snapshot(snapshot, job).await)
    }

    async fn list_snapshots(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Snapshot>> {
        self.inner.list_snapshots(tenant_id, volume_id).await
    }

    async fn volume_snapshots(&self, volume_id: &str) -> StoreResult<Vec<Snapshot>> {
        self.inner.volume_snapshots(volume_id).await
    }

    async fn get_snapshot(
        &self,
        volume_id: &str,
        name_or_id: &str,
    ) -> StoreResult<Option<Snapshot>> {
        self.inner.get_snapshot(volume_id, name_or_id).await
    }

    async fn snapshot_by_id(&self, id: &str) -> StoreResult<Option<Snapshot>> {
        self.inner.snapshot_by_id(id).await
    }

    async fn start_snapshot_job(
        &self,
        snapshot_id: &str,
        state: Option<SnapshotState>,
        job: &NewJob,
    ) -> StoreResult<i64> {
        self.changed(self.inner.start_snapshot_job(snapshot_id, state, job).await)
    }

    async fn set_snapshot_state(&self, id: &str, state: SnapshotState) -> StoreResult<()> {
        self.inner.set_snapshot_state(id, state).await
    }

    async fn update_snapshot(
        &self,
        id: &str,
        name: &str,
        attributes: &serde_json::Map<String, serde_json::Value>,
    ) -> StoreResult<()> {
        self.inner.update_snapshot(id, name, attributes).await
    }

    async fn set_snapshot_usage(
        &self,
        per_snapshot: &[(String, u64)],
        per_medium: &[(String, u64)],
    ) -> StoreResult<()> {
        self.inner
            .set_snapshot_usage(per_snapshot, per_medium)
            .await
    }

    async fn delete_snapshot(&self, id: &str) -> StoreResult<()> {
        self.inner.delete_snapshot(id).await
    }
}

#[async_trait]
impl<S: Store> StoreLifecycle for CachedStore<S> {
    async fn close(&self) {
        self.inner.close().await;
    }

    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    async fn announce(&self, topic: &str) -> StoreResult<()> {
        self.inner.announce(topic).await
    }

    async fn announcements(&self, topics: &[&str]) -> StoreResult<Option<Announcements>> {
        self.inner.announcements(topics).await
    }
}

// Leases: no volume read shows them.
#[async_trait]
impl<S: Store> LeaseStore for CachedStore<S> {
    async fn acquire_lease(&self, name: &str, terms: &LeaseTerms<'_>) -> StoreResult<Option<i64>> {
        self.inner.acquire_lease(name, terms).await
    }

    async fn release_lease(&self, name: &str, owner: &str) -> StoreResult<()> {
        self.inner.release_lease(name, owner).await
    }
}

// Signing keys: no volume read shows them.
#[async_trait]
impl<S: Store> SigningKeyStore for CachedStore<S> {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        self.inner.signing_keys().await
    }

    async fn ensure_signing_key(&self, key: &SigningKeyRecord) -> StoreResult<SigningKeyRecord> {
        self.inner.ensure_signing_key(key).await
    }

    async fn rotate_signing_key(
        &self,
        key: &SigningKeyRecord,
        drop_before_ms: i64,
    ) -> StoreResult<()> {
        self.inner.rotate_signing_key(key, drop_before_ms).await
    }
}
