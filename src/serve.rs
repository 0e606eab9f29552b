//! `svs serve`: runs the service and says where it is. The one command
//! above `svs-api`: here, in the binary, so that the command line's crate
//! (`svs-cli`) does not rebuild when a handler changes.

use std::net::SocketAddr;
use svs_api::app::{Application, Boxed, StartupFacts};
use svs_cli::ServeArgs;
use svs_common::logging::init_tracing;
use svs_control::config::{Config, Overrides};

/// Runs `svs serve` until SIGINT/SIGTERM (boxed: `svs_cli::ServeFn`).
pub fn run(args: ServeArgs) -> Boxed<Result<(), String>> {
    Box::pin(serve(args))
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let config = Config::load(&Overrides {
        config_file: args.common.config,
        data_dir: args.common.data_dir,
        listen: args.listen,
        nbd_listen: args.nbd_listen,
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
fn startup_lines(http: SocketAddr, nbd: SocketAddr, facts: &StartupFacts) -> String {
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
fn console_url(scheme: &str, http: SocketAddr) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn facts(demo: bool, has_users: bool) -> StartupFacts {
        StartupFacts {
            data_dir: PathBuf::from("/var/lib/svs"),
            media: if demo { 6 } else { 2 },
            api_media: 0,
            demo,
            storage_nodes_only: false,
            has_users,
            tls: None,
            nbd_tls: svs_control::config::NbdTlsMode::Off,
            plaintext_warnings: Vec::new(),
        }
    }

    #[test]
    fn startup_lines_with_tls_say_https_and_the_ca_to_trust() {
        let http: SocketAddr = "0.0.0.0:8443".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let mut facts = facts(true, true);
        facts.tls = Some(svs_common::tls::TlsFacts {
            certificate: PathBuf::from("/var/lib/svs/tls/ca.pem"),
            own_ca: true,
            fingerprint: "AB:CD".into(),
        });
        facts.nbd_tls = svs_control::config::NbdTlsMode::Require;
        let text = startup_lines(http, nbd, &facts);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "svs listening on https://0.0.0.0:8443");
        assert!(lines[3].starts_with("svs console: https://"), "{text}");
        assert_eq!(
            lines[4],
            "svs tls: svs's private CA /var/lib/svs/tls/ca.pem (SHA-256 AB:CD); clients trust it \
             with --ca-cert /var/lib/svs/tls/ca.pem; nbd tls require"
        );
    }

    #[test]
    fn startup_lines_count_media_added_through_the_api_when_there_are_some() {
        let http: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let mut with_api = facts(false, true);
        with_api.api_media = 3;
        let text = startup_lines(http, nbd, &with_api);
        assert_eq!(
            text.lines().nth(4),
            Some("svs media: 2 from the configuration, 3 added through the API (no demo topology)")
        );
    }

    #[test]
    fn startup_lines_say_when_every_copy_is_on_storage_nodes() {
        let http: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let mut nodes_only = facts(false, true);
        nodes_only.media = 0;
        nodes_only.storage_nodes_only = true;
        let text = startup_lines(http, nbd, &nodes_only);
        assert_eq!(
            text.lines().nth(4),
            Some(
                "svs media: none of this host (storage_nodes_only: every copy is on storage nodes)"
            )
        );
    }

    #[test]
    fn startup_lines_begin_with_the_listening_lines_then_say_where_things_are() {
        let http: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let text = startup_lines(http, nbd, &facts(true, true));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "svs listening on http://127.0.0.1:8080",
                "svs nbd listening on nbd://127.0.0.1:10809",
                "svs data directory: /var/lib/svs",
                "svs console: http://127.0.0.1:8080/ui/",
                "svs media: demo topology, 6 media under /var/lib/svs/media (for trying svs; \
                 list real media as [[media]] in a configuration file)",
            ]
        );
        let text = startup_lines(http, nbd, &facts(false, false));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert_eq!(
            lines[4],
            "svs media: 2 from the configuration (no demo topology)"
        );
        assert!(
            lines[5].starts_with(
                "svs: no users yet, so nobody can sign in: add the first administrator with \
                 `svs user add --admin --email EMAIL --tenant TENANT --data-dir /var/lib/svs`"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_console_url_of_every_address_names_this_host() {
        let url = console_url("http", "0.0.0.0:8080".parse().unwrap());
        assert!(
            url.starts_with("http://") && url.ends_with(":8080/ui/"),
            "{url}"
        );
        assert!(!url.contains("0.0.0.0"), "{url}");
        assert_eq!(
            console_url("http", "[::1]:9000".parse().unwrap()),
            "http://[::1]:9000/ui/"
        );
    }
}
