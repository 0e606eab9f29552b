//! What every client command shares: the stored session it signs in
//! with, how it prints, and the two shapes most commands take (one call
//! whose answer is printed; one call that starts a job, then followed).

use super::api::{Api, Session};
use super::credentials::CredentialsStore;
use super::error::{ClientError, Result};
use super::output::{self, Column, OutputFormat};
use serde::Deserialize;
use serde_json::Value;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;
use svs_wire::views::{Done, JobStarted, JobView};

/// How often a followed job is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How a command prints the one answer it asked for.
#[derive(Clone, Copy)]
pub(super) enum Print {
    /// A list: the JSON as is, or a table of these columns.
    List(&'static [Column]),
    /// One object: the JSON as is, or "field  value" lines.
    One,
    /// A `{"Message", "ObjectID"}` answer: the JSON, or the message.
    Message,
}

/// What a command shows once its followed job is Done (table output).
#[derive(Debug, Clone, Copy)]
pub(super) enum Shown<'a> {
    Nothing,
    Volume(&'a str),
    Snapshot { volume: &'a str, name: &'a str },
}

/// What every command needs: where the sessions are, which one, and how
/// to print.
#[derive(Debug)]
pub struct Context {
    pub store: CredentialsStore,
    pub profile: String,
    pub output: OutputFormat,
}

/// The table line of a started job: "<Message>: job <JobID>".
pub(super) fn started_line(job: &JobStarted) -> String {
    format!("{}: job {}\n", job.Message, job.JobID)
}

pub(super) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

impl Context {
    pub(super) async fn session(&self) -> Result<Session> {
        Session::open(
            CredentialsStore::at(self.store.path().to_path_buf()),
            &self.profile,
        )
        .await
    }

    /// A list: the JSON as is, or a table.
    pub(super) fn list(&self, items: &Value, columns: &[Column]) {
        match self.output {
            OutputFormat::Json => emit(&output::render_json(items)),
            OutputFormat::Table => emit(&output::render_table(items, columns)),
        }
    }

    /// One object: the JSON as is, or "field  value" lines.
    pub(super) fn one(&self, item: &Value) {
        match self.output {
            OutputFormat::Json => emit(&output::render_json(item)),
            OutputFormat::Table => emit(&output::render_object(item)),
        }
    }

    /// A started job the command does not follow: the answer's JSON, or
    /// its line.
    pub(super) fn started(&self, job: &JobStarted) {
        match self.output {
            OutputFormat::Json => emit(&output::render_view(job)),
            OutputFormat::Table => emit(&started_line(job)),
        }
    }

    /// A `{"Message", "ObjectID"}` answer.
    pub(super) fn message(&self, answer: &Done) {
        match self.output {
            OutputFormat::Json => emit(&output::render_view(answer)),
            OutputFormat::Table => emit(&format!("{}\n", answer.Message)),
        }
    }

    /// The command's boilerplate: sign in from the profile, make one
    /// call (on a copy of the session's client), print its answer.
    pub(super) async fn show<F, Fut>(&self, print: Print, call: F) -> Result<()>
    where
        F: FnOnce(Api) -> Fut,
        Fut: Future<Output = Result<Value>>,
    {
        let s = self.session().await?;
        let answer = s.hint(call(s.api.clone()).await)?;
        match print {
            Print::List(columns) => self.list(&answer, columns),
            Print::One => self.one(&answer),
            Print::Message => self.message(&s.api.read_answer(answer)?),
        }
        Ok(())
    }

    /// A command that starts a job: sign in, make the call, print the
    /// started job and with `wait` follow it (see `after_job_start`).
    pub(super) async fn start_job<F, Fut>(&self, wait: bool, show: Shown<'_>, call: F) -> Result<()>
    where
        F: FnOnce(Api) -> Fut,
        Fut: Future<Output = Result<Value>>,
    {
        let mut s = self.session().await?;
        let answer = s.hint(call(s.api.clone()).await)?;
        let job = s.api.read_answer(answer)?;
        self.after_job_start(&mut s, &job, wait, show).await
    }

    /// Prints the started job, and with `wait` follows it; what ends Done
    /// is shown (`show`) in a table.
    pub(super) async fn after_job_start(
        &self,
        s: &mut Session,
        answer: &JobStarted,
        wait: bool,
        show: Shown<'_>,
    ) -> Result<()> {
        if !wait {
            self.started(answer);
            return Ok(());
        }
        if self.output == OutputFormat::Table {
            emit(&started_line(answer));
        }
        let job = self.follow(s, &answer.JobID).await?;
        match (self.output, show) {
            (OutputFormat::Json, _) => emit(&output::render_json(&job)),
            (OutputFormat::Table, Shown::Volume(volume)) => {
                let item = s.hint(s.api.get_volume(volume).await)?;
                emit(&output::render_table(
                    &Value::Array(vec![item]),
                    output::VOLUME_COLUMNS,
                ));
            }
            (OutputFormat::Table, Shown::Snapshot { volume, name }) => {
                let item = s.hint(s.api.get_snapshot(volume, name).await)?;
                emit(&output::render_table(
                    &Value::Array(vec![item]),
                    output::SNAPSHOT_COLUMNS,
                ));
            }
            (OutputFormat::Table, Shown::Nothing) => {}
        }
        Ok(())
    }

    /// Polls a job every [`POLL_INTERVAL`] until it ends, showing its
    /// progress on stderr: a bar on a terminal, else a line per change.
    /// Done → the job; Error → its details on stderr and `JobFailed`.
    pub(super) async fn follow(&self, s: &mut Session, id: &str) -> Result<Value> {
        self.follow_until_end(s, id, false).await
    }

    /// [`Context::follow`] of a job asked to cancel: one that ends
    /// cancelled (`Error` with status `Cancelled`) is an end like Done,
    /// "job N Cancelled" on stderr and the job.
    pub(super) async fn follow_cancel(&self, s: &mut Session, id: &str) -> Result<Value> {
        self.follow_until_end(s, id, true).await
    }

    async fn follow_until_end(
        &self,
        s: &mut Session,
        id: &str,
        cancelled_ends: bool,
    ) -> Result<Value> {
        let mut progress = Progress::new(id);
        loop {
            s.ensure_fresh().await?;
            // As it is, to print; read through its view.
            let job: Value = s.hint(s.api.get_job(id).await)?;
            let view = job_view(&job, id)?;
            progress.update(&view);
            match view.state.as_str() {
                "Done" => {
                    progress.finish(&format!("job {id} Done"));
                    return Ok(job);
                }
                "Error" if cancelled_ends && view.status == CANCELLED => {
                    progress.finish(&format!("job {id} {CANCELLED}"));
                    return Ok(job);
                }
                "Error" => {
                    let details = view.details;
                    // The last detail is the error itself, which ends the
                    // command's output (printed once, there).
                    let mut report = format!("job {id} ended in Error");
                    for line in details.iter().take(details.len().saturating_sub(1)) {
                        report.push_str("\n  ");
                        report.push_str(line);
                    }
                    progress.finish(&report);
                    let message = details
                        .last()
                        .cloned()
                        .filter(|m| !m.is_empty())
                        .unwrap_or(view.status);
                    return Err(ClientError::JobFailed {
                        id: id.to_string(),
                        message: with_hint(message),
                    });
                }
                _ => tokio::time::sleep(POLL_INTERVAL).await,
            }
        }
    }
}

/// A job as `GET /jobs/{job}` answered it, read through its view.
pub(super) fn job_view(job: &Value, id: &str) -> Result<JobView> {
    JobView::deserialize(job).map_err(|e| ClientError::InvalidResponse {
        url: format!("/jobs/{id}"),
        detail: e.to_string(),
    })
}

impl Session {
    /// A call's result, a 401 turned into "the session ended" (see
    /// [`Session::auth_hint`]).
    pub(super) fn hint<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| self.auth_hint(e))
    }
}

/// The seed's in-place failure names no way out; the CLI's flag is it.
fn with_hint(message: String) -> String {
    if message.contains(IN_PLACE_FAILURE) {
        format!(
            "{message}\nhint: run the resize again with --allow-data-movement to let svs move \
             slices to media with room (the volume stays online)"
        )
    } else {
        message
    }
}

/// The status of a job that ended in `Error` because it was cancelled.
const CANCELLED: &str = "Cancelled";

/// The seed's message of a resize that needs data movement.
const IN_PLACE_FAILURE: &str = "Could not find an in-place modification plan";

/// Progress of a followed job on stderr.
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines { id: String, last: String },
}

impl Progress {
    fn new(id: &str) -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(100);
            let style = indicatif::ProgressStyle::with_template(
                "{spinner} job {prefix} [{bar:40}] {pos:>3}% {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(id.to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            Progress::Bar(bar)
        } else {
            Progress::Lines {
                id: id.to_string(),
                last: String::new(),
            }
        }
    }

    fn update(&mut self, job: &JobView) {
        let state = &job.state;
        let mut status = job.status.clone();
        if status == *state {
            status.clear();
        }
        let pct = u64::from(job.progress).min(100);
        match self {
            Progress::Bar(bar) => {
                bar.set_position(pct);
                bar.set_message(format!("{state} {status}").trim().to_string());
            }
            Progress::Lines { id, last } => {
                let line = format!("job {id}: {state} {pct}% {status}")
                    .trim_end()
                    .to_string();
                if *last != line {
                    eprintln!("{line}");
                    *last = line;
                }
            }
        }
    }

    fn finish(self, message: &str) {
        match self {
            Progress::Bar(bar) => {
                bar.finish_and_clear();
                eprintln!("{message}");
            }
            Progress::Lines { .. } => eprintln!("{message}"),
        }
    }
}
