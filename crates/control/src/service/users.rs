//! Users: added by an administrator's command line or at first start
//! (`add_user`, a function of the store alone), and managed through the API
//! by administrators (list, create, disable / enable, delete, reset a
//! password, grant or take the administrator role); each user changes its
//! own password.
//!
//! Administrators are service-wide (they manage the media and nodes every
//! tenant shares), so they manage the users of every tenant.
//!
//! Every authenticated request checks the user's current state in memory
//! ([`UserAccessCache`]): a disabled or deleted user, or a token from before
//! the user's sessions were ended, is refused at its next request, and a
//! changed role applies at once.

use super::auth::{SignedIn, PASSWORD_CHECKS_BUSY};
use super::throttle::account_key;
use super::{Administrator, Caller, ServiceError, ServiceResult, Services};
use crate::auth::{hash_password, CheckError, PasswordError};
use std::collections::HashMap;
use std::sync::RwLock;
use svs_common::clock::Clock;
use svs_store::{NewUser, Store, User, UserChange};

pub const NOT_YOURSELF_DISABLE: &str =
    "you cannot disable yourself: another administrator has to do it";
pub const NOT_YOURSELF_DELETE: &str =
    "you cannot delete yourself: another administrator has to do it";
pub const NOT_YOURSELF_DEMOTE: &str =
    "you cannot take away your own administrator role: another administrator has to do it";
pub const NOT_YOURSELF_RESET: &str =
    "change your own password with PUT /users/me/password (it needs the current one)";
pub const WRONG_CURRENT_PASSWORD: &str = "the current password is not correct";
/// Longest display name (the reference's sign-up `name`).
pub const MAX_NAME_CHARS: usize = 50;
/// Longest e-mail address (RFC 5321's path limit).
pub const MAX_EMAIL_CHARS: usize = 254;
/// Longest tenant name.
pub const MAX_TENANT_CHARS: usize = 63;

/// `POST /users` (administrators).
#[derive(Debug, Clone)]
pub struct CreateUser {
    pub email: String,
    /// Default: the part of the e-mail before '@'.
    pub name: Option<String>,
    /// Default: the administrator's own tenant. Created if new.
    pub tenant: Option<String>,
    pub password: String,
    pub is_admin: bool,
}

/// `PATCH /users/{user}` (administrators): `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct UpdateUser {
    pub disabled: Option<bool>,
    pub is_admin: Option<bool>,
}

/// `PUT /users/me/password`: the caller's own password.
#[derive(Debug, Clone)]
pub struct ChangeOwnPassword {
    pub current_password: String,
    pub new_password: String,
}

/// A user named in a path: its id (all digits) or its e-mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserKey {
    Id(i64),
    Email(String),
}

impl UserKey {
    pub fn parse(text: &str) -> UserKey {
        let text = text.trim();
        match text.parse::<i64>() {
            Ok(id) if text.bytes().all(|b| b.is_ascii_digit()) => UserKey::Id(id),
            _ => UserKey::Email(text.to_string()),
        }
    }
}

/// A new user's fields, checked: (tenant, email, name).
fn check_new_user(
    tenant: &str,
    email: &str,
    name: Option<&str>,
) -> Result<(String, String, String), String> {
    svs_domain::check_email(email)?;
    if email.chars().count() > MAX_EMAIL_CHARS {
        return Err(format!(
            "the e-mail address is longer than {MAX_EMAIL_CHARS} characters"
        ));
    }
    let tenant = tenant.trim();
    if tenant.is_empty() {
        return Err("tenant must not be empty".into());
    }
    if tenant.chars().any(svs_domain::is_hidden_character) {
        return Err(
            "tenant must not contain control or bidirectional formatting characters".into(),
        );
    }
    if tenant.chars().count() > MAX_TENANT_CHARS {
        return Err(format!(
            "tenant must be at most {MAX_TENANT_CHARS} characters"
        ));
    }
    let name = match name.map(str::trim) {
        Some("") => return Err("name must not be empty".into()),
        Some(n) => n.to_string(),
        None => email.split('@').next().unwrap_or(email).to_string(),
    };
    if name.chars().any(svs_domain::is_hidden_character) {
        return Err("name must not contain control or bidirectional formatting characters".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("name must be at most {MAX_NAME_CHARS} characters"));
    }
    Ok((tenant.to_string(), email.to_string(), name))
}

/// Adds a user (first-user creation at start and `svs user add`, which
/// works without a running service, hence a function of the store alone).
pub async fn add_user(
    store: &dyn Store,
    clock: &dyn Clock,
    tenant: &str,
    email: &str,
    name: Option<&str>,
    password: &str,
    is_admin: bool,
) -> Result<(), String> {
    let (tenant, email, name) = check_new_user(tenant, email, name)?;
    let password = password.to_string();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    store
        .create_user(&NewUser {
            tenant,
            email,
            name,
            password_hash: hash,
            is_admin,
            now_ms: clock.now_ms(),
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// What a request's token is checked against: the user as the store has it
/// now. `None`: the user was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserAccess {
    pub disabled: bool,
    pub is_admin: bool,
    pub token_generation: i64,
}

impl From<&User> for UserAccess {
    fn from(user: &User) -> UserAccess {
        UserAccess {
            disabled: user.disabled,
            is_admin: user.is_admin,
            token_generation: user.token_generation,
        }
    }
}

/// Bound on remembered users; emptied when full (then read again).
const ACCESS_CACHE_MAX: usize = 100_000;

/// Each user's [`UserAccess`], read from the store on first use and
/// replaced by every change made through the service. Users are only added
/// behind its back (`svs user add`), never changed, so a missing entry is
/// simply read.
///
/// Sound only while this process makes every change of users: with several
/// instances on one database it is turned off ([`UserAccessCache::off`]) and
/// every request reads its user (one indexed read), so that a user disabled,
/// signed out or given another role on one instance is refused or changed on
/// all at their next request.
#[derive(Debug)]
pub struct UserAccessCache {
    entries: RwLock<HashMap<i64, Option<UserAccess>>>,
    on: bool,
}

impl Default for UserAccessCache {
    fn default() -> Self {
        UserAccessCache {
            entries: RwLock::default(),
            on: true,
        }
    }
}

impl UserAccessCache {
    /// A cache that remembers nothing: every lookup reads the store.
    pub fn off() -> Self {
        UserAccessCache {
            on: false,
            ..UserAccessCache::default()
        }
    }

    fn get(&self, id: i64) -> Option<Option<UserAccess>> {
        self.entries.read().ok()?.get(&id).copied()
    }

    /// Remembers what a read found, unless a change recorded meanwhile
    /// (which is newer than the read) is there already.
    fn remember_read(&self, id: i64, access: Option<UserAccess>) {
        if !self.on {
            return;
        }
        if let Ok(mut entries) = self.entries.write() {
            if entries.len() >= ACCESS_CACHE_MAX {
                entries.clear();
            }
            entries.entry(id).or_insert(access);
        }
    }

    /// Records a committed change (`None`: deleted).
    fn changed(&self, id: i64, access: Option<UserAccess>) {
        if !self.on {
            return;
        }
        if let Ok(mut entries) = self.entries.write() {
            entries.insert(id, access);
        }
    }
}

fn user_not_found(key: &UserKey) -> ServiceError {
    match key {
        UserKey::Id(id) => ServiceError::NotFound(format!("user {id} not found")),
        UserKey::Email(email) => ServiceError::NotFound(format!("user '{email}' not found")),
    }
}

fn check_error(e: CheckError) -> ServiceError {
    match e {
        CheckError::Busy => ServiceError::Busy(PASSWORD_CHECKS_BUSY.into()),
        CheckError::Stopped => ServiceError::Internal(e.to_string()),
    }
}

impl Services {
    /// The user's current access state, from memory (read once per user).
    pub(crate) async fn user_access(&self, id: i64) -> ServiceResult<Option<UserAccess>> {
        if let Some(known) = self.user_access.get(id) {
            return Ok(known);
        }
        let access = self
            .store
            .user_by_id(id)
            .await?
            .as_ref()
            .map(UserAccess::from);
        self.user_access.remember_read(id, access);
        Ok(access)
    }

    /// A new password's hash, on the password check threads.
    async fn new_password_hash(&self, password: &str) -> ServiceResult<String> {
        match self.protection.passwords.hash(password).await {
            Ok(Ok(hash)) => Ok(hash),
            Ok(Err(e @ PasswordError::TooShort)) => Err(ServiceError::BadRequest(e.to_string())),
            Ok(Err(e)) => Err(ServiceError::Internal(e.to_string())),
            Err(e) => Err(check_error(e)),
        }
    }

    async fn find_user(&self, key: &UserKey) -> ServiceResult<User> {
        let user = match key {
            UserKey::Id(id) => self.store.user_by_id(*id).await?,
            UserKey::Email(email) => self.store.user_by_email(email).await?,
        };
        user.ok_or_else(|| user_not_found(key))
    }

    /// One change of a user, then its access state. Changes are serialised
    /// so that the state remembered is the last one committed.
    async fn change_user(&self, id: i64, change: &UserChange) -> ServiceResult<User> {
        let _one_at_a_time = self.user_changes.lock().await;
        let user = self.store.update_user(id, change).await?;
        self.user_access.changed(id, Some(UserAccess::from(&user)));
        Ok(user)
    }

    /// The caller's own record (any signed-in user).
    pub async fn get_me(&self, caller: &Caller) -> ServiceResult<User> {
        self.find_user(&UserKey::Id(caller.user_id)).await
    }

    pub async fn list_users(&self, _admin: &Administrator) -> ServiceResult<Vec<User>> {
        Ok(self.store.list_users().await?)
    }

    pub async fn get_user(&self, _admin: &Administrator, key: &UserKey) -> ServiceResult<User> {
        self.find_user(key).await
    }

    pub async fn create_user(
        &self,
        admin: &Administrator,
        request: &CreateUser,
    ) -> ServiceResult<User> {
        let tenant = match &request.tenant {
            Some(t) => t.clone(),
            None => {
                self.find_user(&UserKey::Id(admin.caller().user_id))
                    .await?
                    .tenant
            }
        };
        let (tenant, email, name) =
            check_new_user(&tenant, &request.email, request.name.as_deref())
                .map_err(ServiceError::BadRequest)?;
        let password_hash = self.new_password_hash(&request.password).await?;
        let user = self
            .store
            .create_user(&NewUser {
                tenant,
                email,
                name,
                password_hash,
                is_admin: request.is_admin,
                now_ms: self.clock.now_ms(),
            })
            .await?;
        tracing::info!(
            user = user.id,
            by = admin.caller().user_id,
            admin = user.is_admin,
            "user created"
        );
        Ok(user)
    }

    /// Disable / enable, grant / take the administrator role. Disabling
    /// ends every session of the user; disabling oneself is refused (409),
    /// and so is any change that leaves no enabled administrator.
    pub async fn update_user(
        &self,
        admin: &Administrator,
        key: &UserKey,
        request: &UpdateUser,
    ) -> ServiceResult<User> {
        let user = self.find_user(key).await?;
        if user.id == admin.caller().user_id {
            if request.disabled == Some(true) {
                return Err(ServiceError::Conflict(NOT_YOURSELF_DISABLE.into()));
            }
            if request.is_admin == Some(false) {
                return Err(ServiceError::Conflict(NOT_YOURSELF_DEMOTE.into()));
            }
        }
        let disabling = request.disabled == Some(true) && !user.disabled;
        let user = self
            .change_user(
                user.id,
                &UserChange {
                    disabled: request.disabled,
                    is_admin: request.is_admin,
                    password_hash: None,
                    end_sessions: disabling,
                },
            )
            .await?;
        tracing::info!(
            user = user.id,
            by = admin.caller().user_id,
            disabled = user.disabled,
            admin = user.is_admin,
            "user changed"
        );
        Ok(user)
    }

    /// Deletes the user and its refresh tokens; its tokens are refused from
    /// its next request. Volumes belong to the tenant and stay; jobs keep
    /// the user's name and e-mail.
    pub async fn delete_user(&self, admin: &Administrator, key: &UserKey) -> ServiceResult<User> {
        let user = self.find_user(key).await?;
        if user.id == admin.caller().user_id {
            return Err(ServiceError::Conflict(NOT_YOURSELF_DELETE.into()));
        }
        {
            let _one_at_a_time = self.user_changes.lock().await;
            self.store.delete_user(user.id).await?;
            self.user_access.changed(user.id, None);
        }
        tracing::info!(user = user.id, by = admin.caller().user_id, "user deleted");
        Ok(user)
    }

    /// An administrator sets a user's password: every session of the user
    /// ends (its tokens are refused from their next request).
    pub async fn reset_password(
        &self,
        admin: &Administrator,
        key: &UserKey,
        password: &str,
    ) -> ServiceResult<User> {
        let user = self.find_user(key).await?;
        // Without the current password, a stolen IdToken could take the
        // account over.
        if user.id == admin.caller().user_id {
            return Err(ServiceError::Conflict(NOT_YOURSELF_RESET.into()));
        }
        let password_hash = self.new_password_hash(password).await?;
        let user = self
            .change_user(
                user.id,
                &UserChange {
                    password_hash: Some(password_hash),
                    end_sessions: true,
                    ..UserChange::default()
                },
            )
            .await?;
        tracing::info!(
            user = user.id,
            by = admin.caller().user_id,
            "password reset"
        );
        Ok(user)
    }

    /// The caller changes its own password, giving the current one (a wrong
    /// one counts as a failed sign-in of the account). Every session of the
    /// user ends, this one included: the answer carries new tokens.
    pub async fn change_own_password(
        &self,
        caller: &Caller,
        request: &ChangeOwnPassword,
    ) -> ServiceResult<SignedIn> {
        let user = self.find_user(&UserKey::Id(caller.user_id)).await?;
        let account = account_key(&user.email);
        // Counted as a failure until the current password proves right.
        let attempt = self
            .protection
            .throttle
            .reserve(Some(&account), None, self.clock.now_ms())
            .map_err(super::auth::too_many)?;
        let matches = match self
            .protection
            .passwords
            .verify(&request.current_password, &user.password_hash)
            .await
        {
            Ok(matches) => matches,
            Err(e) => {
                attempt.not_checked();
                return Err(check_error(e));
            }
        };
        if !matches {
            attempt.failed(self.clock.now_ms());
            return Err(ServiceError::BadRequest(WRONG_CURRENT_PASSWORD.into()));
        }
        attempt.succeeded();
        let password_hash = self.new_password_hash(&request.new_password).await?;
        let user = self
            .change_user(
                user.id,
                &UserChange {
                    password_hash: Some(password_hash),
                    end_sessions: true,
                    ..UserChange::default()
                },
            )
            .await?;
        tracing::info!(user = user.id, "password changed by its user");
        self.start_session(&user).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_named_by_id_or_email() {
        assert_eq!(UserKey::parse("42"), UserKey::Id(42));
        assert_eq!(
            UserKey::parse("a@b.example"),
            UserKey::Email("a@b.example".into())
        );
        assert_eq!(UserKey::parse("+42"), UserKey::Email("+42".into()));
        assert_eq!(
            UserKey::parse("99999999999999999999"),
            UserKey::Email("99999999999999999999".into())
        );
    }

    #[test]
    fn a_read_never_overwrites_a_change_recorded_meanwhile() {
        let cache = UserAccessCache::default();
        let enabled = UserAccess {
            disabled: false,
            is_admin: false,
            token_generation: 0,
        };
        let disabled = UserAccess {
            disabled: true,
            token_generation: 1,
            ..enabled
        };
        assert_eq!(cache.get(7), None);
        // A read that started before the change lands after it: ignored.
        cache.changed(7, Some(disabled));
        cache.remember_read(7, Some(enabled));
        assert_eq!(cache.get(7), Some(Some(disabled)));
        // Deleted: remembered as gone.
        cache.changed(7, None);
        cache.remember_read(7, Some(enabled));
        assert_eq!(cache.get(7), Some(None));
        // A user read first (no change yet) is remembered.
        cache.remember_read(8, Some(enabled));
        assert_eq!(cache.get(8), Some(Some(enabled)));
        // Turned off (several instances): nothing is remembered.
        let off = UserAccessCache::off();
        off.changed(7, Some(disabled));
        off.remember_read(8, Some(enabled));
        assert_eq!((off.get(7), off.get(8)), (None, None));
    }

    #[test]
    fn new_users_are_checked() {
        assert_eq!(
            check_new_user(" t ", "a@b.example", None),
            Ok(("t".into(), "a@b.example".into(), "a".into()))
        );
        assert!(check_new_user("t", "nobody", None).is_err());
        assert!(check_new_user("t", "a b@c", None).is_err());
        assert!(check_new_user("t", " a@b", None).is_err());
        assert!(check_new_user("t", "@b", None).is_err());
        assert!(check_new_user("t", "a@", None).is_err());
        assert!(check_new_user("", "a@b", None).is_err());
        assert!(check_new_user("t", "a@b", Some(" ")).is_err());
        assert!(check_new_user("t", "a\u{1b}@b", None).is_err());
        assert!(check_new_user("t\u{202e}", "a@b", None).is_err());
        assert!(check_new_user("t", "a@b", Some("x\u{2066}y")).is_err());
        assert!(check_new_user("t", "a@b", Some(&"n".repeat(51))).is_err());
        assert!(check_new_user("t", "a@b", Some(&"n".repeat(50))).is_ok());
    }
}
