//! `svs serve`'s TLS, from its settings: the API's and NBD server's
//! certificates (`tls_cert`/`tls_key`, or `tls = "auto"`'s private CA), and
//! the slice protocol's TLS toward storage nodes. The building blocks are
//! in `svs_common::tls` and `svs_common::slice_tls`, shared with the
//! storage nodes and agents.

use crate::config::{Config, TlsMode};
use std::net::IpAddr;
use svs_common::slice_tls::SliceTls;
use svs_common::tls::{
    absolute, auto_certificates, fingerprint, host_name, load_chain, load_key, server_config,
    ServerTls, TlsFacts, TLS_DIR,
};

/// The servers' TLS, `None` when TLS is off. `http_ip` and `nbd_ip` are
/// the addresses the servers listen on (names of the `auto` certificate).
pub fn server_tls(
    config: &Config,
    http_ip: IpAddr,
    nbd_ip: IpAddr,
) -> Result<Option<ServerTls>, String> {
    let (chain, key, facts) = match (&config.tls_cert, &config.tls_key, config.tls) {
        (Some(cert), Some(key), _) => {
            let chain = load_chain(cert, "tls_cert")?;
            let key = load_key(key, "tls_key")?;
            let facts = TlsFacts {
                certificate: absolute(cert),
                own_ca: false,
                fingerprint: fingerprint(&chain[0]),
            };
            (chain, key, facts)
        }
        (_, _, TlsMode::Auto) => {
            let names = wanted_names(config, http_ip, nbd_ip);
            auto_certificates(&config.data_dir.join(TLS_DIR), &names)?
        }
        _ => return Ok(None),
    };
    let http = server_config(chain.clone(), key.clone_key(), vec![b"http/1.1".to_vec()])?;
    let nbd = server_config(chain, key, Vec::new())?;
    Ok(Some(ServerTls { http, nbd, facts }))
}

/// The names of the `auto` server certificate: the listen addresses
/// (unless "every address"), localhost, the loopback addresses, this
/// host's name and `tls_names`; each once.
fn wanted_names(config: &Config, http_ip: IpAddr, nbd_ip: IpAddr) -> Vec<String> {
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Some(host) = host_name() {
        names.push(host);
    }
    for ip in [http_ip, nbd_ip] {
        if !ip.is_unspecified() {
            names.push(ip.to_string());
        }
    }
    names.extend(config.tls_names.iter().cloned());
    let mut unique = Vec::new();
    for n in names {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    unique
}

/// The service's slice TLS, from its TLS settings. With `tls = "auto"`
/// the CA files must exist already ([`server_tls`] makes them).
pub fn slice_tls(config: &Config) -> Result<SliceTls, String> {
    let extra = match &config.slice_tls_ca {
        Some(path) => load_chain(path, "slice_tls_ca")?,
        None => Vec::new(),
    };
    if config.tls_cert.is_some() {
        return SliceTls::trusting(extra);
    }
    if config.tls == TlsMode::Auto {
        return SliceTls::with_ca(&config.data_dir.join(TLS_DIR), extra);
    }
    Ok(SliceTls::off())
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_common::slice_tls::SliceTlsMode;

    #[test]
    fn the_mode_follows_the_services_tls_settings() {
        let dir = tempfile::tempdir().expect("dir");
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        assert_eq!(slice_tls(&config).expect("off").mode(), SliceTlsMode::Off);
        config.tls = TlsMode::Auto;
        auto_certificates(&dir.path().join("tls"), &["localhost".into()]).expect("CA");
        let auto = slice_tls(&config).expect("auto");
        assert_eq!(auto.mode(), SliceTlsMode::Issued);
        assert_eq!(auto.mode().as_str(), "issued");
        assert_eq!(SliceTlsMode::parse("own"), Some(SliceTlsMode::Own));
        assert_eq!(SliceTlsMode::parse("on"), None);
    }
}
