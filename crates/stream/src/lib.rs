//! One connection's two directions, plain or TLS. With TLS one rustls
//! session serves both: a sender encrypts under the session lock and writes
//! the records itself (under its writer lock, so records go out in order);
//! the reading thread reads the socket without any lock and takes the
//! session's lock only to decrypt what arrived. Shared by the NBD client
//! (`svs-nbd`) and the slice protocol's client and server (`svs-sliceproto`).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::Connection;

fn lock_session(session: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // Every use is a whole rustls call: a panic elsewhere leaves it usable.
    session.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the TLS handshake on `socket` (within its timeouts).
pub fn handshake(socket: &mut TcpStream, mut session: Connection) -> io::Result<Connection> {
    while session.is_handshaking() {
        session
            .complete_io(socket)
            .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
    }
    Ok(session)
}

/// Splits a connected (and, with TLS, handshaken) socket into its sending
/// and receiving sides.
pub fn split(socket: TcpStream, session: Option<Connection>) -> io::Result<(Sender, Receiver)> {
    let read_half = socket.try_clone()?;
    Ok(match session {
        None => (Sender::Plain(socket), Receiver::Plain(read_half)),
        Some(session) => {
            let session = Arc::new(Mutex::new(session));
            (
                Sender::Tls {
                    socket,
                    session: Arc::clone(&session),
                },
                Receiver::Tls {
                    socket: read_half,
                    session,
                    raw: vec![0u8; 64 * 1024],
                    start: 0,
                    end: 0,
                },
            )
        }
    })
}

/// The sending side of a connection.
pub enum Sender {
    Plain(TcpStream),
    Tls {
        socket: TcpStream,
        session: Arc<Mutex<Connection>>,
    },
}

impl Sender {
    /// The socket it writes to (for its timeouts, or a shutdown).
    pub fn socket(&self) -> &TcpStream {
        match self {
            Sender::Plain(socket) | Sender::Tls { socket, .. } => socket,
        }
    }
}

impl Write for Sender {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sender::Plain(socket) => socket.write(buf),
            Sender::Tls { socket, session } => {
                // Encrypt under the session lock, send without it: the
                // reading thread never waits for a slow socket write.
                let (n, records) = {
                    let mut s = lock_session(session);
                    let n = s.writer().write(buf)?;
                    let mut records = Vec::with_capacity(n + 64);
                    while s.wants_write() {
                        s.write_tls(&mut records)?;
                    }
                    (n, records)
                };
                socket.write_all(&records)?;
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The receiving side of a connection (one thread's).
pub enum Receiver {
    Plain(TcpStream),
    Tls {
        socket: TcpStream,
        session: Arc<Mutex<Connection>>,
        /// Bytes read from the socket and not yet given to the session.
        raw: Vec<u8>,
        start: usize,
        end: usize,
    },
}

impl Read for Receiver {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Receiver::Plain(socket) => socket.read(buf),
            Receiver::Tls {
                socket,
                session,
                raw,
                start,
                end,
            } => loop {
                {
                    let mut s = lock_session(session);
                    match s.reader().read(buf) {
                        // 0: the peer closed the TLS session.
                        Ok(n) => return Ok(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                    // Given a piece at a time, between reads of the
                    // plaintext, so its buffer never overflows. What the
                    // session wants to send back (a key update) goes out
                    // with the sender's next records.
                    if *start < *end {
                        let mut input = &raw[*start..*end];
                        let taken = s.read_tls(&mut input)?;
                        *start += taken;
                        s.process_new_packets()
                            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        continue;
                    }
                }
                let n = socket.read(raw)?;
                if n == 0 {
                    return Ok(0);
                }
                *start = 0;
                *end = n;
            },
        }
    }
}
