//! What every svs process uses (`svs serve`, storage nodes, agents, CSI,
//! the CLI): it imports no role.

pub mod backoff;
pub mod clock;
pub mod logging;
pub mod metrics;
pub mod secret_files;
pub mod slice_tls;
pub mod stop_signal;
pub mod tls;
