//! Small requests run inline on the connection's task only for devices
//! that say they complete at once (`BlockDevice::runs_inline`); a device
//! whose writes wait (on the network) gets its requests overlapped.

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::*;
use svs_nbd::protocol::*;
use svs_nbd::{BlockDevice, NbdConfig};
use tokio::io::AsyncWriteExt;

/// Writes that each wait until `WRITERS` writes are in the device at once
/// (or fail after a while): only requests that overlap succeed.
struct Rendezvous {
    inline: bool,
    /// Writes inside now, and whether `WRITERS` of them ever were at once.
    inside: Mutex<(usize, bool)>,
    met: Condvar,
}

const WRITERS: usize = 4;

impl BlockDevice for Rendezvous {
    fn size(&self) -> u64 {
        1 << 20
    }

    fn read_only(&self) -> bool {
        false
    }

    fn read(&self, _offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        buf.fill(0);
        Ok(())
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> std::io::Result<()> {
        let mut state = self.inside.lock().expect("lock");
        state.0 += 1;
        if state.0 == WRITERS {
            state.1 = true;
            self.met.notify_all();
        }
        let (mut state, waited) = self
            .met
            .wait_timeout_while(state, Duration::from_millis(500), |s| !s.1)
            .expect("lock");
        state.0 -= 1;
        if waited.timed_out() {
            return Err(std::io::Error::other("the writes did not overlap"));
        }
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn trim(&self, _offset: u64, _len: u64) -> std::io::Result<()> {
        Ok(())
    }

    fn write_zeroes(&self, _offset: u64, _len: u64, _fua: bool) -> std::io::Result<()> {
        Ok(())
    }

    fn runs_inline(&self, _write: bool) -> bool {
        self.inline
    }
}

/// Sends `WRITERS` small writes at once on one connection; their error values.
async fn pipelined_writes(inline: bool) -> Vec<u32> {
    let exports = TestExports::new();
    exports.add(
        "vol",
        Arc::new(Rendezvous {
            inline,
            inside: Mutex::new((0, false)),
            met: Condvar::new(),
        }),
    );
    let config = NbdConfig {
        inline_max: 64 * 1024,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let mut s = connect(server.addr, "vol").await;
    let mut burst = Vec::new();
    for handle in 0..WRITERS as u64 {
        burst.extend(request(CMD_WRITE, 0, handle, handle * 4096, 4096));
        burst.extend([0x5au8; 4096]);
    }
    s.write_all(&burst).await.expect("send");
    let mut errors = Vec::new();
    for _ in 0..WRITERS {
        errors.push(read_reply(&mut s).await.0);
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_a_device_that_does_not_run_inline_overlap_on_one_connection() {
    assert_eq!(pipelined_writes(false).await, vec![0; WRITERS]);
    // Inline, the same writes wait for each other: none meets the others.
    let inline = pipelined_writes(true).await;
    assert!(inline.iter().all(|&e| e != 0), "{inline:?}");
}
