//! The client commands: each signs in from the stored profile, calls the
//! API and prints the answer. `cli.rs` only parses arguments into these.

use super::agent_file::CredentialFile;
use super::api::{sign_in, Api, Session};
use super::credentials::CredentialsStore;
use super::error::{ClientError, Result};
use super::output::{self, Column, OutputFormat};
use serde_json::{json, Map, Value};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

/// How often a followed job is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A snapshot named as `VOLUME/SNAPSHOT` (`--from-snapshot`). Names and
/// ids never hold a `/`, so the one slash splits them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRef {
    pub volume: String,
    pub snapshot: String,
}

impl std::str::FromStr for SnapshotRef {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<SnapshotRef, String> {
        match s.split_once('/') {
            Some((volume, snapshot))
                if !volume.is_empty() && !snapshot.is_empty() && !snapshot.contains('/') =>
            {
                Ok(SnapshotRef {
                    volume: volume.to_string(),
                    snapshot: snapshot.to_string(),
                })
            }
            _ => Err(format!("expected VOLUME/SNAPSHOT, e.g. db/s1: {s:?}")),
        }
    }
}

/// What a command shows once its followed job is Done (table output).
#[derive(Debug, Clone, Copy)]
enum Shown<'a> {
    Nothing,
    Volume(&'a str),
    Snapshot { volume: &'a str, name: &'a str },
}

/// What every command needs: where the sessions are, which one, and how
/// to print.
#[derive(Debug)]
pub struct Context {
    pub store: CredentialsStore,
    pub profile: String,
    pub output: OutputFormat,
}

pub(super) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

impl Context {
    pub(super) async fn session(&self) -> Result<Session> {
        Session::open(
            CredentialsStore::at(self.store.path().to_path_buf()),
            &self.profile,
        )
        .await
    }

    /// A list: the JSON as is, or a table.
    pub(super) fn list(&self, items: &Value, columns: &[Column]) {
        match self.output {
            OutputFormat::Json => emit(&output::render_json(items)),
            OutputFormat::Table => emit(&output::render_table(items, columns)),
        }
    }

    /// One object: the JSON as is, or "field  value" lines.
    pub(super) fn one(&self, item: &Value) {
        match self.output {
            OutputFormat::Json => emit(&output::render_json(item)),
            OutputFormat::Table => emit(&output::render_object(item)),
        }
    }

    /// A `{"Message", "ObjectID"}` answer.
    pub(super) fn message(&self, answer: &Value) {
        match self.output {
            OutputFormat::Json => emit(&output::render_json(answer)),
            OutputFormat::Table => emit(&format!("{}\n", output::text(&answer["Message"]))),
        }
    }

    // --- sessions ---

    pub async fn login(&self, url: &str, email: &str, password: &str) -> Result<()> {
        let profile = sign_in(url, email, password).await?;
        let base = profile.url.clone();
        self.store.put(&self.profile, profile)?;
        match self.output {
            OutputFormat::Json => emit(&output::render_json(
                &json!({"url": base, "email": email, "profile": self.profile}),
            )),
            OutputFormat::Table => emit(&format!(
                "Signed in to {base} as {email} (profile \"{}\")\n",
                self.profile
            )),
        }
        Ok(())
    }

    /// Signs out on the server (revoking the refresh tokens) and forgets
    /// the profile's tokens, even when the server call fails.
    pub async fn logout(&self) -> Result<()> {
        let session = self.session().await;
        let server = match &session {
            Ok(s) => Api::new(&s.profile.url)?
                .sign_out(&s.profile.access_token)
                .await
                .map(|_| ()),
            Err(ClientError::NotSignedIn { .. }) => return session.map(|_| ()),
            // Refresh refused: the session is over anyway.
            Err(_) => Ok(()),
        };
        self.store.remove(&self.profile)?;
        server?;
        if self.output == OutputFormat::Table {
            emit(&format!("Signed out (profile \"{}\")\n", self.profile));
        }
        Ok(())
    }

    // --- volumes ---

    pub async fn volume_list(&self) -> Result<()> {
        let s = self.session().await?;
        let items = s.api.list_volumes().await.map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::VOLUME_COLUMNS);
        Ok(())
    }

    /// A readable summary (placement and attachments too), or with
    /// `--output json` the server's volume object alone.
    pub async fn volume_get(&self, name: &str) -> Result<()> {
        let s = self.session().await?;
        let item = s.api.get_volume(name).await.map_err(|e| s.auth_hint(e))?;
        if self.output == OutputFormat::Json {
            self.one(&item);
            return Ok(());
        }
        // By id: a rename or another volume of the same name between the
        // calls cannot mix two volumes in one summary.
        let id = output::text(&item["volumeid"]);
        let slices = s.api.volume_slices(&id).await.map_err(|e| s.auth_hint(e))?;
        let attachments = s
            .api
            .list_attachments(Some(&id))
            .await
            .map_err(|e| s.auth_hint(e))?;
        emit(&output::render_volume_summary(&item, &slices, &attachments));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn volume_create(
        &self,
        name: &str,
        size: u64,
        policy: &str,
        kind: &str,
        filesystem: Option<&str>,
        zone: Option<&str>,
        from_snapshot: Option<&SnapshotRef>,
        wait: bool,
    ) -> Result<()> {
        let mut body = json!({"name": name, "size": size, "policy": policy, "type": kind});
        if let Some(filesystem) = filesystem {
            body["filesystem"] = json!(filesystem);
        }
        if let Some(zone) = zone {
            body["zone"] = json!(zone);
        }
        if let Some(from) = from_snapshot {
            body["contentvolume"] = json!(from.volume);
            body["contentsnapshot"] = json!(from.snapshot);
        }
        let mut s = self.session().await?;
        let answer = s
            .api
            .create_volume(&body)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Volume(name))
            .await
    }

    pub async fn volume_resize(
        &self,
        name: &str,
        size: u64,
        allow_data_movement: bool,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .resize_volume(name, size, allow_data_movement)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Volume(name))
            .await
    }

    pub async fn volume_delete(&self, name: &str, force: bool, wait: bool) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .delete_volume(name, force)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Nothing)
            .await
    }

    /// Starts a `volume_recovery` job that rebuilds the copies lost with a
    /// failed medium.
    pub async fn volume_recover(&self, name: &str, wait: bool) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .recover_volume(name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Volume(name))
            .await
    }

    /// Starts a `volume_grow_filesystem` job that grows the volume's
    /// filesystem again after a growth failed.
    pub async fn volume_grow_filesystem(&self, name: &str, wait: bool) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .grow_volume_filesystem(name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Volume(name))
            .await
    }

    // --- snapshots ---

    pub async fn snapshot_create(
        &self,
        volume: &str,
        name: &str,
        consistency: &str,
        wait: bool,
    ) -> Result<()> {
        let body = json!({"name": name, "consistency": consistency});
        let mut s = self.session().await?;
        let answer = s
            .api
            .create_snapshot(volume, &body)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Snapshot { volume, name })
            .await
    }

    /// The snapshots of `volume`, or of every volume of the tenant.
    pub async fn snapshot_list(&self, volume: Option<&str>) -> Result<()> {
        let s = self.session().await?;
        let items = match volume {
            Some(v) => s.api.list_snapshots(v).await,
            None => s.api.list_all_snapshots().await,
        }
        .map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::SNAPSHOT_COLUMNS);
        Ok(())
    }

    pub async fn snapshot_get(&self, volume: &str, name: &str) -> Result<()> {
        let s = self.session().await?;
        let item = s
            .api
            .get_snapshot(volume, name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.one(&item);
        Ok(())
    }

    pub async fn snapshot_delete(
        &self,
        volume: &str,
        name: &str,
        force: bool,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .delete_snapshot(volume, name, force)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Nothing)
            .await
    }

    pub async fn snapshot_rollback(&self, volume: &str, name: &str, wait: bool) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .rollback_snapshot(volume, name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.after_job_start(&mut s, &answer, wait, Shown::Volume(volume))
            .await
    }

    /// Attaches a snapshot (read-only) to `node`. The table output ends
    /// with the NBD URI on a line of its own (the export exists from the
    /// start; it serves once the job is Done); `--output json` prints the
    /// attachment, with its `uri`, after the job (or the started job's
    /// answer without `wait`).
    pub async fn snapshot_attach(
        &self,
        volume: &str,
        name: &str,
        node: &str,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .attach_snapshot(volume, name, node)
            .await
            .map_err(|e| s.auth_hint(e))?;
        let job_id = output::text(&answer["JobID"]);
        if self.output == OutputFormat::Json && !wait {
            emit(&output::render_json(&answer));
            return Ok(());
        }
        if self.output == OutputFormat::Table {
            emit(&format!(
                "{}: job {job_id}\n",
                output::text(&answer["Message"])
            ));
        }
        if wait {
            self.follow(&mut s, &job_id).await?;
        }
        let attachment = s
            .api
            .get_attachment(volume, name, node)
            .await
            .map_err(|e| s.auth_hint(e))?;
        match self.output {
            OutputFormat::Json => emit(&output::render_json(&attachment)),
            OutputFormat::Table => emit(&format!("{}\n", output::text(&attachment["uri"]))),
        }
        Ok(())
    }

    /// Prints the started job, and with `wait` follows it; what ends Done
    /// is shown (`show`) in a table.
    async fn after_job_start(
        &self,
        s: &mut Session,
        answer: &Value,
        wait: bool,
        show: Shown<'_>,
    ) -> Result<()> {
        let job_id = output::text(&answer["JobID"]);
        if !wait {
            match self.output {
                OutputFormat::Json => emit(&output::render_json(answer)),
                OutputFormat::Table => emit(&format!(
                    "{}: job {job_id}\n",
                    output::text(&answer["Message"])
                )),
            }
            return Ok(());
        }
        if self.output == OutputFormat::Table {
            emit(&format!(
                "{}: job {job_id}\n",
                output::text(&answer["Message"])
            ));
        }
        let job = self.follow(s, &job_id).await?;
        match (self.output, show) {
            (OutputFormat::Json, _) => emit(&output::render_json(&job)),
            (OutputFormat::Table, Shown::Volume(volume)) => {
                let item = s.api.get_volume(volume).await.map_err(|e| s.auth_hint(e))?;
                emit(&output::render_table(
                    &Value::Array(vec![item]),
                    output::VOLUME_COLUMNS,
                ));
            }
            (OutputFormat::Table, Shown::Snapshot { volume, name }) => {
                let item = s
                    .api
                    .get_snapshot(volume, name)
                    .await
                    .map_err(|e| s.auth_hint(e))?;
                emit(&output::render_table(
                    &Value::Array(vec![item]),
                    output::SNAPSHOT_COLUMNS,
                ));
            }
            (OutputFormat::Table, Shown::Nothing) => {}
        }
        Ok(())
    }

    // --- policies ---

    pub async fn policy_list(&self) -> Result<()> {
        let s = self.session().await?;
        let items = s.api.list_policies().await.map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::POLICY_COLUMNS);
        Ok(())
    }

    pub async fn policy_get(&self, name: &str) -> Result<()> {
        let s = self.session().await?;
        let item = s.api.get_policy(name).await.map_err(|e| s.auth_hint(e))?;
        self.one(&item);
        Ok(())
    }

    /// Creates a policy; unset resiliencies take the server's defaults.
    pub async fn policy_create(
        &self,
        name: &str,
        media: Option<u8>,
        node: Option<u8>,
        zone: Option<u8>,
    ) -> Result<()> {
        let mut body = Map::new();
        body.insert("name".into(), json!(name));
        for (field, value) in [
            ("resiliencymedia", media),
            ("resiliencynode", node),
            ("resiliencyzone", zone),
        ] {
            if let Some(v) = value {
                body.insert(field.into(), json!(v));
            }
        }
        let s = self.session().await?;
        let answer = s
            .api
            .create_policy(&Value::Object(body))
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.message(&answer);
        Ok(())
    }

    pub async fn policy_delete(&self, name: &str) -> Result<()> {
        let s = self.session().await?;
        let answer = s
            .api
            .delete_policy(name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.message(&answer);
        Ok(())
    }

    // --- media and nodes ---

    pub async fn media_list(&self) -> Result<()> {
        let s = self.session().await?;
        let items = s.api.list_media().await.map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::MEDIA_COLUMNS);
        Ok(())
    }

    /// Marks a medium failed (administrators only) and shows the medium
    /// as the server answers it (`state` Failed, `freesize` 0).
    pub async fn media_fail(&self, medium: &str) -> Result<()> {
        let s = self.session().await?;
        let answer = s
            .api
            .fail_medium(medium)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.one(&answer);
        Ok(())
    }

    /// Adds a medium (administrators only) and shows it as the server
    /// answers it.
    pub async fn media_add(
        &self,
        id: &str,
        node: &str,
        zone: &str,
        directory: &Path,
        size: u64,
    ) -> Result<()> {
        let s = self.session().await?;
        let answer = s
            .api
            .create_medium(id, node, zone, &directory.to_string_lossy(), size)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.one(&answer);
        Ok(())
    }

    /// Sets a medium's size (administrators only; media added through the
    /// API) and shows the medium.
    pub async fn media_set(&self, medium: &str, size: u64) -> Result<()> {
        let s = self.session().await?;
        let answer = s
            .api
            .resize_medium(medium, size)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.one(&answer);
        Ok(())
    }

    pub async fn media_remove(&self, medium: &str) -> Result<()> {
        let s = self.session().await?;
        let answer = s
            .api
            .delete_medium(medium)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.message(&answer);
        Ok(())
    }

    pub async fn node_remove(&self, name: &str) -> Result<()> {
        let s = self.session().await?;
        let answer = s.api.delete_node(name).await.map_err(|e| s.auth_hint(e))?;
        self.message(&answer);
        Ok(())
    }

    pub async fn node_list(&self) -> Result<()> {
        let s = self.session().await?;
        let items = s.api.list_nodes().await.map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::NODE_COLUMNS);
        Ok(())
    }

    pub async fn node_get(&self, name: &str) -> Result<()> {
        let s = self.session().await?;
        let item = s.api.get_node(name).await.map_err(|e| s.auth_hint(e))?;
        self.one(&item);
        Ok(())
    }

    /// Adds a node (or, when it exists, sets its address) and issues its
    /// agent credential, revoking the one it had. The credential is shown
    /// once with the agent's command line, or written to `credential_file`
    /// (0600; an existing file only with `force`), whose path alone is
    /// printed then.
    pub async fn node_add(
        &self,
        name: &str,
        address: &str,
        zone: Option<&str>,
        credential_file: Option<&Path>,
        force: bool,
    ) -> Result<()> {
        // Before anything changes on the server: a file that cannot be
        // written must not cost the node its working credential.
        let file = credential_file
            .map(|path| CredentialFile::reserve(path, force))
            .transpose()?;
        let s = self.session().await?;
        let added = match s.api.create_node(name, address, zone).await {
            Ok(_) => true,
            Err(ClientError::Api {
                status: 409,
                message,
            }) if message.contains("already exists") => {
                s.api
                    .set_node_address(name, address)
                    .await
                    .map_err(|e| s.auth_hint(e))?;
                false
            }
            Err(e) => return Err(s.auth_hint(e)),
        };
        if !added {
            if let Some(zone) = zone {
                let node = s.api.get_node(name).await.map_err(|e| s.auth_hint(e))?;
                let current = output::text(&node["zone"]);
                if current != zone {
                    eprintln!(
                        "note: node {name} already exists in zone '{current}'; only its address was set"
                    );
                }
            }
        }
        let issued = s
            .api
            .issue_node_credential(name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        let credential = issued["credential"]
            .as_str()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| ClientError::InvalidResponse {
                url: s.api.base().to_string(),
                detail: "no credential in the answer".into(),
            })?
            .to_string();
        let done = if added {
            format!("Node {name} added (address {address})")
        } else {
            format!("Node {name} exists; its address is now {address}")
        };
        match file {
            Some(file) => {
                let path = file.path().to_path_buf();
                file.write(&credential)?;
                let command = agent_command(s.api.base(), name, &path);
                match self.output {
                    OutputFormat::Json => {
                        let mut shown = issued.clone();
                        if let Some(map) = shown.as_object_mut() {
                            map.remove("credential");
                        }
                        shown["credentialfile"] = json!(path.display().to_string());
                        shown["agentcommand"] = json!(command);
                        emit(&output::render_json(&shown));
                    }
                    OutputFormat::Table => {
                        eprintln!("{done}; its agent credential is in {}.", path.display());
                        eprintln!("Run the agent on the host:\n  {command}");
                        emit(&format!("{}\n", path.display()));
                    }
                }
            }
            None => {
                let command = agent_command(s.api.base(), name, Path::new(AGENT_CREDENTIAL_PATH));
                match self.output {
                    OutputFormat::Json => {
                        let mut shown = issued.clone();
                        shown["agentcommand"] = json!(command);
                        emit(&output::render_json(&shown));
                    }
                    OutputFormat::Table => emit(&format!(
                        "{done}.\n\
                         Agent credential (shown only this once; issuing another revokes it):\n\
                         {credential}\n\
                         Save it on the host in {AGENT_CREDENTIAL_PATH} (mode 0600) and run:\n  \
                         {command}\n"
                    )),
                }
            }
        }
        Ok(())
    }

    /// Revokes the node's agent credential: its agent's next request is
    /// refused (401).
    pub async fn node_revoke(&self, name: &str) -> Result<()> {
        let s = self.session().await?;
        s.api
            .revoke_node_credential(name)
            .await
            .map_err(|e| s.auth_hint(e))?;
        match self.output {
            OutputFormat::Json => {
                let node = s.api.get_node(name).await.map_err(|e| s.auth_hint(e))?;
                emit(&output::render_json(&node));
            }
            OutputFormat::Table => emit(&format!(
                "Agent credential of node {name} revoked; its agent is refused from now on.\n"
            )),
        }
        Ok(())
    }

    // --- attachments ---

    /// The attachments of one volume, or of every volume of the tenant.
    pub async fn attachment_list(&self, volume: Option<&str>) -> Result<()> {
        let s = self.session().await?;
        let items = s
            .api
            .list_attachments(volume)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::ATTACHMENT_COLUMNS);
        Ok(())
    }

    /// Attaches; with `wait`, follows the job and shows the attachment.
    pub async fn attachment_create(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
        mountpoint: Option<&str>,
        readonly: bool,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .create_attachment(volume, snapshot, node, mountpoint, readonly)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.job_then_attachment(&mut s, &answer, wait, volume, snapshot, node)
            .await
    }

    /// Detaches; with `wait`, follows the job (exit 1 when the node's
    /// agent could not unmount).
    pub async fn attachment_delete(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s
            .api
            .delete_attachment(volume, snapshot, node)
            .await
            .map_err(|e| s.auth_hint(e))?;
        let job_id = output::text(&answer["JobID"]);
        match self.output {
            OutputFormat::Json if !wait => emit(&output::render_json(&answer)),
            OutputFormat::Json => {}
            OutputFormat::Table => emit(&format!(
                "{}: job {job_id}\n",
                output::text(&answer["Message"])
            )),
        }
        if wait {
            let job = self.follow(&mut s, &job_id).await?;
            if self.output == OutputFormat::Json {
                emit(&output::render_json(&job));
            }
        }
        Ok(())
    }

    async fn job_then_attachment(
        &self,
        s: &mut Session,
        answer: &Value,
        wait: bool,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> Result<()> {
        let job_id = output::text(&answer["JobID"]);
        if !wait {
            match self.output {
                OutputFormat::Json => emit(&output::render_json(answer)),
                OutputFormat::Table => emit(&format!(
                    "{}: job {job_id}\n",
                    output::text(&answer["Message"])
                )),
            }
            return Ok(());
        }
        self.follow(s, &job_id).await?;
        let attachment = s
            .api
            .get_attachment(volume, snapshot, node)
            .await
            .map_err(|e| s.auth_hint(e))?;
        self.one(&attachment);
        Ok(())
    }

    /// One attachment, with what the node's agent reported (table output:
    /// `filesystembytes` also in binary units).
    pub async fn attachment_get(&self, volume: &str, snapshot: &str, node: &str) -> Result<()> {
        let s = self.session().await?;
        let mut item = s
            .api
            .get_attachment(volume, snapshot, node)
            .await
            .map_err(|e| s.auth_hint(e))?;
        if self.output == OutputFormat::Table {
            if let Some(n) = item["filesystembytes"].as_u64() {
                item["filesystembytes"] = json!(format!("{n} ({})", output::human_bytes(n)));
            }
        }
        self.one(&item);
        Ok(())
    }

    // --- jobs ---

    pub async fn job_list(&self, filter: &JobFilter) -> Result<()> {
        let mut query = Vec::new();
        let strings = [
            ("type", &filter.kind),
            ("object", &filter.object),
            ("state", &filter.state),
        ];
        for (key, value) in strings {
            if let Some(v) = value {
                query.push((key, v.clone()));
            }
        }
        if let Some(page) = filter.page {
            query.push(("page", page.to_string()));
        }
        if let Some(count) = filter.count {
            query.push(("count", count.to_string()));
        }
        let s = self.session().await?;
        let items = s.api.list_jobs(&query).await.map_err(|e| s.auth_hint(e))?;
        self.list(&items, output::JOB_COLUMNS);
        Ok(())
    }

    pub async fn job_get(&self, id: &str) -> Result<()> {
        let s = self.session().await?;
        let item = s.api.get_job(id).await.map_err(|e| s.auth_hint(e))?;
        self.one(&item);
        Ok(())
    }

    /// Follows a job to its end: exit status 0 on Done, an error on Error.
    pub async fn job_watch(&self, id: &str) -> Result<()> {
        let mut s = self.session().await?;
        let job = self.follow(&mut s, id).await?;
        if self.output == OutputFormat::Json {
            emit(&output::render_json(&job));
        }
        Ok(())
    }

    /// Polls a job every [`POLL_INTERVAL`] until it ends, showing its
    /// progress on stderr: a bar on a terminal, else a line per change.
    /// Done → the job; Error → its details on stderr and `JobFailed`.
    async fn follow(&self, s: &mut Session, id: &str) -> Result<Value> {
        let mut progress = Progress::new(id);
        loop {
            s.ensure_fresh().await?;
            let job = s.api.get_job(id).await.map_err(|e| s.auth_hint(e))?;
            progress.update(&job);
            match job["state"].as_str() {
                Some("Done") => {
                    progress.finish(&format!("job {id} Done"));
                    return Ok(job);
                }
                Some("Error") => {
                    let details: Vec<String> = job["details"]
                        .as_array()
                        .map(|d| d.iter().map(output::text).collect())
                        .unwrap_or_default();
                    // The last detail is the error itself, which ends the
                    // command's output (printed once, there).
                    let mut report = format!("job {id} ended in Error");
                    for line in details.iter().take(details.len().saturating_sub(1)) {
                        report.push_str("\n  ");
                        report.push_str(line);
                    }
                    progress.finish(&report);
                    let message = details
                        .last()
                        .cloned()
                        .filter(|m| !m.is_empty())
                        .unwrap_or_else(|| output::text(&job["status"]));
                    return Err(ClientError::JobFailed {
                        id: id.to_string(),
                        message: with_hint(message),
                    });
                }
                _ => tokio::time::sleep(POLL_INTERVAL).await,
            }
        }
    }
}

/// The seed's in-place failure names no way out; the CLI's flag is it.
fn with_hint(message: String) -> String {
    if message.contains(IN_PLACE_FAILURE) {
        format!(
            "{message}\nhint: run the resize again with --allow-data-movement to let svs move \
             slices to media with room (the volume stays online)"
        )
    } else {
        message
    }
}

/// The seed's message of a resize that needs data movement.
const IN_PLACE_FAILURE: &str = "Could not find an in-place modification plan";

/// Where `node add` suggests keeping the credential on the host.
pub const AGENT_CREDENTIAL_PATH: &str = "/etc/svs/agent.credential";

/// The command line that runs a node's agent.
pub fn agent_command(url: &str, node: &str, credential_file: &Path) -> String {
    format!(
        "svs agent --url {} --node {} --credential-file {}",
        shell_word(url),
        shell_word(node),
        shell_word(&credential_file.display().to_string())
    )
}

/// A word as a POSIX shell reads it back: as is when it is plain, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._/:=@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `job list` filters (None = no filter).
#[derive(Debug, Default, Clone)]
pub struct JobFilter {
    pub kind: Option<String>,
    pub object: Option<String>,
    pub state: Option<String>,
    pub page: Option<u32>,
    pub count: Option<u32>,
}

/// Progress of a followed job on stderr.
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines { id: String, last: String },
}

impl Progress {
    fn new(id: &str) -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(100);
            let style = indicatif::ProgressStyle::with_template(
                "{spinner} job {prefix} [{bar:40}] {pos:>3}% {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(id.to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            Progress::Bar(bar)
        } else {
            Progress::Lines {
                id: id.to_string(),
                last: String::new(),
            }
        }
    }

    fn update(&mut self, job: &Value) {
        let state = output::text(&job["state"]);
        let mut status = output::text(&job["status"]);
        if status == state {
            status.clear();
        }
        let pct = job["progress"].as_u64().unwrap_or(0).min(100);
        match self {
            Progress::Bar(bar) => {
                bar.set_position(pct);
                bar.set_message(format!("{state} {status}").trim().to_string());
            }
            Progress::Lines { id, last } => {
                let line = format!("job {id}: {state} {pct}% {status}")
                    .trim_end()
                    .to_string();
                if *last != line {
                    eprintln!("{line}");
                    *last = line;
                }
            }
        }
    }

    fn finish(self, message: &str) {
        match self {
            Progress::Bar(bar) => {
                bar.finish_and_clear();
                eprintln!("{message}");
            }
            Progress::Lines { .. } => eprintln!("{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_command_line_quotes_what_the_shell_would_split() {
        assert_eq!(
            agent_command(
                "http://10.0.0.1:8080",
                "host-7",
                Path::new("/etc/svs/agent.credential")
            ),
            "svs agent --url http://10.0.0.1:8080 --node host-7 --credential-file /etc/svs/agent.credential"
        );
        assert_eq!(
            agent_command("https://svs.example", "h", Path::new("/tmp/my cred's")),
            "svs agent --url https://svs.example --node h --credential-file '/tmp/my cred'\\''s'"
        );
    }
}
