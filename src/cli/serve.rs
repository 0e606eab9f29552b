//! `svs serve`: runs the service and says where it is.

use super::CommonArgs;
use std::net::SocketAddr;
use svs_api::app::{Application, StartupFacts};
use svs_common::logging::init_tracing;
use svs_control::config::{Config, Overrides};

pub(super) async fn run(
    common: CommonArgs,
    listen: Option<SocketAddr>,
    nbd_listen: Option<SocketAddr>,
) -> Result<(), String> {
    let config = Config::load(&Overrides {
        config_file: common.config,
        data_dir: common.data_dir,
        listen,
        nbd_listen,
    })?;
    init_tracing(&config.log, config.log_format);
    warn_unknown_env_settings();
    let app = Application::build(config).await?;
    let addr = app.local_addr()?;
    let nbd = app.nbd_addr()?;
    // One write, and no failure if nobody reads stdout any more.
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(startup_lines(addr, nbd, app.facts()).as_bytes());
        let _ = out.flush();
    }
    app.run_until_stopped().await
}

/// The first lines of `svs serve` on stdout. The two "listening" lines come
/// first and never change: tests and scripts read them to find the ports.
pub(super) fn startup_lines(http: SocketAddr, nbd: SocketAddr, facts: &StartupFacts) -> String {
    let scheme = if facts.tls.is_some() { "https" } else { "http" };
    let mut lines = format!(
        "svs listening on {scheme}://{http}\nsvs nbd listening on nbd://{nbd}\n\
         svs data directory: {}\nsvs console: {}\n",
        facts.data_dir.display(),
        console_url(scheme, http)
    );
    if let Some(tls) = &facts.tls {
        let whose = if tls.own_ca {
            "svs's private CA"
        } else {
            "certificate"
        };
        lines.push_str(&format!(
            "svs tls: {whose} {} (SHA-256 {}); clients trust it with --ca-cert {}; nbd tls {}\n",
            tls.certificate.display(),
            tls.fingerprint,
            tls.certificate.display(),
            facts.nbd_tls.as_str()
        ));
    }
    for warning in &facts.plaintext_warnings {
        lines.push_str(&format!("svs: {warning}\n"));
    }
    // Media added through the API are named only when there are some, so
    // the line stays as it was for a service that has none.
    let api = match facts.api_media {
        0 => String::new(),
        n => format!(", {n} added through the API"),
    };
    if facts.demo {
        lines.push_str(&format!(
            "svs media: demo topology, {} media under {}{api} (for trying svs; list real media \
             as [[media]] in a configuration file)\n",
            facts.media,
            facts.data_dir.join("media").display()
        ));
    } else if facts.storage_nodes_only {
        lines.push_str(
            "svs media: none of this host (storage_nodes_only: every copy is on storage nodes)\n",
        );
    } else {
        lines.push_str(&format!(
            "svs media: {} from the configuration{api} (no demo topology)\n",
            facts.media
        ));
    }
    if !facts.has_users {
        lines.push_str(&format!(
            "svs: {}\n",
            svs_api::app::first_user_hint(&facts.data_dir)
        ));
    }
    lines
}

/// The console's address; on every address (0.0.0.0, ::) through this
/// host's name, which other machines can more likely reach.
pub(super) fn console_url(scheme: &str, http: SocketAddr) -> String {
    if http.ip().is_unspecified() {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string());
        format!("{scheme}://{host}:{}/ui/", http.port())
    } else {
        format!("{scheme}://{http}/ui/")
    }
}

/// One warning naming every `SVS_*` variable that is no setting (a typo
/// stays visible without stopping the service).
fn warn_unknown_env_settings() {
    let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
    let unknown = svs_control::config::unknown_env_settings(names);
    if !unknown.is_empty() {
        tracing::warn!(
            variables = %unknown.join(", "),
            "ignoring unknown SVS_* environment variables (not settings of svs serve)"
        );
    }
}
