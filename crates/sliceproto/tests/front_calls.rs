//! Calls to a node's fronts (`Op::FrontCall`): carried to the node's
//! `FrontControl` as they are, answered as it says; refused while the node
//! runs no fronts.

mod common;

use std::sync::{Arc, Mutex};

use common::{node, TIMEOUT};
use svs_sliceproto::{remote_error, FrontControl, Status};

/// Answers "volume:request" reversed, and fails a request saying "fail".
#[derive(Default)]
struct Echo {
    seen: Mutex<Vec<String>>,
}

impl FrontControl for Echo {
    fn call(&self, volume: &str, request: &[u8]) -> std::io::Result<Vec<u8>> {
        let request = String::from_utf8_lossy(request).to_string();
        self.seen
            .lock()
            .expect("lock")
            .push(format!("{volume}:{request}"));
        if request == "fail" {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such front",
            ));
        }
        let mut answer = format!("{volume}:{request}").into_bytes();
        answer.reverse();
        Ok(answer)
    }
}

#[test]
fn a_front_call_reaches_the_node_s_front_control_with_its_payload_and_answer() {
    let node = node();
    let remote = node.client();
    let local = node.server.in_process_client(TIMEOUT);

    let e = remote
        .front_call("vol-1", b"{}")
        .expect_err("no fronts yet");
    assert_eq!(
        remote_error(&e).map(|r| (r.status, r.message.as_str())),
        Some((
            Status::Errno(libc::EOPNOTSUPP as u16),
            "this node runs no volume fronts"
        ))
    );

    let echo = Arc::new(Echo::default());
    node.server.serve_front_calls(echo.clone());
    let big = vec![b'x'; 300 * 1024];
    let answer = remote.front_call("vol-1", &big).expect("call over TCP");
    assert_eq!(answer.len(), big.len() + "vol-1:".len());
    assert_eq!(&answer[answer.len() - 6..], b":1-lov");
    assert_eq!(
        local.front_call("vol-2", b"abc").expect("call in process"),
        b"cba:2-lov"
    );

    let e = remote.front_call("vol-3", b"fail").expect_err("refused");
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert_eq!(
        remote_error(&e).map(|r| r.message.as_str()),
        Some("no such front")
    );
    assert_eq!(echo.seen.lock().expect("lock").len(), 3);
    // The connection is still good for slice requests.
    remote.stored_slices("m1").expect("slice requests go on");
}
