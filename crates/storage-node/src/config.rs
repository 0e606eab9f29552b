//! The storage node's configuration file (TOML).

use super::StorageNodeError;
use bytesize::ByteSize;
use figment::providers::{Format, Toml};
use figment::Figment;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The NBD port of fronts when `front_listen` is not set (NBD's own).
pub const DEFAULT_FRONT_PORT: u16 = 10809;

/// `svs storage-node --config FILE`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageNodeConfig {
    /// Base URL of the control plane (`svs serve`), e.g. http://10.0.0.1:8080.
    pub api: String,
    /// This node's name (as in `svs node add NAME --role storage`).
    pub node: String,
    /// File holding the node's storage credential.
    pub credential_file: PathBuf,
    /// Address the slice server binds, e.g. 127.0.0.2:7450.
    pub slice_listen: SocketAddr,
    /// Address registered with the control plane, what fronts connect to
    /// (default: `slice_listen`).
    #[serde(default)]
    pub slice_advertise: Option<SocketAddr>,
    /// Address the NBD server of the volumes' fronts this node runs binds
    /// (default: `slice_listen`'s IP, port 10809).
    #[serde(default)]
    pub front_listen: Option<SocketAddr>,
    /// Address registered with the control plane, what attaching nodes
    /// connect to for a front here (default: the front listen address).
    #[serde(default)]
    pub front_advertise: Option<SocketAddr>,
    /// The node's own state (the epochs it accepted, per volume; its slice
    /// key and the slice certificate the control plane issued).
    pub state_dir: PathBuf,
    /// The slice server's own certificate chain (PEM), for a service with
    /// the operator's certificates (`tls_cert`), which issues none; with
    /// `slice_tls_key`. Must be valid for the slice address's IP.
    #[serde(default)]
    pub slice_tls_cert: Option<PathBuf>,
    /// The private key of `slice_tls_cert` (PEM).
    #[serde(default)]
    pub slice_tls_key: Option<PathBuf>,
    /// TCP congestion control of the fronts' NBD connections, as `svs
    /// serve`'s `nbd_tcp_congestion`: an algorithm, or "system" (default
    /// "cubic").
    #[serde(default = "default_nbd_tcp_congestion")]
    pub nbd_tcp_congestion: String,
    /// The media this node serves.
    #[serde(default)]
    pub media: Vec<StorageNodeMedium>,
}

fn default_nbd_tcp_congestion() -> String {
    svs_front::tcp::DEFAULT_NBD_TCP_CONGESTION.to_string()
}

/// One `[[media]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageNodeMedium {
    /// The medium's name, unique in the whole service.
    pub name: String,
    /// The directory holding its slices (absolute).
    pub directory: PathBuf,
    /// Its logical capacity, e.g. "100 GiB"; default: the size of the
    /// filesystem holding `directory`.
    #[serde(default)]
    pub size: Option<ByteSize>,
}

impl StorageNodeConfig {
    pub fn load(path: &Path) -> Result<StorageNodeConfig, StorageNodeError> {
        if !path.is_file() {
            return Err(StorageNodeError::Config(format!(
                "configuration file {} does not exist",
                path.display()
            )));
        }
        let config: StorageNodeConfig = Figment::from(Toml::file(path))
            .extract()
            .map_err(|e| StorageNodeError::Config(format!("configuration: {e}")))?;
        config.check()?;
        Ok(config)
    }

    /// What is registered as the slice server's address.
    pub fn advertised(&self) -> SocketAddr {
        self.slice_advertise.unwrap_or(self.slice_listen)
    }

    /// Where the NBD server of fronts listens.
    pub fn front_listen(&self) -> SocketAddr {
        self.front_listen
            .unwrap_or_else(|| SocketAddr::new(self.slice_listen.ip(), DEFAULT_FRONT_PORT))
    }

    /// What is registered as the front address.
    pub fn front_advertised(&self) -> SocketAddr {
        self.front_advertise.unwrap_or_else(|| self.front_listen())
    }

    fn check(&self) -> Result<(), StorageNodeError> {
        let bad = |m: String| Err(StorageNodeError::Config(format!("configuration: {m}")));
        if !(self.api.starts_with("http://") || self.api.starts_with("https://")) {
            return bad(format!(
                "api must start with http:// or https:// (got '{}')",
                self.api
            ));
        }
        if self.node.is_empty() {
            return bad("node must not be empty".into());
        }
        if let Err(e) = svs_front::tcp::nbd_tcp_congestion(&self.nbd_tcp_congestion) {
            return bad(format!("nbd_tcp_congestion: {e}"));
        }
        if self.slice_tls_cert.is_some() != self.slice_tls_key.is_some() {
            return bad(
                "slice_tls_cert and slice_tls_key go together: set both (PEM files) or neither"
                    .into(),
            );
        }
        if self.advertised().ip().is_unspecified() {
            return bad(format!(
                "slice_advertise must be an address fronts can reach, not {} \
                 (set it when slice_listen is a wildcard address)",
                self.advertised()
            ));
        }
        if self.front_advertised().ip().is_unspecified() {
            return bad(format!(
                "front_advertise must be an address attaching nodes can reach, not {} \
                 (set it when front_listen is a wildcard address)",
                self.front_advertised()
            ));
        }
        if self.front_listen() == self.slice_listen {
            return bad(format!(
                "front_listen and slice_listen are both {}: the NBD server of fronts needs \
                 an address of its own",
                self.slice_listen
            ));
        }
        for (i, m) in self.media.iter().enumerate() {
            if m.name.is_empty() {
                return bad("a [[media]] entry has an empty name".into());
            }
            if !m.directory.is_absolute() {
                return bad(format!(
                    "medium '{}': directory must be absolute (got '{}')",
                    m.name,
                    m.directory.display()
                ));
            }
            if self.media[..i].iter().any(|o| o.name == m.name) {
                return bad(format!("medium '{}' is listed twice", m.name));
            }
            if self.media[..i].iter().any(|o| o.directory == m.directory) {
                return bad(format!(
                    "media '{}' and '{}' share directory {}",
                    self.media[..i]
                        .iter()
                        .find(|o| o.directory == m.directory)
                        .map_or("", |o| o.name.as_str()),
                    m.name,
                    m.directory.display()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<StorageNodeConfig, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let file = dir.path().join("node.toml");
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        StorageNodeConfig::load(&file).map_err(|e| e.to_string())
    }

    const BASE: &str = r#"
api = "http://127.0.0.1:8080"
node = "sn-1"
credential_file = "/etc/svs/storage-node.credential"
slice_listen = "127.0.0.2:7450"
state_dir = "/var/lib/svs-storage-node"
"#;

    #[test]
    fn a_configuration_names_its_media_and_advertises_its_listen_address_by_default() {
        let c = load(&format!(
            "{BASE}\n[[media]]\nname = \"d1\"\ndirectory = \"/srv/d1\"\nsize = \"10 GiB\"\n\
             [[media]]\nname = \"d2\"\ndirectory = \"/srv/d2\"\n"
        ))
        .unwrap();
        assert_eq!(c.advertised(), "127.0.0.2:7450".parse().unwrap());
        assert_eq!(c.media.len(), 2);
        assert_eq!(c.media[0].size, Some(ByteSize::gib(10)));
        assert_eq!(c.media[1].size, None);
        assert_eq!(c.front_listen(), "127.0.0.2:10809".parse().unwrap());
        assert_eq!(c.front_advertised(), "127.0.0.2:10809".parse().unwrap());
        assert_eq!(c.nbd_tcp_congestion, "cubic");
    }

    #[test]
    fn fronts_listen_and_advertise_where_configured() {
        let c = load(&format!(
            "{BASE}front_listen = \"0.0.0.0:10900\"\nfront_advertise = \"127.0.0.2:10901\"\n"
        ))
        .unwrap();
        assert_eq!(c.front_listen(), "0.0.0.0:10900".parse().unwrap());
        assert_eq!(c.front_advertised(), "127.0.0.2:10901".parse().unwrap());
        let c = load(&format!("{BASE}front_listen = \"127.0.0.3:10900\"\n")).unwrap();
        assert_eq!(c.front_advertised(), "127.0.0.3:10900".parse().unwrap());
        let err = load(&format!("{BASE}front_listen = \"0.0.0.0:10900\"\n")).unwrap_err();
        assert!(err.contains("front_advertise must be an address"), "{err}");
        let err = load(&format!("{BASE}front_listen = \"127.0.0.2:7450\"\n")).unwrap_err();
        assert!(
            err.contains("front_listen and slice_listen are both"),
            "{err}"
        );
    }

    #[test]
    fn bad_configurations_are_refused_with_what_is_wrong() {
        for (extra, message) in [
            (
                "[[media]]\nname = \"d1\"\ndirectory = \"srv\"\n",
                "medium 'd1': directory must be absolute",
            ),
            (
                "[[media]]\nname = \"d1\"\ndirectory = \"/a\"\n[[media]]\nname = \"d1\"\ndirectory = \"/b\"\n",
                "medium 'd1' is listed twice",
            ),
            (
                "[[media]]\nname = \"d1\"\ndirectory = \"/a\"\n[[media]]\nname = \"d2\"\ndirectory = \"/a\"\n",
                "media 'd1' and 'd2' share directory /a",
            ),
            ("colour = \"red\"\n", "unknown field: found `colour`"),
            (
                "nbd_tcp_congestion = \"BBR 2\"\n",
                "configuration: nbd_tcp_congestion: \"BBR 2\" is not a TCP congestion control name",
            ),
        ] {
            let err = load(&format!("{BASE}{extra}")).unwrap_err();
            assert!(err.contains(message), "{err}");
        }
        let err = load(&BASE.replace("127.0.0.2:7450", "0.0.0.0:7450")).unwrap_err();
        assert!(err.contains("slice_advertise must be an address"), "{err}");
        let err = load(&format!("{BASE}slice_tls_cert = \"/etc/svs/slice.pem\"\n")).unwrap_err();
        assert!(
            err.contains("slice_tls_cert and slice_tls_key go together"),
            "{err}"
        );
        let err = load(&BASE.replace("http://", "ftp://")).unwrap_err();
        assert!(err.contains("api must start with http"), "{err}");
    }
}
