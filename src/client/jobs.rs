//! `svs job ...`: the subcommands and what each does through the API.

use super::context::{emit, Context, Print};
use super::error::Result;
use super::output::{self, OutputFormat};
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// List jobs, newest first.
    List {
        /// Job type, e.g. volume_create, volume_modify_extend.
        #[arg(long = "type")]
        kind: Option<String>,
        /// Volume name or id (a name also finds the jobs of a deleted
        /// volume of that name).
        #[arg(long, value_name = "NAME")]
        object: Option<String>,
        /// Pending, Running, Done or Error.
        #[arg(long)]
        state: Option<String>,
        /// Page (1-based).
        #[arg(long)]
        page: Option<u32>,
        /// Jobs per page (1..1000, default 100).
        #[arg(long)]
        count: Option<u32>,
    },
    /// Show one job.
    Get {
        /// The job's id.
        id: String,
    },
    /// Follow a job until it ends (exit status 1 if it ends in Error).
    Watch {
        /// The job's id.
        id: String,
    },
}

impl JobCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            JobCommand::List {
                kind,
                object,
                state,
                page,
                count,
            } => {
                list(
                    ctx,
                    &JobFilter {
                        kind: kind.clone(),
                        object: object.clone(),
                        state: state.clone(),
                        page: *page,
                        count: *count,
                    },
                )
                .await
            }
            JobCommand::Get { id } => {
                ctx.show(Print::One, |api| async move { api.get_job(id).await })
                    .await
            }
            JobCommand::Watch { id } => watch(ctx, id).await,
        }
    }
}

/// `job list` filters (None = no filter).
#[derive(Debug, Default, Clone)]
pub struct JobFilter {
    pub kind: Option<String>,
    pub object: Option<String>,
    pub state: Option<String>,
    pub page: Option<u32>,
    pub count: Option<u32>,
}

async fn list(ctx: &Context, filter: &JobFilter) -> Result<()> {
    let mut query = Vec::new();
    let strings = [
        ("type", &filter.kind),
        ("object", &filter.object),
        ("state", &filter.state),
    ];
    for (key, value) in strings {
        if let Some(v) = value {
            query.push((key, v.clone()));
        }
    }
    if let Some(page) = filter.page {
        query.push(("page", page.to_string()));
    }
    if let Some(count) = filter.count {
        query.push(("count", count.to_string()));
    }
    ctx.show(Print::List(output::JOB_COLUMNS), |api| async move {
        api.list_jobs(&query).await
    })
    .await
}

/// Follows a job to its end: exit status 0 on Done, an error on Error.
async fn watch(ctx: &Context, id: &str) -> Result<()> {
    let mut s = ctx.session().await?;
    let job = ctx.follow(&mut s, id).await?;
    if ctx.output == OutputFormat::Json {
        emit(&output::render_json(&job));
    }
    Ok(())
}
