//! `svs user ...`: `add` works on the data directory (see `offline`); the
//! others go through the API (`svs_client::users`).

use super::passwords::{
    new_password, password_from, NewPasswordArgs, StdinLines, CURRENT_PASSWORD_ENV,
};
use super::ClientArgs;
use super::CommonArgs;
use clap::Subcommand;
use std::path::PathBuf;
use svs_client::{ClientError, Context};
use svs_wire::requests::UserCreateRequest;

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user; the password is read from stdin, or prompted for on a terminal.
    Add {
        #[command(flatten)]
        common: CommonArgs,
        /// The user's e-mail address (their sign-in name).
        #[arg(long)]
        email: String,
        /// Tenant name; created if it does not exist.
        #[arg(long)]
        tenant: String,
        /// Display name (default: the part of the e-mail before '@').
        #[arg(long)]
        name: Option<String>,
        /// Make the user a service administrator: it manages the infrastructure
        /// (nodes, media) that every tenant shares, whatever its own tenant.
        #[arg(long)]
        admin: bool,
    },
    /// List the users of every tenant (administrators).
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show one user (by e-mail or id; administrators).
    Get {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Create a user through the API (administrators). The password comes
    /// from --password-file, else SVS_NEW_PASSWORD, else stdin's first
    /// line, else a prompt on a terminal.
    Create {
        /// The new user's e-mail (its sign-in name).
        email: String,
        /// Display name (default: the part of the e-mail before '@').
        #[arg(long)]
        name: Option<String>,
        /// Tenant name, created if new (default: your own tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// Make the user a service administrator.
        #[arg(long)]
        admin: bool,
        #[command(flatten)]
        password: NewPasswordArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Disable a user: it cannot sign in, its sessions end at once
    /// (administrators; not yourself).
    Disable {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Enable a disabled user (administrators).
    Enable {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Delete a user (administrators; not yourself). Its tenant's volumes
    /// stay; its jobs keep its name and e-mail.
    Delete {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Set a user's password; its sessions end (administrators; for your
    /// own password use `passwd`). Password as for `create`.
    ResetPassword {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        password: NewPasswordArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Make a user a service administrator (administrators).
    MakeAdmin {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Take the administrator role away (administrators; not your own, and
    /// never the last enabled administrator's).
    RemoveAdmin {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Change your own password. Current password: --current-password-file,
    /// else SVS_CURRENT_PASSWORD, else stdin's first line, else a prompt; the
    /// new one as for `create` (stdin's next line). Your other sessions end.
    Passwd {
        /// A file whose first line is your current password.
        #[arg(long, value_name = "FILE")]
        current_password_file: Option<PathBuf>,
        #[command(flatten)]
        password: NewPasswordArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
}

impl UserCommand {
    /// `user add` works on the data directory; the rest is the API's.
    pub(super) fn client_args(&self) -> Option<&ClientArgs> {
        match self {
            UserCommand::Add { .. } => None,
            UserCommand::List { client }
            | UserCommand::Get { client, .. }
            | UserCommand::Create { client, .. }
            | UserCommand::Disable { client, .. }
            | UserCommand::Enable { client, .. }
            | UserCommand::Delete { client, .. }
            | UserCommand::ResetPassword { client, .. }
            | UserCommand::MakeAdmin { client, .. }
            | UserCommand::RemoveAdmin { client, .. }
            | UserCommand::Passwd { client, .. } => Some(client),
        }
    }
}

/// The user commands that go through the API.
pub(super) async fn run(ctx: &Context, command: UserCommand) -> svs_client::Result<()> {
    let mut stdin = StdinLines::default();
    match command {
        // Handled by `run`: works on the data directory.
        UserCommand::Add { .. } => Ok(()),
        UserCommand::List { .. } => ctx.user_list().await,
        UserCommand::Get { user, .. } => ctx.user_get(&user).await,
        UserCommand::Create {
            email,
            name,
            tenant,
            admin,
            password,
            ..
        } => {
            let password = new_password(&password, &mut stdin).map_err(ClientError::Input)?;
            ctx.user_create(&UserCreateRequest {
                email,
                password,
                name,
                tenant,
                admin: Some(admin),
            })
            .await
        }
        UserCommand::Disable { user, .. } => ctx.user_set_disabled(&user, true).await,
        UserCommand::Enable { user, .. } => ctx.user_set_disabled(&user, false).await,
        UserCommand::Delete { user, .. } => ctx.user_delete(&user).await,
        UserCommand::ResetPassword { user, password, .. } => {
            let password = new_password(&password, &mut stdin).map_err(ClientError::Input)?;
            ctx.user_reset_password(&user, &password).await
        }
        UserCommand::MakeAdmin { user, .. } => ctx.user_set_admin(&user, true).await,
        UserCommand::RemoveAdmin { user, .. } => ctx.user_set_admin(&user, false).await,
        UserCommand::Passwd {
            current_password_file,
            password,
            ..
        } => {
            let current = password_from(
                current_password_file.as_deref(),
                CURRENT_PASSWORD_ENV,
                "Current password",
                &mut stdin,
                false,
            )
            .map_err(ClientError::Input)?;
            let new = new_password(&password, &mut stdin).map_err(ClientError::Input)?;
            ctx.user_passwd(&current, &new).await
        }
    }
}
