//! `svs user ...` client commands: user management through the API
//! (administrators) and `svs user passwd` (any user). `svs user add` is not
//! here: it works on the data directory, without a running service.

use super::api::{segment, with_tokens, Api, NO_BODY};
use super::context::{emit, Context, Print};
use super::error::Result;
use super::output::{self, col, yes_no, Column, OutputFormat};
use reqwest::Method;
use serde_json::{json, Value};
use svs_wire::requests::{
    OwnPasswordRequest, PasswordResetRequest, UserCreateRequest, UserModifyRequest,
};
use svs_wire::views::{Done, SignedInView, UserView};

pub const USER_COLUMNS: &[Column] = &[
    col("ID", "userid"),
    col("EMAIL", "email"),
    col("NAME", "name"),
    col("TENANT", "tenant"),
    yes_no("ADMIN", "admin"),
    yes_no("DISABLED", "disabled"),
    col("CREATED", "createdtime"),
];

impl Api {
    pub async fn list_users(&self) -> Result<Value> {
        self.get("/users").await
    }

    /// `user`: an id or an e-mail.
    pub async fn get_user(&self, user: &str) -> Result<Value> {
        self.get(&format!("/users/{}", segment(user))).await
    }

    pub async fn create_user(&self, body: &UserCreateRequest) -> Result<UserView> {
        self.call(Method::POST, "/users", &[], Some(body)).await
    }

    pub async fn update_user(&self, user: &str, body: &UserModifyRequest) -> Result<UserView> {
        let path = format!("/users/{}", segment(user));
        self.call(Method::PATCH, &path, &[], Some(body)).await
    }

    pub async fn delete_user(&self, user: &str) -> Result<Value> {
        let path = format!("/users/{}", segment(user));
        self.call(Method::DELETE, &path, &[], NO_BODY).await
    }

    pub async fn reset_password(&self, user: &str, password: &str) -> Result<Done> {
        let path = format!("/users/{}/password", segment(user));
        let body = PasswordResetRequest {
            password: password.to_string(),
        };
        self.call(Method::POST, &path, &[], Some(&body)).await
    }

    /// `PUT /users/me/password`: answers new tokens (the old ones end).
    pub async fn change_own_password(&self, current: &str, new: &str) -> Result<SignedInView> {
        let body = OwnPasswordRequest {
            currentpassword: current.to_string(),
            newpassword: new.to_string(),
        };
        self.call(Method::PUT, "/users/me/password", &[], Some(&body))
            .await
    }
}

impl Context {
    pub async fn user_list(&self) -> Result<()> {
        self.show(Print::List(USER_COLUMNS), |api| async move {
            api.list_users().await
        })
        .await
    }

    pub async fn user_get(&self, user: &str) -> Result<()> {
        self.show(Print::One, |api| async move { api.get_user(user).await })
            .await
    }

    pub async fn user_create(&self, new: &UserCreateRequest) -> Result<()> {
        let s = self.session().await?;
        let user = s.hint(s.api.create_user(new).await)?;
        self.changed(
            &user,
            &format!(
                "Created user {} (id {}) in tenant {}{}",
                user.email,
                user.userid,
                user.tenant,
                if new.admin == Some(true) {
                    ", an administrator"
                } else {
                    ""
                }
            ),
        );
        Ok(())
    }

    /// Disables (`disabled`) or enables a user.
    pub async fn user_set_disabled(&self, user: &str, disabled: bool) -> Result<()> {
        let s = self.session().await?;
        let answer = s.hint(
            s.api
                .update_user(
                    user,
                    &UserModifyRequest {
                        disabled: Some(disabled),
                        admin: None,
                    },
                )
                .await,
        )?;
        let email = &answer.email;
        self.changed(
            &answer,
            &if disabled {
                format!("Disabled user {email}: it cannot sign in, and its sessions have ended")
            } else {
                format!("Enabled user {email}: it can sign in again")
            },
        );
        Ok(())
    }

    /// Grants (`admin`) or takes away the administrator role.
    pub async fn user_set_admin(&self, user: &str, admin: bool) -> Result<()> {
        let s = self.session().await?;
        let change = UserModifyRequest {
            disabled: None,
            admin: Some(admin),
        };
        let answer = s.hint(s.api.update_user(user, &change).await)?;
        let email = &answer.email;
        self.changed(
            &answer,
            &if admin {
                format!("User {email} is now an administrator")
            } else {
                format!("User {email} is no longer an administrator")
            },
        );
        Ok(())
    }

    pub async fn user_delete(&self, user: &str) -> Result<()> {
        self.show(
            Print::Message,
            |api| async move { api.delete_user(user).await },
        )
        .await
    }

    pub async fn user_reset_password(&self, user: &str, password: &str) -> Result<()> {
        let s = self.session().await?;
        let answer = s.hint(s.api.reset_password(user, password).await)?;
        match self.output {
            OutputFormat::Json => emit(&output::render_view(&answer)),
            OutputFormat::Table => emit(&format!(
                "Password of {} reset; its sessions have ended\n",
                answer.ObjectID
            )),
        }
        Ok(())
    }

    /// Changes the signed-in user's password. Every session of the user
    /// ends, so the profile keeps the new session the answer carries.
    pub async fn user_passwd(&self, current: &str, new: &str) -> Result<()> {
        let mut s = self.session().await?;
        let tokens = s.hint(s.api.change_own_password(current, new).await)?;
        with_tokens(&mut s.profile, tokens);
        s.store.put(&s.name, s.profile.clone())?;
        match self.output {
            OutputFormat::Json => emit(&output::render_json(
                &json!({"email": s.profile.email, "profile": s.name}),
            )),
            OutputFormat::Table => emit(&format!(
                "Password of {} changed; its other sessions have ended (profile \"{}\" keeps a new one)\n",
                s.profile.email, s.name
            )),
        }
        Ok(())
    }

    /// A changed user: its JSON, or one line.
    fn changed(&self, user: &UserView, line: &str) {
        match self.output {
            OutputFormat::Json => emit(&output::render_view(user)),
            OutputFormat::Table => emit(&format!("{line}\n")),
        }
    }
}
