//! The one error type of the client layer.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No stored session for the profile (never signed in, or signed out).
    #[error("not signed in (profile \"{profile}\"): run `svs login --url URL --email EMAIL{hint}` first")]
    NotSignedIn { profile: String, hint: String },
    /// The session can no longer be renewed (refresh token revoked or expired).
    #[error("{message}: the session of profile \"{profile}\" has ended, run `svs login` again")]
    SessionEnded { profile: String, message: String },
    /// The server answered with an error; `message` is its `{"message"}`.
    #[error("{message}")]
    Api { status: u16, message: String },
    #[error("cannot reach {url}: {}", http_cause(source))]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("unexpected answer from {url}: {detail}")]
    InvalidResponse { url: String, detail: String },
    #[error("credentials file {}: {source}", path.display())]
    Credentials {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("credentials file {}: {detail}", path.display())]
    CredentialsFormat { path: PathBuf, detail: String },
    /// `node add --credential-file`: the file could not be written.
    #[error("credential file {}: {source}", path.display())]
    CredentialFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot find the configuration directory: set HOME or XDG_CONFIG_HOME")]
    NoConfigDir,
    #[error("{0}")]
    Input(String),
    /// A followed job ended in `Error`; `message` is its last detail.
    #[error("{message}")]
    JobFailed { id: String, message: String },
    /// `job cancel`: the job finished (Done) before the cancel stopped it.
    #[error("job {id} finished (Done) before it could be cancelled: what it did stays")]
    NotCancelled { id: String },
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// A request's error with its causes (reqwest's own message hides them,
/// e.g. a refused certificate), and what to do about a refused certificate.
fn http_cause(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    if text.contains("invalid peer certificate") {
        text.push_str(
            " (a service with its own CA, tls = \"auto\"? trust its CA certificate with \
             --ca-cert FILE or SVS_CA_CERT)",
        );
    }
    text
}
