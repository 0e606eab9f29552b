//! The TCP congestion control a listening socket hands to the connections
//! it accepts.
//!
//! Why a server picks one: on a kernel whose default is BBR without the `fq`
//! qdisc, TCP paces each reply itself. A 1 MiB read reply written at once
//! then leaves partly from the pacing timer on the server's CPU and partly
//! from ACK processing on the client's CPU; over loopback the two halves
//! arrive out of order, RACK takes the reordering for loss, the spurious
//! retransmissions lower BBR's bandwidth estimate and the pacing slows
//! further (measured in docs/benchmarks.md). A loss-based algorithm (cubic,
//! reno) does not pace and has none of it.

use std::fmt;
use std::io;

use tokio::net::TcpListener;

/// The longest name the kernel accepts (`TCP_CA_NAME_MAX` is 16 with its NUL).
const MAX_NAME: usize = 15;

/// A congestion control algorithm's name, as `setsockopt(TCP_CONGESTION)`
/// takes it (e.g. `cubic`): 1 to 15 lowercase letters, digits or `_`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TcpCongestion {
    name: [u8; MAX_NAME],
    len: u8,
}

impl TcpCongestion {
    /// Checks `name`'s form (whether this kernel has the algorithm is only
    /// known when a socket asks for it).
    pub fn new(name: &str) -> Result<TcpCongestion, String> {
        let bytes = name.as_bytes();
        let valid = !bytes.is_empty()
            && bytes.len() <= MAX_NAME
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        if !valid {
            return Err(format!(
                "{name:?} is not a TCP congestion control name (1 to {MAX_NAME} lowercase \
                 letters, digits or '_', e.g. \"cubic\")"
            ));
        }
        let mut stored = [0u8; MAX_NAME];
        stored[..bytes.len()].copy_from_slice(bytes);
        Ok(TcpCongestion {
            name: stored,
            // At most MAX_NAME (15), checked above.
            len: bytes.len() as u8,
        })
    }

    pub fn as_str(&self) -> &str {
        // Built from a &str's ASCII bytes.
        std::str::from_utf8(&self.name[..self.len as usize]).unwrap_or("")
    }

    /// Sets it on `listener`: the connections it accepts from now on inherit
    /// it (the kernel copies a listener's explicitly chosen algorithm to its
    /// children).
    pub fn apply(&self, listener: &TcpListener) -> io::Result<()> {
        socket2::SockRef::from(listener).set_tcp_congestion(self.as_str().as_bytes())
    }
}

impl fmt::Debug for TcpCongestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for TcpCongestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_are_accepted_and_kept() {
        for name in ["cubic", "reno", "bbr", "dctcp", "htcp_2", "a23456789012345"] {
            assert_eq!(
                TcpCongestion::new(name).map(|c| c.to_string()),
                Ok(name.to_string())
            );
        }
    }

    #[test]
    fn names_the_kernel_cannot_take_are_refused() {
        for name in [
            "",
            "Cubic",
            "cu bic",
            "cubic\0",
            "a234567890123456",
            "bbr/2",
        ] {
            let error = TcpCongestion::new(name).expect_err(name);
            assert!(
                error.contains("is not a TCP congestion control name"),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn accepted_connections_inherit_the_listener_s_algorithm() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        // reno is built into every Linux kernel and allowed to everyone.
        let reno = TcpCongestion::new("reno").expect("name");
        reno.apply(&listener).expect("set reno");
        let address = listener.local_addr().expect("address");
        let client = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        let (accepted, _) = listener.accept().await.expect("accept");
        let chosen = socket2::SockRef::from(&accepted)
            .tcp_congestion()
            .expect("read back");
        assert_eq!(chosen.split(|b| *b == 0).next(), Some(&b"reno"[..]));
        drop(client);
    }

    #[tokio::test]
    async fn an_algorithm_the_kernel_lacks_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let missing = TcpCongestion::new("no_such_cc").expect("name");
        assert!(missing.apply(&listener).is_err());
    }
}
