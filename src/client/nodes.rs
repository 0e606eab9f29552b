//! `svs node ...`: the subcommands and what each does through the API,
//! with the agent credential `node add` issues.

use super::agent_file::CredentialFile;
use super::context::{emit, Context, Print};
use super::error::{ClientError, Result};
use super::output::{self, OutputFormat};
use clap::Subcommand;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List the nodes (AGENT: has an agent credential; AGENT SEEN: its
    /// agent's last request).
    List,
    /// Show one node.
    Get {
        /// The node's name.
        name: String,
    },
    /// Add a node (an existing one gets the address) and issue the
    /// credential of its agent, revoking the one it had (administrators).
    /// Prints the credential and the agent's command line, or with
    /// --credential-file only the file's path.
    Add {
        /// The node's name.
        name: String,
        /// The IP address the node attaches from.
        #[arg(long)]
        address: String,
        /// Zone of a new node (default: the server's, "").
        #[arg(long)]
        zone: Option<String>,
        /// Write the credential to this file (created 0600) instead of
        /// printing it.
        #[arg(long, value_name = "FILE")]
        credential_file: Option<PathBuf>,
        /// Replace an existing --credential-file.
        #[arg(long, requires = "credential_file")]
        force: bool,
    },
    /// Revoke the node's agent credential: its agent is refused from then
    /// on (administrators).
    Revoke {
        /// The node's name.
        name: String,
    },
    /// Remove a node added through the API (administrators); refused while
    /// it has media or attachments. Its agent credential is revoked.
    Remove {
        /// The node's name.
        name: String,
    },
}

impl NodeCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            NodeCommand::List => {
                ctx.show(Print::List(output::NODE_COLUMNS), |api| async move {
                    api.list_nodes().await
                })
                .await
            }
            NodeCommand::Get { name } => {
                ctx.show(Print::One, |api| async move { api.get_node(name).await })
                    .await
            }
            NodeCommand::Add {
                name,
                address,
                zone,
                credential_file,
                force,
            } => {
                add(
                    ctx,
                    name,
                    address,
                    zone.as_deref(),
                    credential_file.as_deref(),
                    *force,
                )
                .await
            }
            NodeCommand::Revoke { name } => revoke(ctx, name).await,
            NodeCommand::Remove { name } => {
                ctx.show(
                    Print::Message,
                    |api| async move { api.delete_node(name).await },
                )
                .await
            }
        }
    }
}

/// Adds a node (or, when it exists, sets its address) and issues its
/// agent credential, revoking the one it had. The credential is shown
/// once with the agent's command line, or written to `credential_file`
/// (0600; an existing file only with `force`), whose path alone is
/// printed then.
async fn add(
    ctx: &Context,
    name: &str,
    address: &str,
    zone: Option<&str>,
    credential_file: Option<&Path>,
    force: bool,
) -> Result<()> {
    // Before anything changes on the server: a file that cannot be
    // written must not cost the node its working credential.
    let file = credential_file
        .map(|path| CredentialFile::reserve(path, force))
        .transpose()?;
    let s = ctx.session().await?;
    let added = match s.api.create_node(name, address, zone).await {
        Ok(_) => true,
        Err(ClientError::Api {
            status: 409,
            message,
        }) if message.contains("already exists") => {
            s.hint(s.api.set_node_address(name, address).await)?;
            false
        }
        Err(e) => return Err(s.auth_hint(e)),
    };
    if !added {
        if let Some(zone) = zone {
            let node = s.hint(s.api.get_node(name).await)?;
            let current = output::text(&node["zone"]);
            if current != zone {
                eprintln!(
                    "note: node {name} already exists in zone '{current}'; only its address was set"
                );
            }
        }
    }
    let issued = s.hint(s.api.issue_node_credential(name).await)?;
    let credential = issued["credential"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ClientError::InvalidResponse {
            url: s.api.base().to_string(),
            detail: "no credential in the answer".into(),
        })?
        .to_string();
    let done = if added {
        format!("Node {name} added (address {address})")
    } else {
        format!("Node {name} exists; its address is now {address}")
    };
    match file {
        Some(file) => {
            let path = file.path().to_path_buf();
            file.write(&credential)?;
            let command = agent_command(s.api.base(), name, &path);
            match ctx.output {
                OutputFormat::Json => {
                    let mut shown = issued.clone();
                    if let Some(map) = shown.as_object_mut() {
                        map.remove("credential");
                    }
                    shown["credentialfile"] = json!(path.display().to_string());
                    shown["agentcommand"] = json!(command);
                    emit(&output::render_json(&shown));
                }
                OutputFormat::Table => {
                    eprintln!("{done}; its agent credential is in {}.", path.display());
                    eprintln!("Run the agent on the host:\n  {command}");
                    emit(&format!("{}\n", path.display()));
                }
            }
        }
        None => {
            let command = agent_command(s.api.base(), name, Path::new(AGENT_CREDENTIAL_PATH));
            match ctx.output {
                OutputFormat::Json => {
                    let mut shown = issued.clone();
                    shown["agentcommand"] = json!(command);
                    emit(&output::render_json(&shown));
                }
                OutputFormat::Table => emit(&format!(
                    "{done}.\n\
                     Agent credential (shown only this once; issuing another revokes it):\n\
                     {credential}\n\
                     Save it on the host in {AGENT_CREDENTIAL_PATH} (mode 0600) and run:\n  \
                     {command}\n"
                )),
            }
        }
    }
    Ok(())
}

/// Revokes the node's agent credential: its agent's next request is
/// refused (401).
async fn revoke(ctx: &Context, name: &str) -> Result<()> {
    let s = ctx.session().await?;
    s.hint(s.api.revoke_node_credential(name).await)?;
    match ctx.output {
        OutputFormat::Json => {
            let node = s.hint(s.api.get_node(name).await)?;
            emit(&output::render_json(&node));
        }
        OutputFormat::Table => emit(&format!(
            "Agent credential of node {name} revoked; its agent is refused from now on.\n"
        )),
    }
    Ok(())
}

/// Where `node add` suggests keeping the credential on the host.
pub const AGENT_CREDENTIAL_PATH: &str = "/etc/svs/agent.credential";

/// The command line that runs a node's agent.
pub fn agent_command(url: &str, node: &str, credential_file: &Path) -> String {
    format!(
        "svs agent --url {} --node {} --credential-file {}",
        shell_word(url),
        shell_word(node),
        shell_word(&credential_file.display().to_string())
    )
}

/// A word as a POSIX shell reads it back: as is when it is plain, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._/:=@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_command_line_quotes_what_the_shell_would_split() {
        assert_eq!(
            agent_command(
                "http://10.0.0.1:8080",
                "host-7",
                Path::new("/etc/svs/agent.credential")
            ),
            "svs agent --url http://10.0.0.1:8080 --node host-7 --credential-file /etc/svs/agent.credential"
        );
        assert_eq!(
            agent_command("https://svs.example", "h", Path::new("/tmp/my cred's")),
            "svs agent --url https://svs.example --node h --credential-file '/tmp/my cred'\\''s'"
        );
    }
}
