//! Small requests run inline on the connection's task only for devices
//! that say they complete at once (`BlockDevice::runs_inline`); a device
//! whose writes wait (on the network) gets its requests overlapped.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
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

const BLOCK: usize = 128 * 1024;

/// Every other 128 KiB block is "in memory": `read_cached` answers it;
/// for the others it writes a few wrong bytes and says false, and only
/// `read` has them, slowly (as from a disk), so they stay in flight.
struct HalfCached {
    data: Vec<u8>,
    cached: AtomicUsize,
    read: AtomicUsize,
}

impl BlockDevice for HalfCached {
    fn size(&self) -> u64 {
        self.data.len() as u64
    }

    fn read_only(&self) -> bool {
        true
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.read.fetch_add(1, Ordering::SeqCst);
        let at = offset as usize;
        if (at / BLOCK) % 2 == 1 {
            std::thread::sleep(Duration::from_secs(1));
        }
        buf.copy_from_slice(&self.data[at..at + buf.len()]);
        Ok(())
    }

    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<bool> {
        let at = offset as usize;
        if (at / BLOCK) % 2 == 1 {
            buf[..16].fill(0xff);
            return Ok(false);
        }
        self.cached.fetch_add(1, Ordering::SeqCst);
        buf.copy_from_slice(&self.data[at..at + buf.len()]);
        Ok(true)
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> std::io::Result<()> {
        Err(std::io::Error::from_raw_os_error(1))
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_in_memory_are_answered_at_once_and_the_others_read_where_they_may_wait() {
    let data: Vec<u8> = (0..8 * BLOCK).map(|i| (i / 4096 % 251) as u8).collect();
    let device = Arc::new(HalfCached {
        data: data.clone(),
        cached: AtomicUsize::new(0),
        read: AtomicUsize::new(0),
    });
    let exports = TestExports::new();
    exports.add("vol", Arc::clone(&device) as Arc<dyn BlockDevice>);
    let config = NbdConfig {
        inline_max: 64 * 1024,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let mut s = connect(server.addr, "vol").await;
    // Eight 128 KiB reads at once (over inline_max, several in flight).
    let mut burst = Vec::new();
    for block in 0..8u64 {
        burst.extend(request(
            CMD_READ,
            0,
            block,
            block * BLOCK as u64,
            BLOCK as u32,
        ));
    }
    s.write_all(&burst).await.expect("send");
    for _ in 0..8 {
        let (error, handle) = read_reply(&mut s).await;
        assert_eq!(error, 0);
        let got = read_n(&mut s, BLOCK).await.expect("data");
        let at = handle as usize * BLOCK;
        assert!(got == data[at..at + BLOCK], "block {handle}");
    }
    // The first read was alone on its connection: inline, with `read`.
    // The other even ones came while an odd one was in flight.
    assert_eq!(device.cached.load(Ordering::SeqCst), 3, "blocks 2, 4, 6");
    assert_eq!(
        device.read.load(Ordering::SeqCst),
        5,
        "block 0 and the odd ones"
    );
}
