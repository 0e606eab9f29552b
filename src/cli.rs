//! The `svs` command line: `serve` runs the service; the rest are tools.

use crate::app::{add_user, open_store, Application};
use crate::config::{Config, Overrides};
use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "svs", version, about = "Self-hosted storage volume service")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// Configuration file (TOML).
    #[arg(long, env = "SVS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (database, keys, demo media). Default ./svs-data.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service.
    Serve {
        #[command(flatten)]
        common: CommonArgs,
        /// Address to listen on, e.g. 127.0.0.1:8080 (port 0 = any free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Address the NBD server listens on, e.g. 127.0.0.1:10809.
        #[arg(long)]
        nbd_listen: Option<SocketAddr>,
    },
    /// Manage users directly in the data directory (works offline).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user; the password is read from stdin, or prompted for on a terminal.
    Add {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        email: String,
        /// Tenant name; created if it does not exist.
        #[arg(long)]
        tenant: String,
        /// Display name (default: the part of the e-mail before '@').
        #[arg(long)]
        name: Option<String>,
        /// Make the user an administrator of the tenant.
        #[arg(long)]
        admin: bool,
    },
}

fn init_tracing(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Everything svs creates (database, slice files, media directories) holds
/// user data or password hashes: owner-only.
fn private_files() {
    // SAFETY: umask only changes this process's file-creation mask; it
    // cannot fail and touches no memory.
    unsafe {
        libc::umask(0o077);
    }
}

pub async fn run(cli: Cli) -> Result<(), String> {
    private_files();
    match cli.command {
        Command::Serve {
            common,
            listen,
            nbd_listen,
        } => {
            let config = Config::load(&Overrides {
                config_file: common.config,
                data_dir: common.data_dir,
                listen,
                nbd_listen,
            })?;
            init_tracing(&config.log);
            let app = Application::build(config).await?;
            let addr = app.local_addr()?;
            let nbd = app.nbd_addr()?;
            // Tests and scripts read these lines to find the ports. One
            // write, and no failure if nobody reads stdout any more.
            {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = write!(
                    out,
                    "svs listening on http://{addr}\nsvs nbd listening on nbd://{nbd}\n"
                );
                let _ = out.flush();
            }
            app.run_until_stopped().await
        }
        Command::User {
            command:
                UserCommand::Add {
                    common,
                    email,
                    tenant,
                    name,
                    admin,
                },
        } => {
            let config = Config::load(&Overrides {
                config_file: common.config,
                data_dir: common.data_dir,
                listen: None,
                nbd_listen: None,
            })?;
            let password = read_password()?;
            let store = open_store(&config).await?;
            add_user(&store, &tenant, &email, name.as_deref(), &password, admin).await?;
            store.close().await;
            println!("added user {email} to tenant {tenant}");
            Ok(())
        }
    }
}

fn read_password() -> Result<String, String> {
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("Password: ").map_err(|e| e.to_string())?;
        let second = rpassword::prompt_password("Repeat password: ").map_err(|e| e.to_string())?;
        if first != second {
            return Err("passwords do not match".into());
        }
        Ok(first)
    } else {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
        Ok(input.trim_end_matches(['\n', '\r']).to_string())
    }
}
