//! Media: the directories slices live on, listed with what they hold and
//! managed by administrators through the API (nodes: `nodes`).
//!
//! Who wins: the configuration file, for what it lists. Media and nodes it
//! lists are `config`-managed: start-up makes them match the file, and the
//! API refuses to change or remove them (409), so an admin never edits a
//! medium in one place that a restart undoes from the other. Media and
//! nodes added here are `api`-managed: kept in the store, and there across
//! restarts. A later file entry of the same name takes one over. Failing a
//! medium (`PATCH {"state": "Failed"}`) is a fact about the disk, not a
//! configuration change, so it works for both.

use super::commands::{CreateMedium, ModifyMedium};
use super::{Administrator, ServiceError, ServiceResult, Services};
use crate::front_layout::fail_medium;
use crate::snapshot_space::set_snapshot_budgets;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use svs_dataplane::{DataPlane, DataPlaneError};
use svs_domain::{ManagedBy, Medium};
use svs_store::{MediumRecord, MediumUsage, StoreError};
use tracing::warn;

/// The 409 for a change the configuration file owns.
pub(super) fn config_managed(kind: &str, name: &str) -> ServiceError {
    ServiceError::Conflict(format!(
        "{kind} '{name}' is defined in the configuration file; change it there and restart svs"
    ))
}

/// The 409 for a change of a medium its storage node manages.
fn node_managed(id: &str, node: &str) -> ServiceError {
    ServiceError::Conflict(format!(
        "medium '{id}' is managed by storage node '{node}'; change it in that node's configuration"
    ))
}

/// Refuses a change of a medium the configuration file or a storage node
/// manages.
fn ensure_api_managed(medium: &MediumUsage) -> ServiceResult<()> {
    let id = &medium.record.medium.id;
    match medium.managed_by {
        ManagedBy::Config => Err(config_managed("medium", id)),
        ManagedBy::Node => Err(node_managed(id, &medium.record.medium.node)),
        ManagedBy::Api => Ok(()),
    }
}

fn medium_not_found(id: &str) -> ServiceError {
    ServiceError::NotFound(format!("media '{id}' not found"))
}

/// A store error about the medium `id`: its NotFound as the 404 naming it.
pub(super) fn medium_error(e: StoreError, id: &str) -> ServiceError {
    match e {
        StoreError::NotFound => medium_not_found(id),
        other => other.into(),
    }
}

/// The directory with symbolic links resolved when it exists (two media
/// must not share a directory however it is spelled).
fn resolved(directory: &Path) -> PathBuf {
    std::fs::canonicalize(directory).unwrap_or_else(|_| directory.to_path_buf())
}

/// A medium as `GET /media` shows it: its allocation, and the bytes
/// written on it (`None` when it failed or could not be read).
#[derive(Debug, Clone)]
pub struct MediumReport {
    pub usage: MediumUsage,
    pub written_bytes: Option<u64>,
}

/// What a measurement found; `None` (logged) when there is none.
async fn written_or_none(
    usage: &MediumUsage,
    measure: Option<tokio::task::JoinHandle<Result<u64, DataPlaneError>>>,
) -> Option<u64> {
    let medium = &usage.record.medium.id;
    match measure?.await {
        Ok(Ok(bytes)) => Some(bytes),
        // A storage node's medium this instance's data plane is not wired
        // to yet (its node's record is being read): no figure this time.
        Ok(Err(DataPlaneError::UnknownMedium(_))) if usage.managed_by == ManagedBy::Node => None,
        // An unreachable node is logged by its link, and its liveness shown
        // on the node: not once more on every read of the list.
        Ok(Err(e)) if usage.managed_by == ManagedBy::Node => {
            tracing::debug!(medium = %medium, error = %e, "cannot ask the node for written bytes");
            None
        }
        Ok(Err(e)) => {
            warn!(medium = %medium, error = %e, "cannot measure written bytes");
            None
        }
        Err(e) => {
            warn!(medium = %medium, error = %e, "written bytes task failed");
            None
        }
    }
}

impl Services {
    pub async fn list_media(&self) -> ServiceResult<Vec<MediumUsage>> {
        Ok(self.store.media_usage().await?)
    }

    pub async fn get_medium(&self, id: &str) -> ServiceResult<MediumUsage> {
        self.list_media()
            .await?
            .into_iter()
            .find(|m| m.record.medium.id == id)
            .ok_or_else(|| ServiceError::NotFound(format!("media '{id}' not found")))
    }

    /// Every medium with what is written on it, measured side by side (a
    /// storage node's media are asked over the network).
    pub async fn media_reports(&self) -> ServiceResult<Vec<MediumReport>> {
        let measuring: Vec<_> = self
            .list_media()
            .await?
            .into_iter()
            .map(|usage| {
                let measure = self.measure_written(&usage);
                (usage, measure)
            })
            .collect();
        let mut reports = Vec::with_capacity(measuring.len());
        for (usage, measure) in measuring {
            let written_bytes = written_or_none(&usage, measure).await;
            reports.push(MediumReport {
                usage,
                written_bytes,
            });
        }
        Ok(reports)
    }

    /// One medium with what is written on it.
    pub async fn medium_report(&self, id: &str) -> ServiceResult<MediumReport> {
        Ok(self.report_medium(self.get_medium(id).await?).await)
    }

    /// Measures what is written on the medium. A failed medium is not
    /// read; one that cannot be read is logged and shown without the figure.
    pub async fn report_medium(&self, usage: MediumUsage) -> MediumReport {
        let written_bytes = written_or_none(&usage, self.measure_written(&usage)).await;
        MediumReport {
            usage,
            written_bytes,
        }
    }

    /// The measurement, started now (off the async threads): a stat per
    /// file of a local medium's volume directories; for a storage node's
    /// medium, the node's own count of each slice's data and snapshot bytes
    /// over the slice protocol (the data plane's link to the node, which
    /// fails at once while the node is unreachable).
    fn measure_written(
        &self,
        usage: &MediumUsage,
    ) -> Option<tokio::task::JoinHandle<Result<u64, DataPlaneError>>> {
        if usage.failed {
            return None;
        }
        let dp = Arc::clone(self.exports.data_plane());
        let medium = usage.record.medium.id.clone();
        Some(tokio::task::spawn_blocking(move || {
            dp.medium_written_bytes(&medium)
        }))
    }
    /// `PATCH /media/{media}` with `{"state": "Failed"}`: only an
    /// administrator may fail a medium; its slices are lost at once for
    /// every volume.
    pub(crate) async fn set_medium_failed(
        &self,
        admin: &Administrator,
        medium: &str,
    ) -> ServiceResult<MediumUsage> {
        fail_medium(self.store.as_ref(), &self.exports, medium)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => {
                    ServiceError::NotFound(format!("media '{medium}' not found"))
                }
                other => other.into(),
            })?;
        tracing::warn!(
            medium,
            by = admin.caller().user_id,
            "medium marked failed by an administrator"
        );
        self.get_medium(medium).await
    }

    fn data_plane(&self) -> Arc<dyn DataPlane> {
        Arc::clone(self.exports.data_plane())
    }

    /// `POST /media`: the directory is made (if needed) and proven writable
    /// before the medium is recorded; from then on the planner places
    /// slices on it.
    pub async fn create_medium(
        &self,
        admin: &Administrator,
        request: &CreateMedium,
    ) -> ServiceResult<MediumUsage> {
        if self.storage_nodes_only {
            return Err(ServiceError::Conflict(
                "this service runs with storage_nodes_only = true: every medium is a storage \
                 node's; add it to a storage node's configuration (svs storage-node)"
                    .into(),
            ));
        }
        let id = request.id.as_str();
        let media = self.store.media_usage().await?;
        if media.iter().any(|m| m.record.medium.id == id) {
            return Err(ServiceError::Conflict(format!(
                "medium '{id}' already exists"
            )));
        }
        let dir = request.directory.clone();
        let dir = tokio::task::spawn_blocking(move || resolved(&dir))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        if let Some(other) = media.iter().find(|m| Path::new(&m.record.directory) == dir) {
            return Err(ServiceError::Conflict(format!(
                "medium '{}' already uses directory {}; each medium needs its own",
                other.record.medium.id,
                dir.display()
            )));
        }
        let (node, zone) = (request.node.as_str(), request.zone.as_str());
        let nodes = self.store.list_nodes().await?;
        if let Some(n) = nodes
            .iter()
            .find(|n| n.name == node && !n.zone.is_empty() && n.zone != zone)
        {
            return Err(ServiceError::Conflict(format!(
                "node '{node}' is in zone '{}', not '{zone}'",
                n.zone
            )));
        }
        let dp = self.data_plane();
        let (medium, directory) = (id.to_string(), dir.clone());
        let added = tokio::task::spawn_blocking(move || dp.add_medium(&medium, &directory))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?
            .map_err(|e| match e {
                DataPlaneError::MediumUnusable { .. } => ServiceError::BadRequest(e.to_string()),
                DataPlaneError::MediumExists { .. } => ServiceError::Conflict(e.to_string()),
                other => ServiceError::Internal(other.to_string()),
            })?;
        let created = self
            .store
            .create_medium(&MediumRecord {
                medium: Medium {
                    id: id.to_string(),
                    node: node.to_string(),
                    zone: zone.to_string(),
                    size: request.size,
                },
                directory: dir.display().to_string(),
            })
            .await;
        if let Err(e) = created {
            // Refused by the store after all (a request racing this one):
            // the data plane forgets what it learnt here.
            if added {
                self.data_plane().forget_medium(id);
            }
            return Err(e.into());
        }
        set_snapshot_budgets(self.store.as_ref(), self.data_plane().as_ref()).await?;
        tracing::info!(
            medium = id,
            node = request.node.as_str(),
            directory = %dir.display(),
            size_gib = request.size,
            by = admin.caller().user_id,
            "medium added"
        );
        self.get_medium(id).await
    }

    /// `PATCH /media/{media}`.
    pub async fn modify_medium(
        &self,
        admin: &Administrator,
        id: &str,
        request: &ModifyMedium,
    ) -> ServiceResult<MediumUsage> {
        let size = match request {
            ModifyMedium::Fail => return self.set_medium_failed(admin, id).await,
            ModifyMedium::Ready => return self.undrain_medium(admin, id).await,
            ModifyMedium::Drain => {
                self.drain_medium(admin, id).await?;
                return self.get_medium(id).await;
            }
            ModifyMedium::Resize(size) => *size,
        };
        let medium = self.get_medium(id).await?;
        ensure_api_managed(&medium)?;
        if medium.failed {
            return Err(ServiceError::Conflict(format!(
                "medium '{id}' has failed; its size cannot change"
            )));
        }
        self.store
            .set_medium_size(id, size)
            .await
            .map_err(|e| medium_error(e, id))?;
        set_snapshot_budgets(self.store.as_ref(), self.data_plane().as_ref()).await?;
        tracing::info!(
            medium = id,
            size_gib = size,
            by = admin.caller().user_id,
            "medium resized"
        );
        self.get_medium(id).await
    }

    /// `DELETE /media/{media}`: refused while it holds slices (naming their
    /// volumes) or running jobs booked space on it. The directory stays;
    /// svs removes only slice files of its own still in it.
    pub async fn delete_medium(&self, admin: &Administrator, id: &str) -> ServiceResult<()> {
        let medium = self.get_medium(id).await?;
        ensure_api_managed(&medium)?;
        let record = self
            .store
            .delete_medium(id)
            .await
            .map_err(|e| medium_error(e, id))?;
        let dp = self.data_plane();
        let medium = id.to_string();
        match tokio::task::spawn_blocking(move || dp.remove_medium(&medium)).await {
            Ok(Ok(())) => {}
            // The medium is gone from the store either way; files left are
            // the admin's to look at.
            Ok(Err(e)) => tracing::warn!(medium = id, error = %e,
                "medium removed, but files svs made in its directory could not all be removed"),
            Err(e) => tracing::warn!(medium = id, error = %e, "medium cleanup task failed"),
        }
        tracing::info!(
            medium = id,
            directory = %record.directory,
            by = admin.caller().user_id,
            "medium removed"
        );
        Ok(())
    }
}
