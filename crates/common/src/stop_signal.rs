//! The one way every svs process (serve, storage node, agent, CSI) learns
//! it is asked to stop: SIGTERM (systemd, Kubernetes) or SIGINT (Ctrl+C).

use std::future::Future;

/// Resolves at the first SIGTERM or SIGINT. The handlers are installed
/// here, before the future is awaited, so a signal that arrives between
/// the call and the first poll is not lost; an error means they could not
/// be (the caller decides whether to run on regardless).
pub fn stop_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// [`stop_signal`], or never when the handlers cannot be installed: a
/// service then runs until it is killed.
pub async fn stop_signal_or_never() {
    match stop_signal() {
        Ok(stop) => stop.await,
        Err(e) => {
            tracing::warn!(error = %e, "no stop signal handlers: runs until killed");
            std::future::pending::<()>().await;
        }
    }
}
