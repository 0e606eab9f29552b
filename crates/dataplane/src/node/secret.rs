//! [`SharedSecret`]: the credential every front presents to this node, one
//! secret shared by the cluster, replaceable while the node runs.

use std::net::SocketAddr;
use std::sync::{PoisonError, RwLock};
use subtle::ConstantTimeEq;
use svs_sliceproto::Authenticator;

/// Accepts connections whose credential is the secret, compared in
/// constant time (how much of it matched does not show in the time taken;
/// its length may). [`SharedSecret::set`] replaces it for connections made
/// from then on. An empty secret accepts nobody.
pub struct SharedSecret {
    secret: RwLock<Vec<u8>>,
}

impl std::fmt::Debug for SharedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedSecret(..)")
    }
}

impl SharedSecret {
    pub fn new(secret: &str) -> SharedSecret {
        SharedSecret {
            secret: RwLock::new(secret.as_bytes().to_vec()),
        }
    }

    /// Replaces the secret (a rotation): connections already accepted go
    /// on, new ones must present `secret`.
    pub fn set(&self, secret: &str) {
        *self.secret.write().unwrap_or_else(PoisonError::into_inner) = secret.as_bytes().to_vec();
    }
}

impl Authenticator for SharedSecret {
    fn authenticate(
        &self,
        credential: &str,
        caller: &str,
        _peer: SocketAddr,
    ) -> Result<(), String> {
        let secret = self.secret.read().unwrap_or_else(PoisonError::into_inner);
        if secret.is_empty() {
            return Err("this storage node has no credential set: it accepts no front end".into());
        }
        if bool::from(secret.as_slice().ct_eq(credential.as_bytes())) {
            Ok(())
        } else {
            Err(format!(
                "unknown or revoked node credential (caller {caller:?})"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 4000))
    }

    #[test]
    fn the_secret_and_only_it_is_accepted_until_replaced() {
        let auth = SharedSecret::new("s3cret");
        assert_eq!(auth.authenticate("s3cret", "front-1", peer()), Ok(()));
        for wrong in ["s3cre", "s3creT", "s3cret ", ""] {
            assert_eq!(
                auth.authenticate(wrong, "front-1", peer()),
                Err("unknown or revoked node credential (caller \"front-1\")".to_string())
            );
        }
        auth.set("n3w");
        assert!(auth.authenticate("s3cret", "front-1", peer()).is_err());
        assert_eq!(auth.authenticate("n3w", "front-1", peer()), Ok(()));
        auth.set("");
        assert_eq!(
            auth.authenticate("", "front-1", peer()),
            Err("this storage node has no credential set: it accepts no front end".to_string())
        );
        assert_eq!(format!("{auth:?}"), "SharedSecret(..)");
    }
}
