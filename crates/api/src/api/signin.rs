//! Sign-in and tokens: `POST /signin`, `/signout`, the two refresh routes
//! and the token-signing keys (`GET /jwks`), with their bodies and views.

use super::body::Typed;
use super::extract::{ClientAddress, Parsed, RefreshTokenHeader};
use super::views::{BodyLimits, Empty, ErrorBody};
use super::{ApiResult, AppState};
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use svs_control::auth::TokenSet;
use svs_control::service::auth::SignedIn;
use svs_control::service::commands::{Refresh, SignIn, SignOut};
use svs_control::service::format_ms;
use svs_wire::requests::{RefreshRequest, SignInRequest, SignOutRequest};
pub use svs_wire::views::SignedInView;
use utoipa::ToSchema;

#[utoipa::path(
    post, path = "/signin", tag = "user", operation_id = "signIn",
    summary = "Sign in",
    description = "Returns the tokens of a session. svs differs from the reference on purpose: a wrong password or an unknown e-mail answers 401 `Incorrect email or password` (not 400/404), and repeated failures are throttled with 429 and `Retry-After`.",
    request_body = SignInRequest,
    responses(BodyLimits,
        (status = 200, description = "Signed in", body = SignedInView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Incorrect email or password", body = ErrorBody),
        (status = 403, description = "The password is right but the account is disabled (svs extension)", body = ErrorBody),
        (status = 429, description = "Too many failed sign-ins for this account or from this address: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "Too many password checks waiting: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn sign_in(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    Parsed(SignInRequest { email, password }): Parsed<SignInRequest>,
) -> ApiResult<SignedInView> {
    let request = SignIn { email, password };
    Ok(Json(signed_in(&app.sign_in(&request, client).await?)))
}

#[utoipa::path(
    post, path = "/signout", tag = "user", operation_id = "signOut",
    summary = "Sign out",
    description = "Revokes every refresh token of the user; the current AccessToken and IdToken stay valid until they expire. Authenticated by the AccessToken in the body, so it needs no `authorization` header.",
    request_body = SignOutRequest,
    responses(BodyLimits,
        (status = 200, description = "Signed out", body = Empty),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Not a valid AccessToken", body = ErrorBody),
    ),
)]
pub async fn sign_out(
    State(app): State<AppState>,
    Parsed(request): Parsed<SignOutRequest>,
) -> ApiResult<Empty> {
    let access_token = request.AccessToken;
    app.sign_out(&SignOut { access_token }).await?;
    Ok(Json(Empty {}))
}

#[utoipa::path(
    post, path = "/refresh", tag = "user", operation_id = "refresh",
    summary = "New tokens from a RefreshToken",
    description = "svs extension. Rotates: the answer carries a new RefreshToken and the one sent is retired; sending a retired RefreshToken again revokes every token of that sign-in (reuse detection).",
    request_body = RefreshRequest,
    responses(BodyLimits,
        (status = 200, description = "New tokens, with the next RefreshToken", body = SignedInView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Unknown, expired, retired or revoked RefreshToken", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this address: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    Parsed(request): Parsed<RefreshRequest>,
) -> ApiResult<SignedInView> {
    let refresh_token = request.RefreshToken;
    let tokens = app.refresh(&Refresh { refresh_token }, client).await?;
    Ok(Json(signed_in(&tokens)))
}

/// The Volumez refresh call: the token in the `refreshtoken` header; it
/// does not rotate (its answer has no RefreshToken).
#[utoipa::path(
    get, path = "/tenant/apiaccess/credentials/refresh", tag = "user", operation_id = "refreshCredentials",
    summary = "New tokens from a RefreshToken (Volumez)",
    description = "The Volumez API's refresh call. Unlike `POST /refresh` it does not rotate the RefreshToken, since its answer has none; a retired RefreshToken sent here still counts as reuse. The expirations are RFC 3339 UTC times.",
    params(("refreshtoken" = String, Header, description = "The RefreshToken from `POST /signin`")),
    responses(
        (status = 200, description = "New tokens", body = VolumezRefreshed),
        (status = 401, description = "Missing, unknown, expired, retired or revoked RefreshToken", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this address: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn volumez_refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    RefreshTokenHeader(request): RefreshTokenHeader,
) -> ApiResult<VolumezRefreshed> {
    let tokens = app.refresh_without_rotation(&request, client).await?;
    Ok(Json(volumez_refreshed(&tokens)))
}

#[utoipa::path(
    get, path = "/.well-known/jwks.json", tag = "user", operation_id = "jwks",
    summary = "Public keys that verify the tokens",
    description = "svs extension: a JSON Web Key Set (Ed25519): the key that signs now, then retired keys whose tokens may still be valid (`svs keys rotate`).",
    responses((status = 200, description = "Key set", body = Jwks)),
)]
pub async fn jwks(State(app): State<AppState>) -> Json<Jwks> {
    Json(key_set(&app.tokens.public_keys(app.clock.now_secs())))
}

pub fn signed_in(s: &SignedIn) -> SignedInView {
    SignedInView {
        AccessToken: s.tokens.access_token.clone(),
        IdToken: s.tokens.id_token.clone(),
        RefreshToken: s.refresh_token.clone(),
        ExpiresIn: s.tokens.expires_in,
        TokenType: "Bearer".into(),
    }
}

/// The Volumez refresh answer (`GET /tenant/apiaccess/credentials/refresh`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CredentialsRefreshResponse)]
#[allow(non_snake_case)]
pub struct VolumezRefreshed {
    pub AccessToken: String,
    pub IdToken: String,
    /// When the AccessToken expires (RFC 3339, UTC).
    pub AccessTokenExpiration: String,
    /// When the IdToken expires (RFC 3339, UTC).
    pub IdTokenExpiration: String,
    /// Always `Bearer`.
    pub TokenType: &'static str,
}

pub fn volumez_refreshed(t: &TokenSet) -> VolumezRefreshed {
    let expiry = format_ms(
        i64::try_from(t.issued_at_secs.saturating_add(t.expires_in))
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000),
    );
    VolumezRefreshed {
        AccessToken: t.access_token.clone(),
        IdToken: t.id_token.clone(),
        AccessTokenExpiration: expiry.clone(),
        IdTokenExpiration: expiry,
        TokenType: "Bearer",
    }
}

/// One public key (RFC 8037: Ed25519 as an OKP key).
#[derive(Debug, Serialize, ToSchema)]
pub struct Jwk {
    /// `OKP`.
    pub kty: &'static str,
    /// `Ed25519`.
    pub crv: &'static str,
    /// `EdDSA`.
    pub alg: &'static str,
    /// `sig`.
    #[serde(rename = "use")]
    pub key_use: &'static str,
    /// The `kid` header of the tokens this key signs.
    pub kid: String,
    /// The public key, base64url without padding.
    pub x: String,
}

/// The JSON Web Key Set: the key that signs tokens now, then the retired
/// ones whose tokens may still be valid.
#[derive(Debug, Serialize, ToSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// Renders (kid, public key) pairs.
pub fn key_set(keys: &[(String, String)]) -> Jwks {
    Jwks {
        keys: keys
            .iter()
            .map(|(kid, x)| Jwk {
                kty: "OKP",
                crv: "Ed25519",
                alg: "EdDSA",
                key_use: "sig",
                kid: kid.clone(),
                x: x.clone(),
            })
            .collect(),
    }
}

impl Typed for SignInRequest {}
impl Typed for SignOutRequest {}
impl Typed for RefreshRequest {}
