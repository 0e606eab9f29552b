//! `svs policy ...`: the subcommands and what each does through the API.

use super::context::{Context, Print};
use super::error::Result;
use super::output;
use clap::Subcommand;
use serde_json::{json, Map, Value};

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// List the policies.
    List,
    /// Show one policy.
    Get {
        /// The policy's name.
        name: String,
    },
    /// Create a policy (unset resiliencies take the server's defaults 2/1/1).
    Create {
        /// The policy's name.
        name: String,
        /// Media failures to survive (0..2); a policy keeps 1 + the largest
        /// resiliency copies of every slice, each on a different medium.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_media: Option<u8>,
        /// Node failures to survive (0..2); at least 1 puts the copies of a
        /// column on different nodes.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_node: Option<u8>,
        /// Zone failures to survive (0..2); at least 1 puts the copies of a
        /// column in different zones.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_zone: Option<u8>,
    },
    /// Delete a policy.
    Delete {
        /// The policy's name.
        name: String,
    },
}

impl PolicyCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            PolicyCommand::List => {
                ctx.show(Print::List(output::POLICY_COLUMNS), |api| async move {
                    api.list_policies().await
                })
                .await
            }
            PolicyCommand::Get { name } => {
                ctx.show(Print::One, |api| async move { api.get_policy(name).await })
                    .await
            }
            // Unset resiliencies take the server's defaults.
            PolicyCommand::Create {
                name,
                resiliency_media,
                resiliency_node,
                resiliency_zone,
            } => {
                let mut body = Map::new();
                body.insert("name".into(), json!(name));
                for (field, value) in [
                    ("resiliencymedia", resiliency_media),
                    ("resiliencynode", resiliency_node),
                    ("resiliencyzone", resiliency_zone),
                ] {
                    if let Some(v) = value {
                        body.insert(field.into(), json!(v));
                    }
                }
                let body = Value::Object(body);
                ctx.show(Print::Message, |api| async move {
                    api.create_policy(&body).await
                })
                .await
            }
            PolicyCommand::Delete { name } => {
                ctx.show(Print::Message, |api| async move {
                    api.delete_policy(name).await
                })
                .await
            }
        }
    }
}
