//! `svs job ...`: the subcommands and what each does through the API.

use super::context::{emit, job_view, Context, Print};
use super::error::{ClientError, Result};
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
    /// Cancel a pending or running job, or remove the record of one that
    /// ended.
    ///
    /// A volume's creation, resize (with its data movement) or recovery
    /// can be cancelled: the job stops, undoes what it did and ends in
    /// Error with status Cancelled. The command follows it until then and
    /// prints it (exit status 0); if the job finished (Done) first, it
    /// prints it and exits 1. On a job that already ended, the job's record
    /// is removed (what the job did stays). Other kinds of jobs, and a
    /// resize past its point of no return, cannot be cancelled.
    Cancel {
        /// The job's id.
        id: String,
        /// Return once the cancel is asked for, printing the server's
        /// message (follow the job with `svs job watch`).
        #[arg(long)]
        no_wait: bool,
    },
    /// Pause a running data movement or recovery: its copies wait where
    /// they are.
    ///
    /// Only a resize with data movement (volume_modify_extend) or a
    /// recovery (volume_recovery) that has not ended can be paused, and not
    /// while it is being cancelled nor once a resize is past its point of
    /// no return. Its copies stop at their last checkpoint while writes to
    /// the volume go on; the job stays Running with a status starting
    /// "Paused:", and what it blocks on the volume stays blocked. A restart
    /// of the service keeps it paused. Prints the job; `svs job resume`
    /// lets it go on.
    Pause {
        /// The job's id.
        id: String,
    },
    /// Resume a paused data movement or recovery: its copies go on from
    /// their last checkpoint.
    ///
    /// Prints the job.
    Resume {
        /// The job's id.
        id: String,
    },
    /// Set the copy rate of a running data movement or recovery.
    ///
    /// The job's own rate, in place of the service's movement_rate: the
    /// running copy takes it at its next step, going on from where it is.
    /// Only a resize with data movement (volume_modify_extend) or a
    /// recovery (volume_recovery) that has not ended, and is not being
    /// cancelled, takes a rate. Prints the job (its movementrate in bytes
    /// per second, empty for the service's).
    Rate {
        /// The job's id.
        id: String,
        /// Bytes per second: "64 MiB", a number of bytes, 0 (unthrottled),
        /// or default (back to the service's movement_rate).
        #[arg(value_parser = parse_copy_rate)]
        rate: CopyRate,
    },
}

/// A job's own copy rate (`svs job rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyRate {
    /// The service's `movement_rate` (sent as null).
    Default,
    /// Bytes per second; 0 is unthrottled.
    PerSecond(u64),
}

impl CopyRate {
    /// What `PATCH /jobs/{job}` takes as `movementrate`.
    pub fn bytes_per_second(self) -> Option<u64> {
        match self {
            CopyRate::Default => None,
            CopyRate::PerSecond(n) => Some(n),
        }
    }
}

/// `default`, or a rate per second as the service reads one: "64 MiB",
/// "64MiB", a number of bytes, "0" (unthrottled).
pub fn parse_copy_rate(text: &str) -> std::result::Result<CopyRate, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("default") {
        return Ok(CopyRate::Default);
    }
    text.parse::<bytesize::ByteSize>()
        .map(|rate| CopyRate::PerSecond(rate.as_u64()))
        .map_err(|_| {
            format!(
                "'{text}' is not a rate: give bytes per second, e.g. \"64 MiB\" or 67108864, 0 \
                 (unthrottled) or default (the service's movement_rate)"
            )
        })
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
            JobCommand::Cancel { id, no_wait } => cancel(ctx, id, !no_wait).await,
            JobCommand::Pause { id } => {
                ctx.show(
                    Print::One,
                    |api| async move { api.pause_job(id, true).await },
                )
                .await
            }
            JobCommand::Resume { id } => {
                ctx.show(
                    Print::One,
                    |api| async move { api.pause_job(id, false).await },
                )
                .await
            }
            JobCommand::Rate { id, rate } => {
                let rate = rate.bytes_per_second();
                ctx.show(
                    Print::One,
                    |api| async move { api.set_job_rate(id, rate).await },
                )
                .await
            }
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

/// `DELETE /jobs/{job}`: a live job is asked to cancel and, with `wait`,
/// followed until it ends, then printed; 0 once it ends Cancelled, an error
/// if it finished (Done) first. An ended job's record is removed: the
/// server's message.
async fn cancel(ctx: &Context, id: &str, wait: bool) -> Result<()> {
    let mut s = ctx.session().await?;
    let answer = s.hint(s.api.delete_job(id).await)?;
    if !wait {
        ctx.message(&answer);
        return Ok(());
    }
    // The job had ended and its record is gone: nothing to follow.
    match s.api.get_job::<serde_json::Value>(id).await {
        Err(ClientError::Api { status: 404, .. }) => {
            ctx.message(&answer);
            return Ok(());
        }
        other => {
            s.hint(other)?;
        }
    }
    let job = ctx.follow_cancel(&mut s, id).await?;
    ctx.one(&job);
    if job_view(&job, id)?.state == "Done" {
        return Err(ClientError::NotCancelled { id: id.to_string() });
    }
    Ok(())
}
