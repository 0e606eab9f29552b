//! Test helpers: devices, an `Exports` map, a running server, and a raw NBD
//! client speaking the wire format by hand.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use svs_nbd::protocol::*;
use svs_nbd::{BlockDevice, CancellationToken, Exports, NbdConfig, NbdServer, OpenedExport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

// ---- Devices ---------------------------------------------------------------

/// An in-memory device that counts what it was asked to do.
pub struct MemDevice {
    pub data: Mutex<Vec<u8>>,
    pub read_only: bool,
    /// Every device call sleeps this long first (to keep requests in flight).
    pub delay: Duration,
    pub writes: AtomicU64,
    pub fua_writes: AtomicU64,
    pub flushes: AtomicU64,
    pub trims: AtomicU64,
    pub zeroes: AtomicU64,
    /// When set, every call fails with this error kind.
    pub fail_with: Mutex<Option<io::ErrorKind>>,
}

impl MemDevice {
    pub fn new(size: usize, fill: u8) -> Arc<MemDevice> {
        Self::build(size, fill, false, Duration::ZERO)
    }

    pub fn read_only(size: usize, fill: u8) -> Arc<MemDevice> {
        Self::build(size, fill, true, Duration::ZERO)
    }

    pub fn slow(size: usize, fill: u8, delay: Duration) -> Arc<MemDevice> {
        Self::build(size, fill, false, delay)
    }

    fn build(size: usize, fill: u8, read_only: bool, delay: Duration) -> Arc<MemDevice> {
        Arc::new(MemDevice {
            data: Mutex::new(vec![fill; size]),
            read_only,
            delay,
            writes: AtomicU64::new(0),
            fua_writes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            trims: AtomicU64::new(0),
            zeroes: AtomicU64::new(0),
            fail_with: Mutex::new(None),
        })
    }

    pub fn snapshot(&self) -> Vec<u8> {
        self.data.lock().unwrap().clone()
    }

    pub fn bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        self.data.lock().unwrap()[offset..offset + len].to_vec()
    }

    fn enter(&self) -> io::Result<()> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        match *self.fail_with.lock().unwrap() {
            Some(kind) => Err(io::Error::new(kind, "injected failure")),
            None => Ok(()),
        }
    }

    fn range(&self, offset: u64, len: u64) -> std::ops::Range<usize> {
        let size = self.data.lock().unwrap().len() as u64;
        // The server promises checked ranges; a broken promise fails the test.
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= size),
            "unchecked range {offset}+{len}"
        );
        offset as usize..(offset + len) as usize
    }
}

impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.data.lock().unwrap().len() as u64
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.enter()?;
        let r = self.range(offset, buf.len() as u64);
        buf.copy_from_slice(&self.data.lock().unwrap()[r]);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.enter()?;
        let r = self.range(offset, data.len() as u64);
        self.data.lock().unwrap()[r].copy_from_slice(data);
        self.writes.fetch_add(1, Ordering::SeqCst);
        if fua {
            self.fua_writes.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.enter()?;
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.enter()?;
        let r = self.range(offset, len);
        // Trimmed bytes read back as 0xdd: content after a trim is unspecified.
        self.data.lock().unwrap()[r].fill(0xdd);
        self.trims.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// One buffer serves every connection.
    fn shared_flush(&self) -> bool {
        true
    }

    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.enter()?;
        let r = self.range(offset, len);
        self.data.lock().unwrap()[r].fill(0);
        self.zeroes.fetch_add(1, Ordering::SeqCst);
        if fua {
            self.fua_writes.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[allow(unused_imports)] // not every test binary uses it
pub use svs_nbd::testing::FileDevice;

// ---- Exports ----------------------------------------------------------------

struct Entry {
    device: Arc<dyn BlockDevice>,
    closed: CancellationToken,
}

/// Exports by name; names in `forbidden` exist but no peer may open or see
/// them.
#[derive(Default)]
pub struct TestExports {
    entries: Mutex<HashMap<String, Entry>>,
    forbidden: Mutex<HashSet<String>>,
    /// When set, only these addresses are admitted.
    admitted: Mutex<Option<HashSet<std::net::IpAddr>>>,
}

impl TestExports {
    pub fn new() -> Arc<TestExports> {
        Arc::new(TestExports::default())
    }

    /// Adds an export; its `closed` token is returned.
    pub fn add(&self, name: &str, device: Arc<dyn BlockDevice>) -> CancellationToken {
        let closed = CancellationToken::new();
        self.entries.lock().unwrap().insert(
            name.to_owned(),
            Entry {
                device,
                closed: closed.clone(),
            },
        );
        closed
    }

    pub fn forbid(&self, name: &str) {
        self.forbidden.lock().unwrap().insert(name.to_owned());
    }

    /// From now on only these addresses are admitted.
    pub fn admit_only(&self, addresses: &[&str]) {
        let set = addresses.iter().map(|a| a.parse().unwrap()).collect();
        *self.admitted.lock().unwrap() = Some(set);
    }
}

impl Exports for TestExports {
    fn open(&self, name: &str, _peer: SocketAddr) -> Option<OpenedExport> {
        if self.forbidden.lock().unwrap().contains(name) {
            return None;
        }
        let entries = self.entries.lock().unwrap();
        let e = entries.get(name)?;
        Some(OpenedExport {
            device: Arc::clone(&e.device),
            closed: e.closed.clone(),
        })
    }

    fn admits(&self, peer: std::net::IpAddr) -> bool {
        self.admitted
            .lock()
            .unwrap()
            .as_ref()
            .is_none_or(|set| set.contains(&peer))
    }

    fn list(&self, _peer: SocketAddr) -> Vec<String> {
        let forbidden = self.forbidden.lock().unwrap();
        let mut names: Vec<String> = self
            .entries
            .lock()
            .unwrap()
            .keys()
            .filter(|n| !forbidden.contains(*n))
            .cloned()
            .collect();
        names.sort();
        names
    }
}

// ---- Server -----------------------------------------------------------------

pub struct TestServer {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub handle: Option<JoinHandle<io::Result<()>>>,
}

impl TestServer {
    pub async fn start(exports: Arc<TestExports>) -> TestServer {
        Self::start_with(exports, NbdConfig::default()).await
    }

    pub async fn start_with(exports: Arc<TestExports>, config: NbdConfig) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve_on(listener, exports, config)
    }

    /// An `NbdServer` over `exports` serving `listener` until shut down.
    fn serve_on(listener: TcpListener, exports: Arc<dyn Exports>, config: NbdConfig) -> TestServer {
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = NbdServer::new(exports, config);
        let token = shutdown.clone();
        let handle = tokio::spawn(async move { server.serve(listener, token).await });
        TestServer {
            addr,
            shutdown,
            handle: Some(handle),
        }
    }

    /// Serves `exports` on `addr`, a fixed address: a server restarted where
    /// the previous one listened. Binding is retried briefly in case the old
    /// listener's close is still settling.
    pub async fn start_at(
        addr: SocketAddr,
        exports: Arc<dyn Exports>,
        config: NbdConfig,
    ) -> TestServer {
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    eprintln!("bind {addr}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("bind {addr}: {e}"),
            }
        };
        Self::serve_on(listener, exports, config)
    }

    pub fn url(&self, export: &str) -> String {
        format!("nbd://{}/{}", self.addr, export)
    }

    /// Cancels `shutdown` and waits (bounded) for `serve` to return.
    pub async fn stop(mut self) -> io::Result<()> {
        self.shutdown.cancel();
        let handle = self.handle.take().unwrap();
        tokio::time::timeout(Duration::from_secs(20), handle)
            .await
            .expect("serve returned")
            .unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

// ---- Raw client --------------------------------------------------------------

pub const T: Duration = Duration::from_secs(10);

/// Reads exactly `n` bytes (bounded wait).
pub async fn read_n(s: &mut TcpStream, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    tokio::time::timeout(T, s.read_exact(&mut buf))
        .await
        .expect("read timed out")?;
    Ok(buf)
}

/// Whether the server closed the connection: the next read sees EOF (or a
/// reset) rather than data, within the bounded wait.
pub async fn is_closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(
        tokio::time::timeout(T, s.read(&mut b))
            .await
            .expect("no close within the wait"),
        Ok(0) | Err(_)
    )
}

/// Connects from `local` (a loopback alias such as 127.0.0.2 plays another
/// host) to `addr`.
pub async fn connect_from(local: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(local.parse().unwrap(), 0))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

/// Connects, checks the greeting and sends the client flags.
pub async fn greet(addr: SocketAddr, client_flags: u32) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let g = read_n(&mut s, 18).await.unwrap();
    assert_eq!(&g[..16], b"NBDMAGICIHAVEOPT");
    assert_eq!(
        u16::from_be_bytes([g[16], g[17]]),
        FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES
    );
    s.write_all(&client_flags.to_be_bytes()).await.unwrap();
    s
}

pub async fn send_option(s: &mut TcpStream, option: u32, data: &[u8]) {
    let mut b = Vec::new();
    b.extend_from_slice(&IHAVEOPT.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).await.unwrap();
}

#[derive(Debug)]
pub struct OptReply {
    pub option: u32,
    pub reply_type: u32,
    pub data: Vec<u8>,
}

pub async fn read_option_reply(s: &mut TcpStream) -> OptReply {
    let h = read_n(s, 20).await.unwrap();
    assert_eq!(
        u64::from_be_bytes(h[0..8].try_into().unwrap()),
        OPTION_REPLY_MAGIC
    );
    let option = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let reply_type = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    assert!(len < 1 << 20, "option reply of {len} bytes");
    let data = read_n(s, len).await.unwrap();
    OptReply {
        option,
        reply_type,
        data,
    }
}

pub fn go_data(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        b.extend_from_slice(&i.to_be_bytes());
    }
    b
}

/// What `NBD_OPT_GO`/`NBD_OPT_INFO` answered.
#[derive(Debug, Default)]
pub struct GoReply {
    pub size: Option<u64>,
    pub flags: Option<u16>,
    pub block_size: Option<(u32, u32, u32)>,
    pub name: Option<String>,
    /// The final reply type (ACK or an error).
    pub end: u32,
}

pub async fn info_or_go(s: &mut TcpStream, option: u32, name: &str, infos: &[u16]) -> GoReply {
    send_option(s, option, &go_data(name, infos)).await;
    let mut out = GoReply::default();
    loop {
        let r = read_option_reply(s).await;
        assert_eq!(r.option, option);
        if r.reply_type != REP_INFO {
            out.end = r.reply_type;
            return out;
        }
        let kind = u16::from_be_bytes([r.data[0], r.data[1]]);
        match kind {
            INFO_EXPORT => {
                assert_eq!(r.data.len(), 12);
                out.size = Some(u64::from_be_bytes(r.data[2..10].try_into().unwrap()));
                out.flags = Some(u16::from_be_bytes([r.data[10], r.data[11]]));
            }
            INFO_BLOCK_SIZE => {
                assert_eq!(r.data.len(), 14);
                let v = |i: usize| u32::from_be_bytes(r.data[i..i + 4].try_into().unwrap());
                out.block_size = Some((v(2), v(6), v(10)));
            }
            INFO_NAME => out.name = Some(String::from_utf8(r.data[2..].to_vec()).unwrap()),
            _ => {}
        }
    }
}

/// A client in transmission with `name` (via NBD_OPT_GO).
pub async fn connect(addr: SocketAddr, name: &str) -> TcpStream {
    let mut s = greet(addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let r = info_or_go(&mut s, OPT_GO, name, &[INFO_BLOCK_SIZE]).await;
    assert_eq!(r.end, REP_ACK, "GO {name}");
    s
}

pub fn request(command: u16, flags: u16, handle: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(28);
    b.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&command.to_be_bytes());
    b.extend_from_slice(&handle.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&length.to_be_bytes());
    b
}

/// Reads a simple reply header: (error, handle).
pub async fn read_reply(s: &mut TcpStream) -> (u32, u64) {
    let h = read_n(s, 16).await.unwrap();
    assert_eq!(
        u32::from_be_bytes(h[0..4].try_into().unwrap()),
        SIMPLE_REPLY_MAGIC
    );
    (
        u32::from_be_bytes(h[4..8].try_into().unwrap()),
        u64::from_be_bytes(h[8..16].try_into().unwrap()),
    )
}

/// One request, one reply: returns the error value (and checks the handle).
pub async fn roundtrip(
    s: &mut TcpStream,
    command: u16,
    flags: u16,
    offset: u64,
    length: u32,
    payload: &[u8],
) -> u32 {
    let mut b = request(command, flags, 77, offset, length);
    b.extend_from_slice(payload);
    s.write_all(&b).await.unwrap();
    let (error, handle) = read_reply(s).await;
    assert_eq!(handle, 77);
    error
}

pub async fn nbd_write(s: &mut TcpStream, offset: u64, data: &[u8]) -> u32 {
    roundtrip(s, CMD_WRITE, 0, offset, data.len() as u32, data).await
}

/// Reads `len` bytes; `Err(error)` when the server answered an error.
pub async fn nbd_read(s: &mut TcpStream, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
    s.write_all(&request(CMD_READ, 0, 78, offset, len))
        .await
        .unwrap();
    let (error, handle) = read_reply(s).await;
    assert_eq!(handle, 78);
    if error != 0 {
        return Err(error);
    }
    Ok(read_n(s, len as usize).await.unwrap())
}

/// Sends `NBD_CMD_DISC` and waits for the server to close.
pub async fn disconnect(mut s: TcpStream) {
    s.write_all(&request(CMD_DISC, 0, 0, 0, 0)).await.unwrap();
    assert!(is_closed(&mut s).await);
}

/// A well-behaved client: GO, write, read back, disconnect.
pub async fn assert_normal_client_works(addr: SocketAddr, export: &str) {
    let mut s = connect(addr, export).await;
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(nbd_write(&mut s, 8192, &data).await, 0);
    assert_eq!(nbd_read(&mut s, 8192, 4096).await.unwrap(), data);
    disconnect(s).await;
}

// ---- qemu ----------------------------------------------------------------------

pub fn require_qemu() {
    for tool in ["qemu-io", "qemu-img", "qemu-nbd"] {
        let found = std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} not found: install Debian's qemu-utils (apt-get install qemu-utils)"
        );
    }
}

pub struct Run {
    pub ok: bool,
    pub out: String,
}

/// Runs a qemu tool (bounded in time) and returns its status and its stdout
/// and stderr together.
pub async fn run(program: &str, args: &[&str]) -> Run {
    let child = tokio::process::Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} timed out"))
        .unwrap();
    let mut out = String::from_utf8_lossy(&output.stdout).into_owned();
    out.push_str(&String::from_utf8_lossy(&output.stderr));
    Run {
        ok: output.status.success(),
        out,
    }
}

/// `qemu-io -f raw URL -c CMD...`
pub async fn qemu_io(url: &str, extra: &[&str], commands: &[&str]) -> Run {
    let mut args: Vec<&str> = vec!["-f", "raw"];
    args.extend_from_slice(extra);
    args.push(url);
    for c in commands {
        args.push("-c");
        args.push(c);
    }
    run("qemu-io", &args).await
}
