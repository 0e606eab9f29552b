//! User management (svs extension; the reference has no user routes beyond
//! sign-in): administrators list, create, change (disable / enable, grant
//! or take the administrator role), delete users and reset passwords; every
//! user reads itself and changes its own password.
//!
//! A user in a path is its id or its e-mail. `/users/me` is the caller.

use super::body::Typed;
use super::extract::Parsed;
use super::parse::bad;
use super::signin::SignedInView;
use super::views::{self, AdminOnly, BodyLimits, Done, ErrorBody, SignedIn};
use super::{ApiError, AppState};
use axum::extract::{Path, State};
use axum::Json;
use svs_control::service::format_ms;
use svs_control::service::users::{ChangeOwnPassword, CreateUser, UpdateUser, UserKey};
use svs_control::service::{Administrator, Caller};
use svs_store::User;
use svs_wire::requests::{
    OwnPasswordRequest, PasswordResetRequest, UserCreateRequest, UserModifyRequest,
};
use svs_wire::views::UserView;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type ApiResult<T> = Result<Json<T>, ApiError>;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_users, create_user))
        .routes(routes!(get_me))
        .routes(routes!(change_own_password))
        .routes(routes!(get_user, update_user, delete_user))
        .routes(routes!(reset_password))
}

pub fn user(u: &User) -> UserView {
    UserView {
        userid: u.id,
        email: u.email.clone(),
        name: u.name.clone(),
        tenant: u.tenant.clone(),
        admin: u.is_admin,
        disabled: u.disabled,
        createdtime: format_ms(u.created_ms),
    }
}

impl Typed for UserCreateRequest {}
impl Typed for UserModifyRequest {}
impl Typed for PasswordResetRequest {}
impl Typed for OwnPasswordRequest {}

#[utoipa::path(
    get, path = "/users", tag = "Users", operation_id = "UsersList",
    summary = "List users (administrators only)",
    description = "svs extension. Every user of every tenant: administrators are service-wide.",
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "Users, by id", body = Vec<UserView>),
    ),
)]
async fn list_users(State(app): State<AppState>, admin: Administrator) -> ApiResult<Vec<UserView>> {
    Ok(Json(views::list(&app.list_users(&admin).await?, user)))
}

#[utoipa::path(
    post, path = "/users", tag = "Users", operation_id = "UserCreate",
    summary = "Create a user (administrators only)",
    description = "svs extension. The password follows the sign-in rules (at least 8 characters); the tenant is created when it is new.",
    request_body = UserCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 200, description = "The new user", body = UserView),
        (status = 400, description = "Malformed body, not an e-mail address, password too short", body = ErrorBody),
        (status = 409, description = "A user with this e-mail exists", body = ErrorBody),
        (status = 503, description = "Too many password checks waiting: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
async fn create_user(
    State(app): State<AppState>,
    admin: Administrator,
    Parsed(request): Parsed<UserCreateRequest>,
) -> ApiResult<UserView> {
    let request = CreateUser {
        email: request.email,
        password: request.password,
        name: request.name,
        tenant: request.tenant,
        is_admin: request.admin.unwrap_or(false),
    };
    Ok(Json(user(&app.create_user(&admin, &request).await?)))
}

#[utoipa::path(
    get, path = "/users/me", tag = "Users", operation_id = "UserMe",
    summary = "The signed-in user",
    description = "svs extension. The caller as the service has it now (its role included).",
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The caller", body = UserView),
    ),
)]
async fn get_me(State(app): State<AppState>, caller: Caller) -> ApiResult<UserView> {
    Ok(Json(user(&app.get_me(&caller).await?)))
}

#[utoipa::path(
    put, path = "/users/me/password", tag = "Users", operation_id = "UserPasswordChange",
    summary = "Change your own password",
    description = "svs extension. Needs the current password (a wrong one counts as a failed sign-in of the account). Every session of the user ends, this one included: the answer carries new tokens, as `POST /signin` does.",
    request_body = OwnPasswordRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Changed; the new session's tokens", body = SignedInView),
        (status = 400, description = "Malformed body, wrong current password, new password too short", body = ErrorBody),
        (status = 429, description = "Too many wrong passwords for this account: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "Too many password checks waiting: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
async fn change_own_password(
    State(app): State<AppState>,
    caller: Caller,
    Parsed(request): Parsed<OwnPasswordRequest>,
) -> ApiResult<SignedInView> {
    let request = ChangeOwnPassword {
        current_password: request.currentpassword,
        new_password: request.newpassword,
    };
    Ok(Json(super::signin::signed_in(
        &app.change_own_password(&caller, &request).await?,
    )))
}

#[utoipa::path(
    get, path = "/users/{user}", tag = "Users", operation_id = "UserGet",
    summary = "Get a user (administrators only)",
    params(("user" = String, Path, description = "The user's id or e-mail")),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "The user", body = UserView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
    ),
)]
async fn get_user(
    State(app): State<AppState>,
    admin: Administrator,
    Path(key): Path<String>,
) -> ApiResult<UserView> {
    Ok(Json(user(
        &app.get_user(&admin, &UserKey::parse(&key)).await?,
    )))
}

#[utoipa::path(
    patch, path = "/users/{user}", tag = "Users", operation_id = "UserModify",
    summary = "Disable, enable, grant or take the administrator role (administrators only)",
    description = "svs extension. Disabling revokes the user's refresh tokens and its IdTokens are refused from its next request. 409 when disabling yourself, or when no enabled administrator would remain.",
    params(("user" = String, Path, description = "The user's id or e-mail")),
    request_body = UserModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 200, description = "The user, changed", body = UserView),
        (status = 400, description = "Malformed body or nothing to change", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "Yourself, or the last enabled administrator", body = ErrorBody),
    ),
)]
async fn update_user(
    State(app): State<AppState>,
    admin: Administrator,
    Path(key): Path<String>,
    Parsed(request): Parsed<UserModifyRequest>,
) -> ApiResult<UserView> {
    if request.disabled.is_none() && request.admin.is_none() {
        return Err(bad("nothing to change: send disabled or admin"));
    }
    let request = UpdateUser {
        disabled: request.disabled,
        is_admin: request.admin,
    };
    Ok(Json(user(
        &app.update_user(&admin, &UserKey::parse(&key), &request)
            .await?,
    )))
}

#[utoipa::path(
    delete, path = "/users/{user}", tag = "Users", operation_id = "UserDelete",
    summary = "Delete a user (administrators only)",
    description = "svs extension. The user's tokens are refused from its next request. Its tenant's volumes, policies and snapshots stay (they belong to the tenant); its jobs keep its name and e-mail. 409 for yourself and for the last enabled administrator.",
    params(("user" = String, Path, description = "The user's id or e-mail")),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "Deleted", body = Done),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "Yourself, or the last enabled administrator", body = ErrorBody),
    ),
)]
async fn delete_user(
    State(app): State<AppState>,
    admin: Administrator,
    Path(key): Path<String>,
) -> ApiResult<Done> {
    let deleted = app.delete_user(&admin, &UserKey::parse(&key)).await?;
    Ok(Json(views::done("User deleted", &deleted.email)))
}

#[utoipa::path(
    post, path = "/users/{user}/password", tag = "Users", operation_id = "UserPasswordReset",
    summary = "Set a user's password (administrators only)",
    description = "svs extension. Every session of the user ends: its refresh tokens are revoked and its IdTokens refused from its next request.",
    params(("user" = String, Path, description = "The user's id or e-mail")),
    request_body = PasswordResetRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 200, description = "Password set", body = Done),
        (status = 400, description = "Malformed body or password too short", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 503, description = "Too many password checks waiting: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
async fn reset_password(
    State(app): State<AppState>,
    admin: Administrator,
    Path(key): Path<String>,
    Parsed(PasswordResetRequest { password }): Parsed<PasswordResetRequest>,
) -> ApiResult<Done> {
    let u = app
        .reset_password(&admin, &UserKey::parse(&key), &password)
        .await?;
    Ok(Json(views::done("Password reset", &u.email)))
}
