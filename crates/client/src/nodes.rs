//! `svs node ...`: the subcommands and what each does through the API,
//! with the agent credential `node add` issues.

use super::agent_file::CredentialFile;
use super::context::{emit, Context, Print};
use super::error::{ClientError, Result};
use super::output::{self, OutputFormat};
use clap::Subcommand;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use svs_wire::views::{CredentialView, MediumView, NodeView};

/// The role of a node credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CredentialRole {
    Agent,
    Storage,
    /// A host that runs a storage node and attaches volumes with its agent.
    #[value(name = "agent+storage")]
    AgentAndStorage,
}

impl From<CredentialRole> for svs_domain::CredentialRole {
    fn from(role: CredentialRole) -> Self {
        match role {
            CredentialRole::Agent => svs_domain::CredentialRole::Agent,
            CredentialRole::Storage => svs_domain::CredentialRole::Storage,
            CredentialRole::AgentAndStorage => svs_domain::CredentialRole::AgentAndStorage,
        }
    }
}

impl CredentialRole {
    /// What runs with the credential, for people: "agent", "storage node".
    fn what(self) -> &'static str {
        match self {
            CredentialRole::Agent => "agent",
            CredentialRole::Storage => "storage node",
            CredentialRole::AgentAndStorage => "agent and storage node",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List the nodes (ROLE: storage for a storage node, else host;
    /// STATE: a storage node is Offline once it missed its heartbeats;
    /// COPIES: copies of slices on its media; AGENT: has a credential;
    /// AGENT SEEN: its agent's or storage node's last request).
    List,
    /// Show one node, its media and (administrators) the copies on them.
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
        /// What the credential is for: the host agent (`svs agent`), a
        /// storage node (`svs storage-node`), or both on one host.
        #[arg(long, value_enum, default_value_t = CredentialRole::Agent)]
        role: CredentialRole,
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
            NodeCommand::Get { name } => get(ctx, name).await,
            NodeCommand::Add {
                name,
                address,
                zone,
                credential_file,
                force,
                role,
            } => {
                add(
                    ctx,
                    name,
                    address,
                    zone.as_deref(),
                    credential_file.as_deref(),
                    *force,
                    *role,
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
    role: CredentialRole,
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
            let node: NodeView = s.hint(s.api.get_node(name).await)?;
            let current = node.zone;
            if current != zone {
                eprintln!(
                    "note: node {name} already exists in zone '{current}'; only its address was set"
                );
            }
        }
    }
    let issued = s.hint(s.api.issue_node_credential(name, role.into()).await)?;
    let view: CredentialView = s.api.read_answer(issued.clone())?;
    let credential = Some(view.credential)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ClientError::InvalidResponse {
            url: s.api.base().to_string(),
            detail: "no credential in the answer".into(),
        })?;
    let done = if added {
        format!("Node {name} added (address {address})")
    } else {
        format!("Node {name} exists; its address is now {address}")
    };
    match file {
        Some(file) => {
            let path = file.path().to_path_buf();
            file.write(&credential)?;
            let commands = match role {
                CredentialRole::Agent => vec![agent_command(s.api.base(), name, &path)],
                CredentialRole::Storage => vec![storage_node_command()],
                // The storage node first: the agent attaches what it serves.
                CredentialRole::AgentAndStorage => vec![
                    storage_node_command(),
                    agent_command(s.api.base(), name, &path),
                ],
            };
            match ctx.output {
                OutputFormat::Json => {
                    let mut shown = issued.clone();
                    if let Some(map) = shown.as_object_mut() {
                        map.remove("credential");
                    }
                    shown["credentialfile"] = json!(path.display().to_string());
                    shown["agentcommand"] = json!(commands.last());
                    if role == CredentialRole::AgentAndStorage {
                        shown["storagenodecommand"] = json!(commands.first());
                    }
                    emit(&output::render_json(&shown));
                }
                OutputFormat::Table => {
                    let what = role.what();
                    eprintln!("{done}; its {what} credential is in {}.", path.display());
                    eprintln!("Run the {what} on the host:\n  {}", commands.join("\n  "));
                    emit(&format!("{}\n", path.display()));
                }
            }
        }
        None if role == CredentialRole::AgentAndStorage => {
            let storage = storage_node_command();
            let agent = agent_command(s.api.base(), name, Path::new(STORAGE_CREDENTIAL_PATH));
            match ctx.output {
                OutputFormat::Json => {
                    let mut shown = issued.clone();
                    shown["storagenodecommand"] = json!(storage);
                    shown["agentcommand"] = json!(agent);
                    emit(&output::render_json(&shown));
                }
                OutputFormat::Table => emit(&format!(
                    "{done}.\n\
                     Agent and storage node credential (shown only this once; issuing another \
                     revokes it):\n\
                     {credential}\n\
                     Save it on the host in {STORAGE_CREDENTIAL_PATH} (mode 0600), name it as \
                     credential_file in the storage node's configuration and run both:\n  \
                     {storage}\n  {agent}\n"
                )),
            }
        }
        None if role == CredentialRole::Storage => {
            let command = storage_node_command();
            match ctx.output {
                OutputFormat::Json => {
                    let mut shown = issued.clone();
                    shown["storagenodecommand"] = json!(command);
                    emit(&output::render_json(&shown));
                }
                OutputFormat::Table => emit(&format!(
                    "{done}.\n\
                     Storage node credential (shown only this once; issuing another revokes it):\n\
                     {credential}\n\
                     Save it on the host in {STORAGE_CREDENTIAL_PATH} (mode 0600), name it as \
                     credential_file in the storage node's configuration and run:\n  \
                     {command}\n"
                )),
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
            let node: Value = s.hint(s.api.get_node(name).await)?;
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
/// Where `node add --role storage` suggests keeping it.
pub const STORAGE_CREDENTIAL_PATH: &str = "/etc/svs/storage-node.credential";
/// The storage node's configuration file of a package install.
pub const STORAGE_NODE_CONFIG_PATH: &str = "/etc/svs/storage-node.toml";

/// The command line that runs a storage node (its configuration names the
/// service, the node and the credential file).
pub fn storage_node_command() -> String {
    format!("svs storage-node --config {STORAGE_NODE_CONFIG_PATH}")
}

/// `svs node get`: the node, its media and, for an administrator, the
/// copies on them (volume, copy, column, state).
async fn get(ctx: &Context, name: &str) -> Result<()> {
    let s = ctx.session().await?;
    let node: Value = s.hint(s.api.get_node(name).await)?;
    let mut media: Vec<MediumView> = s.hint(s.api.list_media().await)?;
    media.retain(|m| m.node == name);
    // Copies span every tenant: administrators only.
    let copies = match s.api.node_copies(name).await {
        Ok(c) => Some(c),
        Err(ClientError::Api { status: 403, .. }) => None,
        Err(e) => return Err(s.auth_hint(e)),
    };
    match ctx.output {
        OutputFormat::Json => {
            let mut shown = node.clone();
            shown["media"] = json!(media);
            if let Some(c) = &copies {
                shown["copies"] = c.clone();
            }
            emit(&output::render_json(&shown));
        }
        OutputFormat::Table => {
            let mut text = output::render_object(&node);
            text.push_str("\nMedia:\n");
            text.push_str(&output::render_table(&json!(media), output::MEDIA_COLUMNS));
            match &copies {
                Some(c) => {
                    text.push_str("\nCopies:\n");
                    text.push_str(&output::render_table(c, output::NODE_COPY_COLUMNS));
                }
                None => text.push_str("\n(copies: administrators only)\n"),
            }
            emit(&text);
        }
    }
    Ok(())
}

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
