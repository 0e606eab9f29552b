//! Authentication: password hashing, signed tokens, refresh tokens.

mod check_pool;
mod keys;
mod passwords;
mod tokens;

pub use check_pool::{CheckError, PasswordCheckPool};
pub use keys::{rotate_keys, KeyRing, RetiredKey, SigningKey, KEY_FILE, RETIRED_DIR};
pub use passwords::{hash_password, verify_password, PasswordError, MIN_PASSWORD_LEN};
pub use tokens::{
    new_refresh_token, refresh_token_hash, Claims, TokenIssuer, TokenSet, TokenSubject, TokenUse,
};
