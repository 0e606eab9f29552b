//! Log lines of every svs process: to stderr, as text (colour codes only on
//! a terminal: a journal or a file would keep them as noise) or one JSON
//! object per line, filtered by the `log` setting, without the FUSE
//! library's reports of what is expected.

use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::io::IsTerminal;
use svs_domain::svs_names;
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer, Registry};

/// The log format of this process once `init_tracing` set it up, so that
/// the error ending the process comes out in it too (`report_failure`).
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

pub fn init_tracing(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let layer: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text => fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .boxed(),
        // The event's fields (`message` among them) at the top level, where
        // collectors look for them.
        LogFormat::Json => fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .boxed(),
    };
    let installed = tracing_subscriber::registry()
        .with(layer.with_filter(filter).with_filter(ExpectedFuseReplies))
        .try_init();
    if installed.is_ok() {
        let _ = LOG_FORMAT.set(format);
    }
}

/// The error that ends the process: a log event when logs are JSON (one
/// format per stream for collectors), else a plain `svs: ...` line.
pub fn report_failure(message: &str) {
    if LOG_FORMAT.get() == Some(&LogFormat::Json) {
        tracing::error!("svs: {message}");
    } else {
        eprintln!("svs: {message}");
    }
}

/// Drops the FUSE library's error for a reply the kernel no longer waits
/// for (ENOENT: the request was interrupted, or its file unmounted, while
/// it was served). That happens in ordinary unmounts and interrupted
/// system calls; every other report of the library passes.
struct ExpectedFuseReplies;

impl<S: Subscriber> Filter<S> for ExpectedFuseReplies {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        // The library logs through `log`: its target arrives as a field.
        let mut fields = FuseReplyFields {
            from_reply: event.metadata().target() == FUSE_REPLY_TARGET,
            no_such_request: false,
        };
        event.record(&mut fields);
        !(fields.from_reply && fields.no_such_request)
    }
}

const FUSE_REPLY_TARGET: &str = "fuser::reply";

struct FuseReplyFields {
    from_reply: bool,
    no_such_request: bool,
}

impl Visit for FuseReplyFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "log.target" && value == FUSE_REPLY_TARGET {
            self.from_reply = true;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            let text = format!("{value:?}");
            self.no_such_request =
                text.starts_with("Failed to send FUSE reply") && text.contains("(os error 2)");
        }
    }
}

/// The formats of the log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LogFormat {
    /// Human-readable lines; colour codes only when stderr is a terminal.
    Text,
    /// One JSON object per line (`timestamp`, `level`, `message`, fields,
    /// `target`, spans).
    Json,
}

svs_names!(setting "log_format", LogFormat {
    Text = "text",
    Json = "json",
});

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log buffer").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[test]
    fn a_reply_to_a_request_the_kernel_dropped_is_not_logged_other_fuse_errors_are() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::registry().with(
            fmt::layer()
                .with_writer(captured.clone())
                .with_filter(ExpectedFuseReplies),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "fuser::reply", "Failed to send FUSE reply: No such file or directory (os error 2)");
            tracing::error!(target: "fuser::reply", "Failed to send FUSE reply: Bad file descriptor (os error 9)");
            tracing::error!(target: "svs::other", "Failed to send FUSE reply: No such file or directory (os error 2)");
        });
        let text =
            String::from_utf8(captured.0.lock().expect("log buffer").clone()).expect("utf-8 log");
        // Only the other target's line keeps "os error 2".
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(text.contains("svs::other"), "{text}");
        assert!(text.contains("os error 9"), "{text}");
    }
}
