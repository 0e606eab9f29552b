//! The HTTP API of svs, as typed calls returning the server's JSON.

use super::credentials::{now_secs, CredentialsStore, Profile};
use super::error::{ClientError, Result};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::net::IpAddr;
use svs_domain::{CredentialRole, ResourceName};
use svs_wire::requests::{
    AttachmentCreateRequest, JobModifyRequest, MediaCreateRequest, MediaModifyRequest,
    MediaRebalanceRequest, NodeCreateRequest, NodeCredentialCreateRequest, NodeModifyRequest,
    RefreshRequest, SignInRequest, SignOutRequest, SnapshotCreateRequest, VolumeCreateRequest,
    VolumeModifyRequest,
};
use svs_wire::views::{Done, SignedInView};

/// A name the request carries, checked here by the server's rules (and
/// message) before anything is sent.
fn name(kind: &str, value: &str) -> Result<ResourceName> {
    ResourceName::parse(kind, value).map_err(ClientError::Input)
}

/// An address the request carries, with the server's message.
fn ip_address(value: &str) -> Result<IpAddr> {
    value
        .parse()
        .map_err(|_| ClientError::Input(format!("address '{value}' is not an IP address")))
}

/// What a resize sends.
fn resize(size: u64, movement: bool) -> VolumeModifyRequest {
    VolumeModifyRequest {
        size,
        allowdatamovement: Some(movement),
        ..VolumeModifyRequest::default()
    }
}

/// What a change of a medium's state sends.
fn medium_state(state: &str) -> MediaModifyRequest {
    MediaModifyRequest {
        state: Some(state.to_string()),
        ..MediaModifyRequest::default()
    }
}

/// A call without a body.
pub const NO_BODY: Option<&Value> = None;

/// Renew the IdToken when it expires within this many seconds.
pub const REFRESH_MARGIN_SECS: u64 = 60;

/// An HTTP client for one svs service, with an optional IdToken.
#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    pub fn new(base: &str) -> Result<Api> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Input(format!(
                "the URL must start with http:// or https://: {base}"
            )));
        }
        let http = svs_common::tls::trusting_ca_cert(reqwest::Client::builder())
            .user_agent(concat!("svs-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|source| ClientError::Http {
                url: base.clone(),
                source,
            })?;
        Ok(Api {
            http,
            base,
            token: None,
        })
    }

    pub fn with_token(mut self, id_token: &str) -> Api {
        self.token = Some(id_token.to_string());
        self
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// An answer kept as JSON (to print it as it is) read as a typed view.
    pub fn read_answer<T: DeserializeOwned>(&self, answer: Value) -> Result<T> {
        serde_json::from_value(answer).map_err(|e| ClientError::InvalidResponse {
            url: self.base.clone(),
            detail: e.to_string(),
        })
    }

    /// One call: the answer on 2xx (its JSON as it is, `Value`, or a typed
    /// view), else the server's `message`.
    pub async fn call<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<T> {
        let url = format!("{}{}", self.base, path);
        let mut req = self.http.request(method, &url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let http_err = |source| ClientError::Http {
            url: url.clone(),
            source,
        };
        let resp = req.send().await.map_err(http_err)?;
        let status = resp.status();
        let text = resp.text().await.map_err(http_err)?;
        let value: Option<Value> = serde_json::from_str(&text).ok();
        if status.is_success() {
            let value = match value {
                Some(v) => v,
                None if text.trim().is_empty() => Value::Null,
                None => {
                    return Err(ClientError::InvalidResponse {
                        url,
                        detail: format!("not JSON: {text}"),
                    })
                }
            };
            return serde_json::from_value(value).map_err(|e| ClientError::InvalidResponse {
                url,
                detail: e.to_string(),
            });
        }
        let message = value
            .as_ref()
            .and_then(|v| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                let text = text.trim();
                if text.is_empty() {
                    format!("HTTP {status}")
                } else {
                    format!("HTTP {status}: {text}")
                }
            });
        Err(ClientError::Api {
            status: status.as_u16(),
            message,
        })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.call(Method::GET, path, &[], NO_BODY).await
    }

    // --- authentication ---

    pub async fn sign_in(&self, email: &str, password: &str) -> Result<SignedInView> {
        let body = SignInRequest {
            email: email.to_string(),
            password: password.to_string(),
        };
        self.call(Method::POST, "/signin", &[], Some(&body)).await
    }

    pub async fn refresh(&self, refresh_token: &str) -> Result<SignedInView> {
        let body = RefreshRequest {
            RefreshToken: refresh_token.to_string(),
        };
        self.call(Method::POST, "/refresh", &[], Some(&body)).await
    }

    pub async fn sign_out(&self, access_token: &str) -> Result<Value> {
        let body = SignOutRequest {
            AccessToken: access_token.to_string(),
        };
        self.call(Method::POST, "/signout", &[], Some(&body)).await
    }

    // --- volumes ---

    /// `GET /volumes`; `T`: `Value` (as it is, to print) or `Vec<VolumeView>`,
    /// as every getter below.
    pub async fn list_volumes<T: DeserializeOwned>(&self) -> Result<T> {
        self.get("/volumes").await
    }

    pub async fn get_volume<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.get(&format!("/volumes/{}", segment(name))).await
    }

    /// Where each copy of each column of the volume is placed.
    pub async fn volume_slices<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.get(&format!("/volumes/{}/slices", segment(name)))
            .await
    }

    /// `POST /volumes`; `plan`: the dry run's plan token to hold it to.
    pub async fn create_volume(
        &self,
        body: &VolumeCreateRequest,
        plan: Option<&str>,
    ) -> Result<Value> {
        let query = plan_query(plan);
        self.call(Method::POST, "/volumes", &query, Some(body))
            .await
    }

    /// `POST /volumes?dryrun=true`: where the creation would place its
    /// slices.
    pub async fn preview_create(&self, body: &VolumeCreateRequest) -> Result<Value> {
        let query = [("dryrun", "true".to_string())];
        self.call(Method::POST, "/volumes", &query, Some(body))
            .await
    }

    /// `PATCH /volumes/{name}`; `plan`: the dry run's plan token to hold
    /// it to.
    pub async fn resize_volume(
        &self,
        name: &str,
        (size, movement): (u64, bool),
        plan: Option<&str>,
    ) -> Result<Value> {
        let body = resize(size, movement);
        let path = format!("/volumes/{}", segment(name));
        self.call(Method::PATCH, &path, &plan_query(plan), Some(&body))
            .await
    }

    /// `PATCH /volumes/{name}?dryrun=true`: what the resize would do.
    pub async fn preview_resize(&self, name: &str, size: u64, movement: bool) -> Result<Value> {
        let body = resize(size, movement);
        let path = format!("/volumes/{}", segment(name));
        let query = [("dryrun", "true".to_string())];
        self.call(Method::PATCH, &path, &query, Some(&body)).await
    }

    pub async fn delete_volume(&self, name: &str, force: bool) -> Result<Value> {
        let path = format!("/volumes/{}", segment(name));
        let query = if force {
            vec![("force", "true".to_string())]
        } else {
            Vec::new()
        };
        self.call(Method::DELETE, &path, &query, NO_BODY).await
    }

    pub async fn recover_volume(&self, name: &str) -> Result<Value> {
        let path = format!("/volumes/{}/recover", segment(name));
        self.call(Method::POST, &path, &[], NO_BODY).await
    }

    pub async fn grow_volume_filesystem(&self, name: &str) -> Result<Value> {
        let path = format!("/volumes/{}/grow-filesystem", segment(name));
        self.call(Method::POST, &path, &[], NO_BODY).await
    }

    // --- snapshots ---

    fn snapshot_path(volume: &str, snapshot: &str) -> String {
        format!(
            "/volumes/{}/snapshots/{}",
            segment(volume),
            segment(snapshot)
        )
    }

    pub async fn list_snapshots<T: DeserializeOwned>(&self, volume: &str) -> Result<T> {
        self.get(&format!("/volumes/{}/snapshots", segment(volume)))
            .await
    }

    pub async fn list_all_snapshots<T: DeserializeOwned>(&self) -> Result<T> {
        self.get("/snapshots").await
    }

    pub async fn get_snapshot<T: DeserializeOwned>(
        &self,
        volume: &str,
        snapshot: &str,
    ) -> Result<T> {
        self.get(&Api::snapshot_path(volume, snapshot)).await
    }

    pub async fn create_snapshot(
        &self,
        volume: &str,
        body: &SnapshotCreateRequest,
    ) -> Result<Value> {
        let path = format!("/volumes/{}/snapshots", segment(volume));
        self.call(Method::POST, &path, &[], Some(body)).await
    }

    pub async fn delete_snapshot(
        &self,
        volume: &str,
        snapshot: &str,
        force: bool,
    ) -> Result<Value> {
        let query = if force {
            vec![("force", "true".to_string())]
        } else {
            Vec::new()
        };
        let path = Api::snapshot_path(volume, snapshot);
        self.call(Method::DELETE, &path, &query, NO_BODY).await
    }

    pub async fn rollback_snapshot(&self, volume: &str, snapshot: &str) -> Result<Value> {
        let path = format!("{}/rollback", Api::snapshot_path(volume, snapshot));
        self.call(Method::PATCH, &path, &[], Some(&json!({}))).await
    }

    /// Snapshots attach read-only (the server enforces it).
    pub async fn attach_snapshot(&self, volume: &str, snapshot: &str, node: &str) -> Result<Value> {
        let path = format!("{}/attachments", Api::snapshot_path(volume, snapshot));
        let body = AttachmentCreateRequest {
            node: node.into(),
            readonly: Some(true),
            ..AttachmentCreateRequest::default()
        };
        self.call(Method::POST, &path, &[], Some(&body)).await
    }

    pub async fn create_attachment(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
        mountpoint: Option<&str>,
        readonly: bool,
    ) -> Result<Value> {
        let path = format!("{}/attachments", Api::snapshot_path(volume, snapshot));
        let body = AttachmentCreateRequest {
            node: node.into(),
            readonly: Some(readonly),
            mountpoint: mountpoint.map(Into::into),
            ..AttachmentCreateRequest::default()
        };
        self.call(Method::POST, &path, &[], Some(&body)).await
    }

    pub async fn delete_attachment(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> Result<Value> {
        let path = format!(
            "{}/attachments/{}",
            Api::snapshot_path(volume, snapshot),
            segment(node)
        );
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    pub async fn get_attachment<T: DeserializeOwned>(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> Result<T> {
        let path = format!(
            "{}/attachments/{}",
            Api::snapshot_path(volume, snapshot),
            segment(node)
        );
        self.get(&path).await
    }

    // --- policies ---

    pub async fn list_policies(&self) -> Result<Value> {
        self.get("/policies").await
    }

    pub async fn get_policy(&self, name: &str) -> Result<Value> {
        self.get(&format!("/policies/{}", segment(name))).await
    }

    pub async fn create_policy(&self, body: &Value) -> Result<Value> {
        self.call(Method::POST, "/policies", &[], Some(body)).await
    }

    pub async fn delete_policy(&self, name: &str) -> Result<Value> {
        let path = format!("/policies/{}", segment(name));
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    // --- media, nodes, jobs ---

    pub async fn list_media<T: DeserializeOwned>(&self) -> Result<T> {
        self.get("/media").await
    }

    /// `PATCH /media/{m}` with `{"state": "Failed"}` (administrators).
    pub async fn fail_medium(&self, medium: &str) -> Result<Value> {
        let path = format!("/media/{}", segment(medium));
        let body = medium_state("Failed");
        self.call(Method::PATCH, &path, &[], Some(&body)).await
    }

    /// `PATCH /media/{m}` `{"state": "Draining"}` (administrators): the
    /// drain's job, or with `dry_run` its plan.
    pub async fn drain_medium(&self, medium: &str, dry_run: bool) -> Result<Value> {
        let path = format!("/media/{}", segment(medium));
        let body = medium_state("Draining");
        let query: Vec<(&str, String)> = if dry_run {
            vec![("dryrun", "true".to_string())]
        } else {
            Vec::new()
        };
        self.call(Method::PATCH, &path, &query, Some(&body)).await
    }

    /// `PATCH /media/{m}` `{"state": "Ready"}` (administrators).
    pub async fn undrain_medium(&self, medium: &str) -> Result<Value> {
        let path = format!("/media/{}", segment(medium));
        let body = medium_state("Ready");
        self.call(Method::PATCH, &path, &[], Some(&body)).await
    }

    /// `POST /media/rebalance` (administrators): the job, or with
    /// `dry_run` the plan.
    pub async fn rebalance_media(
        &self,
        node: Option<&str>,
        zone: Option<&str>,
        dry_run: bool,
    ) -> Result<Value> {
        let body = MediaRebalanceRequest {
            node: node.map(|n| name("node", n)).transpose()?,
            zone: zone.map(|z| name("zone", z)).transpose()?,
        };
        let query: Vec<(&str, String)> = if dry_run {
            vec![("dryrun", "true".to_string())]
        } else {
            Vec::new()
        };
        self.call(Method::POST, "/media/rebalance", &query, Some(&body))
            .await
    }

    /// `POST /media` (administrators): `size` in GiB, `directory` absolute.
    pub async fn create_medium(
        &self,
        id: &str,
        node: &str,
        zone: &str,
        directory: &str,
        size: u64,
    ) -> Result<Value> {
        let body = MediaCreateRequest {
            mediaid: name("medium", id)?,
            node: name("node", node)?,
            zone: name("zone", zone)?,
            media: directory.into(),
            size,
        };
        self.call(Method::POST, "/media", &[], Some(&body)).await
    }

    /// `PATCH /media/{m}` with `{"size"}` in GiB (administrators).
    pub async fn resize_medium(&self, medium: &str, size: u64) -> Result<Value> {
        let path = format!("/media/{}", segment(medium));
        let body = MediaModifyRequest {
            size: Some(size),
            ..MediaModifyRequest::default()
        };
        self.call(Method::PATCH, &path, &[], Some(&body)).await
    }

    /// `DELETE /media/{m}` (administrators).
    pub async fn delete_medium(&self, medium: &str) -> Result<Value> {
        let path = format!("/media/{}", segment(medium));
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    /// `DELETE /nodes/{n}` (administrators).
    pub async fn delete_node(&self, name: &str) -> Result<Value> {
        let path = format!("/nodes/{}", segment(name));
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    pub async fn list_nodes(&self) -> Result<Value> {
        self.get("/nodes").await
    }

    pub async fn get_node<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.get(&format!("/nodes/{}", segment(name))).await
    }

    /// `POST /nodes` (administrators); `zone` None takes the server's default.
    pub async fn create_node(
        &self,
        name: &str,
        address: &str,
        zone: Option<&str>,
    ) -> Result<Value> {
        let body = NodeCreateRequest {
            name: self::name("node", name)?,
            address: ip_address(address)?,
            zone: zone.map(Into::into),
        };
        self.call(Method::POST, "/nodes", &[], Some(&body)).await
    }

    /// `PATCH /nodes/{n}` with `{"address"}` (administrators).
    pub async fn set_node_address(&self, name: &str, address: &str) -> Result<Value> {
        let path = format!("/nodes/{}", segment(name));
        let body = NodeModifyRequest {
            address: match address {
                "" => None,
                a => Some(ip_address(a)?),
            },
        };
        self.call(Method::PATCH, &path, &[], Some(&body)).await
    }

    /// Issues the node's credential (`role`: `agent` or `storage`),
    /// revoking the one it had.
    pub async fn issue_node_credential(&self, name: &str, role: CredentialRole) -> Result<Value> {
        let path = format!("/nodes/{}/credentials", segment(name));
        let body = NodeCredentialCreateRequest { role: Some(role) };
        self.call(Method::POST, &path, &[], Some(&body)).await
    }

    /// `GET /nodes/{n}/copies` (administrators).
    pub async fn node_copies(&self, name: &str) -> Result<Value> {
        self.get(&format!("/nodes/{}/copies", segment(name))).await
    }

    pub async fn revoke_node_credential(&self, name: &str) -> Result<Value> {
        let path = format!("/nodes/{}/credentials", segment(name));
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    /// The attachments of one volume, or of the whole tenant.
    pub async fn list_attachments<T: DeserializeOwned>(&self, volume: Option<&str>) -> Result<T> {
        match volume {
            Some(v) => {
                self.get(&format!("/volumes/{}/attachments", segment(v)))
                    .await
            }
            None => self.get("/attachments").await,
        }
    }

    pub async fn list_jobs(&self, query: &[(&str, String)]) -> Result<Value> {
        self.call(Method::GET, "/jobs", query, NO_BODY).await
    }

    /// `GET /jobs/{job}`: as it is (`Value`, to print) or a `JobView`.
    pub async fn get_job<T: DeserializeOwned>(&self, id: &str) -> Result<T> {
        self.get(&format!("/jobs/{}", segment(id))).await
    }

    /// `DELETE /jobs/{job}`: asks a pending or running job to cancel, or
    /// removes the record of one that ended (`{"Message", "ObjectID"}`).
    pub async fn delete_job(&self, id: &str) -> Result<Done> {
        let path = format!("/jobs/{}", segment(id));
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    /// `PATCH /jobs/{job}` `{"paused": ...}`: pauses (or resumes) the
    /// copies of a data movement or a recovery; the job.
    pub async fn pause_job(&self, id: &str, paused: bool) -> Result<Value> {
        let body = JobModifyRequest {
            paused: Some(paused),
            ..JobModifyRequest::default()
        };
        self.modify_job(id, &body).await
    }

    /// `PATCH /jobs/{job}` `{"movementrate": ...}`: a data movement's or a
    /// recovery's own copy rate in bytes per second (0: unthrottled; None:
    /// null, the service's `movement_rate`); the job.
    pub async fn set_job_rate(&self, id: &str, rate: Option<u64>) -> Result<Value> {
        let body = JobModifyRequest {
            movementrate: Some(json!(rate)),
            ..JobModifyRequest::default()
        };
        self.modify_job(id, &body).await
    }

    async fn modify_job(&self, id: &str, body: &JobModifyRequest) -> Result<Value> {
        let path = format!("/jobs/{}", segment(id));
        self.call(Method::PATCH, &path, &[], Some(body)).await
    }
}

/// Percent-encodes one path segment.
pub(super) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `profile` signed in with `tokens`.
pub(super) fn with_tokens(profile: &mut Profile, tokens: SignedInView) {
    profile.id_token = tokens.IdToken;
    profile.access_token = tokens.AccessToken;
    profile.refresh_token = tokens.RefreshToken;
    profile.expires_at = now_secs().saturating_add(tokens.ExpiresIn);
}

/// Signs in and builds the profile to store.
pub async fn sign_in(url: &str, email: &str, password: &str) -> Result<Profile> {
    let api = Api::new(url)?;
    let tokens = api.sign_in(email, password).await?;
    let mut profile = Profile {
        url: api.base().to_string(),
        email: email.to_string(),
        id_token: String::new(),
        access_token: String::new(),
        refresh_token: String::new(),
        expires_at: 0,
    };
    with_tokens(&mut profile, tokens);
    Ok(profile)
}

/// A stored, signed-in session: the profile and an authorized client.
#[derive(Debug)]
pub struct Session {
    pub store: CredentialsStore,
    pub name: String,
    pub profile: Profile,
    pub api: Api,
}

impl Session {
    /// Loads the profile and renews its tokens when needed (see
    /// [`Session::ensure_fresh`]).
    pub async fn open(store: CredentialsStore, name: &str) -> Result<Session> {
        let Some(profile) = store.get(name)? else {
            return Err(ClientError::NotSignedIn {
                profile: name.to_string(),
                hint: if name == super::credentials::DEFAULT_PROFILE {
                    String::new()
                } else {
                    format!(" --profile {name}")
                },
            });
        };
        let api = Api::new(&profile.url)?.with_token(&profile.id_token);
        let mut session = Session {
            store,
            name: name.to_string(),
            profile,
            api,
        };
        session.ensure_fresh().await?;
        Ok(session)
    }

    /// Renews the tokens with the RefreshToken, and saves them, when the
    /// IdToken expires within [`REFRESH_MARGIN_SECS`].
    pub async fn ensure_fresh(&mut self) -> Result<()> {
        if !self.profile.expires_within(REFRESH_MARGIN_SECS) {
            return Ok(());
        }
        let anonymous = Api::new(&self.profile.url)?;
        let tokens = anonymous
            .refresh(&self.profile.refresh_token)
            .await
            .map_err(|e| self.auth_hint(e))?;
        let mut profile = self.profile.clone();
        with_tokens(&mut profile, tokens);
        self.store.put(&self.name, profile.clone())?;
        self.api = anonymous.with_token(&profile.id_token);
        self.profile = profile;
        Ok(())
    }

    /// A 401 from the server means the stored session is no longer good:
    /// say so, with the way out.
    pub fn auth_hint(&self, e: ClientError) -> ClientError {
        match e {
            ClientError::Api {
                status: 401,
                message,
            } => ClientError::SessionEnded {
                profile: self.name.clone(),
                message,
            },
            other => other,
        }
    }
}

/// `?plan=<token>` when a dry run's plan is given.
fn plan_query(plan: Option<&str>) -> Vec<(&'static str, String)> {
    plan.map(|p| vec![("plan", p.to_string())])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_encoded() {
        assert_eq!(segment("db-1.x_y"), "db-1.x_y");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }

    /// Serves one HTTP request with `answer` (JSON, 200) and hands back
    /// the request's text (head and body).
    async fn one_request(answer: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let served = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.expect("accept");
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Head, then as many body bytes as it announces.
            loop {
                let n = conn.read(&mut buf).await.expect("read");
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(str::to_string)
                        })
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
                assert!(n > 0, "connection closed early");
            }
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            conn.write_all(reply.as_bytes()).await.expect("write");
            String::from_utf8_lossy(&request).to_string()
        });
        (base, served)
    }

    #[tokio::test]
    async fn recover_posts_to_the_volume() {
        let answer = r#"{"Message":"Volume recovery started","JobID":"7","ObjectID":"x"}"#;
        let (base, served) = one_request(answer).await;
        let api = Api::new(&base).expect("api").with_token("t0k");
        let got = api.recover_volume("db 1").await.expect("answer");
        assert_eq!(got["JobID"], "7");
        let request = served.await.expect("served");
        assert!(
            request.starts_with("POST /volumes/db%201/recover HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(
            request.contains("authorization: Bearer t0k\r\n"),
            "{request}"
        );
    }

    #[tokio::test]
    async fn failing_a_medium_patches_its_state() {
        let (base, served) = one_request(r#"{"mediaid":"d3","state":"Failed"}"#).await;
        let api = Api::new(&base).expect("api").with_token("t0k");
        let got = api.fail_medium("d3").await.expect("answer");
        assert_eq!(got["state"], "Failed");
        let request = served.await.expect("served");
        assert!(
            request.starts_with("PATCH /media/d3 HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(
            request.ends_with("\r\n\r\n{\"state\":\"Failed\"}"),
            "{request}"
        );
    }

    #[tokio::test]
    async fn pausing_and_rating_a_job_patch_it() {
        let (base, served) = one_request(r#"{"id":7,"paused":true}"#).await;
        let api = Api::new(&base).expect("api").with_token("t0k");
        let got = api.pause_job("7", true).await.expect("answer");
        assert_eq!(got["paused"], true);
        let request = served.await.expect("served");
        assert!(
            request.starts_with("PATCH /jobs/7 HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(request.ends_with("\r\n\r\n{\"paused\":true}"), "{request}");

        let (base, served) = one_request(r#"{"id":7,"movementrate":null}"#).await;
        let api = Api::new(&base).expect("api").with_token("t0k");
        api.set_job_rate("7", None).await.expect("answer");
        let request = served.await.expect("served");
        assert!(
            request.ends_with("\r\n\r\n{\"movementrate\":null}"),
            "back to the service's rate: {request}"
        );

        let (base, served) = one_request(r#"{"id":7,"movementrate":0}"#).await;
        let api = Api::new(&base).expect("api").with_token("t0k");
        api.set_job_rate("7", Some(0)).await.expect("answer");
        let request = served.await.expect("served");
        assert!(
            request.ends_with("\r\n\r\n{\"movementrate\":0}"),
            "{request}"
        );
    }

    #[test]
    fn urls_need_a_scheme() {
        assert!(Api::new("127.0.0.1:8080").is_err());
        assert_eq!(
            Api::new("http://127.0.0.1:8080/").expect("valid").base(),
            "http://127.0.0.1:8080"
        );
    }
}
