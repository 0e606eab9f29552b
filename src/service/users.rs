//! Users: added by an administrator's command line or at first start.

use crate::auth::hash_password;
use crate::clock::Clock;
use svs_store::{NewUser, Store};

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
    let email = email.trim();
    if email.is_empty() || !email.contains('@') {
        return Err(format!("'{email}' is not an e-mail address"));
    }
    if tenant.trim().is_empty() {
        return Err("tenant must not be empty".into());
    }
    let password = password.to_string();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let name = name
        .map(str::to_string)
        .unwrap_or_else(|| email.split('@').next().unwrap_or(email).to_string());
    store
        .create_user(&NewUser {
            tenant: tenant.trim().to_string(),
            email: email.to_string(),
            name,
            password_hash: hash,
            is_admin,
            now_ms: clock.now_ms(),
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}
