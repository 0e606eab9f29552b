//! Remote slices against real slice servers on 127.0.0.1 (ephemeral
//! ports) serving in-memory slices, next to local media in a temporary
//! directory.

use super::*;
use crate::{CopyFailure, SliceCopyKind, SliceMove};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;
use svs_sliceproto::testing::{MemBackend, MemEpochs, OneCredential};
use svs_sliceproto::{ServerConfig, SliceBackend, SliceName, SliceServer};

pub(super) const CREDENTIAL: &str = "node-secret";
pub(super) const MIB: u64 = 1 << 20;
/// Short, so a stalled node is given up on quickly.
pub(super) const TIMEOUT: Duration = Duration::from_millis(400);
pub(super) const VOLUME: &str = "v1";
pub(super) const SIZE: u64 = 4 * MIB;

/// A storage node: a slice server over in-memory slices. Dropping it lets
/// a stalled backend go and stops the server.
pub(super) struct TestNode {
    pub(super) backend: Arc<MemBackend>,
    server: Option<SliceServer>,
}

/// A slice server on a new port of 127.0.0.1 serving `backend`.
fn serve(backend: &Arc<MemBackend>, credential: &str) -> SliceServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    SliceServer::start(
        listener,
        ServerConfig::default(),
        Arc::clone(backend) as Arc<dyn SliceBackend>,
        Arc::new(OneCredential(credential.into())),
        Arc::new(MemEpochs::default()),
    )
    .expect("server")
}

impl TestNode {
    /// A node that digests ranges with the data plane's function, as a
    /// real storage node does (copies verify their chunks with it).
    fn start() -> TestNode {
        let backend = Arc::new(MemBackend::new());
        backend.digest_ranges_with(crate::digest::range_digest);
        let server = serve(&backend, CREDENTIAL);
        TestNode {
            backend,
            server: Some(server),
        }
    }

    /// Stops the server and serves the same slices on a new port, with
    /// `credential`.
    fn restart(&mut self, credential: &str) {
        self.stop();
        self.server = Some(serve(&self.backend, credential));
    }

    fn endpoint(&self, node: &str) -> NodeEndpoint {
        NodeEndpoint {
            node: node.to_string(),
            address: self.server.as_ref().expect("running").local_addr(),
            credential: CREDENTIAL.into(),
            tls: None,
        }
    }

    fn stop(&mut self) {
        self.backend.set_stalled(false);
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }

    pub(super) fn bytes(&self, medium: &str, copy: u32) -> Vec<u8> {
        self.backend
            .bytes(&SliceName::new(medium, VOLUME, copy, 0))
            .expect("slice on the node")
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Local media `m0`, `m1` in a temporary directory, in a cluster data
/// plane, and what its failure listener heard.
pub(super) struct Setup {
    _dir: tempfile::TempDir,
    pub(super) media: ClusterMedia,
    pub(super) heard: Arc<Mutex<Vec<CopyFailure>>>,
}

pub(super) fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let local = LocalMedia::new(["m0", "m1"].map(|m| (m.to_string(), dir.path().join(m))));
    let media = ClusterMedia::new(local, TIMEOUT);
    for m in ["m0", "m1"] {
        media.check_medium(m).expect("local medium");
    }
    let heard = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&heard);
    media.on_copy_failure(Arc::new(
        move |f: &CopyFailure, record: &crate::LossRecord| {
            sink.lock().expect("lock").push(f.clone());
            record.recorded();
        },
    ));
    Setup {
        _dir: dir,
        media,
        heard,
    }
}

/// A node started as `node` serving medium `medium` to the setup's front.
pub(super) fn node_medium(s: &Setup, medium: &str, node: &str) -> TestNode {
    let started = TestNode::start();
    s.media
        .add_node_medium(medium, started.endpoint(node))
        .expect("node medium");
    started
}

/// A node for each medium of `media`, named node-0, node-1, ...
pub(super) fn node_media(s: &Setup, media: &[&str]) -> Vec<TestNode> {
    media
        .iter()
        .enumerate()
        .map(|(i, m)| node_medium(s, m, &format!("node-{i}")))
        .collect()
}

pub(super) fn key(copy: u32) -> SliceKey {
    SliceKey {
        volume_id: VOLUME.into(),
        copy,
        column: 0,
    }
}

/// One column, a copy on each medium of `media`, opened with `epoch`.
pub(super) fn layout(media: &[&str], epoch: u64) -> VolumeLayout {
    VolumeLayout {
        volume_id: VOLUME.into(),
        size: SIZE,
        media: media.iter().map(|m| vec![m.to_string()]).collect(),
        epoch,
    }
}

/// Creates the slices of `layout` and opens it.
pub(super) fn open(s: &Setup, layout: &VolumeLayout) -> Arc<dyn VolumeIo> {
    for (copy, row) in layout.media.iter().enumerate() {
        s.media
            .create_slice(&row[0], &key(copy as u32), SIZE)
            .expect("slice");
    }
    s.media.open_volume(layout).expect("open")
}

pub(super) fn local_bytes(s: &Setup, medium: &str, copy: u32) -> Vec<u8> {
    let path = s
        .media
        .local()
        .slice_path(medium, &key(copy))
        .expect("path");
    std::fs::read(path).expect("slice file")
}

/// `len` bytes of a pattern given by `seed`.
pub(super) fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i / 4096) as u8).wrapping_mul(31) | 1)
        .collect()
}

/// Writes `data` at `offset` to the volume and to `model`.
pub(super) fn write(io: &dyn VolumeIo, model: &mut [u8], offset: u64, data: &[u8]) {
    io.write(offset, data, false).expect("write");
    model[offset as usize..offset as usize + data.len()].copy_from_slice(data);
}

pub(super) fn read_all(io: &dyn VolumeIo) -> Vec<u8> {
    let mut buf = vec![0u8; SIZE as usize];
    io.read(0, &mut buf).expect("read");
    buf
}

#[test]
fn slice_management_is_routed_to_the_node_or_the_local_medium() {
    let s = setup();
    let node = TestNode::start();
    assert!(s
        .media
        .add_node_medium("n0", node.endpoint("node-a"))
        .expect("node medium"));
    assert!(!s
        .media
        .add_node_medium("n0", node.endpoint("node-a"))
        .expect("again"));
    assert_eq!(s.media.node_of("n0").as_deref(), Some("node-a"));
    assert_eq!(s.media.node_of("m0"), None);

    s.media.create_slice("n0", &key(0), MIB).expect("remote");
    s.media.create_slice("m0", &key(1), MIB).expect("local");
    assert_eq!(node.bytes("n0", 0).len() as u64, MIB);
    assert_eq!(local_bytes(&s, "m0", 1).len() as u64, MIB);
    assert!(node
        .backend
        .bytes(&SliceName::new("n0", VOLUME, 1, 0))
        .is_none());

    s.media.grow_slice("n0", &key(0), 2 * MIB).expect("grow");
    assert_eq!(node.bytes("n0", 0).len() as u64, 2 * MIB);
    let stored = s.media.stored_slices("n0").expect("listed");
    assert_eq!(
        stored,
        [StoredSlice {
            key: key(0),
            partial: false
        }]
    );
    assert_eq!(
        s.media.stored_slices("m0").expect("listed"),
        [StoredSlice {
            key: key(1),
            partial: false
        }]
    );
    assert_eq!(s.media.medium_written_bytes("n0").expect("measured"), 0);
    s.media.probe_slice("n0", &key(0), &[]).expect("present");

    s.media.delete_slice("n0", &key(0)).expect("delete");
    assert!(node
        .backend
        .bytes(&SliceName::new("n0", VOLUME, 0, 0))
        .is_none());
    assert_eq!(s.media.stored_slices("n0").expect("listed"), []);
    assert!(local_bytes(&s, "m0", 1).len() as u64 == MIB);

    // A missing slice on a node that answers is that copy lost alone.
    let e = s.media.probe_slice("n0", &key(0), &[]).expect_err("gone");
    assert!(
        e.to_string()
            .starts_with("slice v1/c0-k0 on medium 'n0': probe:"),
        "{e}"
    );
    assert_eq!(s.media.failed_copies(), [("n0".to_string(), key(0))]);
    assert_eq!(s.media.failed_media(), Vec::<String>::new());

    // Names are one medium each.
    let e = s
        .media
        .add_node_medium("m0", node.endpoint("node-a"))
        .expect_err("local name");
    assert!(matches!(e, DataPlaneError::MediumExists { .. }), "{e}");
    let e = s
        .media
        .add_node_medium("n0", node.endpoint("node-b"))
        .expect_err("other node");
    assert_eq!(
        e.to_string(),
        "medium 'n0' is already served by storage node 'node-a'"
    );
    let e = s
        .media
        .add_medium("n0", Path::new("/nonexistent"))
        .expect_err("node name");
    assert_eq!(
        e.to_string(),
        "medium 'n0' is already served by storage node 'node-a'"
    );
    let e = s
        .media
        .update_node(node.endpoint("node-z"))
        .expect_err("unknown node");
    assert_eq!(e.to_string(), "unknown storage node 'node-z'");

    // Removing the medium deletes what is left on it, then forgets it.
    s.media.create_slice("n0", &key(2), MIB).expect("remote");
    s.media.remove_medium("n0").expect("removed");
    assert_eq!(s.media.node_of("n0"), None);
    assert!(node
        .backend
        .bytes(&SliceName::new("n0", VOLUME, 2, 0))
        .is_none());
}

#[test]
fn slice_data_bytes_is_counted_by_the_node_or_on_the_local_medium() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    s.media.create_slice("n0", &key(0), SIZE).expect("remote");
    s.media.create_slice("m0", &key(1), SIZE).expect("local");
    assert_eq!(s.media.slice_data_bytes("n0", &key(0)).expect("n0"), 0);
    node.backend
        .write(&SliceName::new("n0", VOLUME, 0, 0), MIB, &pattern(3, 8192))
        .expect("write on the node");
    assert_eq!(s.media.slice_data_bytes("n0", &key(0)).expect("n0"), 8192);
    assert_eq!(s.media.slice_data_bytes("m0", &key(1)).expect("m0"), 0);

    let e = s
        .media
        .slice_data_bytes("n0", &key(2))
        .expect_err("no such slice");
    assert!(
        matches!(&e, DataPlaneError::Io { op: "measure", source, .. } if is_missing(source)),
        "{e}"
    );
}

#[test]
fn a_node_medium_that_cannot_be_reached_or_refuses_the_credential_is_not_added() {
    let s = setup();
    let mut node = TestNode::start();
    let mut wrong = node.endpoint("node-a");
    wrong.credential = "not-it".into();
    let e = s.media.add_node_medium("n0", wrong).expect_err("refused");
    assert!(
        e.to_string().starts_with("medium 'n0' on storage node 'node-a': list slices: storage node: unknown or revoked node credential"),
        "{e}"
    );
    assert_eq!(s.media.node_of("n0"), None);

    let endpoint = node.endpoint("node-a");
    node.stop();
    let e = s.media.add_node_medium("n0", endpoint).expect_err("down");
    assert!(
        e.to_string()
            .starts_with("medium 'n0' on storage node 'node-a': list slices:"),
        "{e}"
    );
    assert_eq!(s.media.node_of("n0"), None);
}

#[test]
fn a_mirrored_volume_writes_both_the_local_and_the_remote_copy() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0", "n0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(1, 64 << 10));
    write(io.as_ref(), &mut model, 3 * MIB - 4096, &pattern(2, 8192));
    io.discard(4096, 4096, false).expect("discard");
    model[4096..8192].fill(0);
    io.flush().expect("flush");
    assert_eq!(local_bytes(&s, "m0", 0), model);
    assert_eq!(node.bytes("n0", 1), model);
    assert_eq!(read_all(io.as_ref()), model);
    assert_eq!(io.lost_slices(), []);
    assert!(!io.is_fenced());

    // Reads come from the remote copy when the local one is lost.
    io.fail_medium("m0");
    assert_eq!(read_all(io.as_ref()), model);
    // Snapshots go to the node too (fenced ops with the epoch).
    let io = {
        drop(io);
        s.media
            .open_volume(&layout(&["m0", "n0"], 1))
            .expect("open")
    };
    io.snapshot(7).expect("snapshot");
    let on_node = SliceBackend::snapshot_ids(&*node.backend, &SliceName::new("n0", VOLUME, 1, 0));
    assert_eq!(on_node.expect("ids"), [7]);
}

/// Writes every `step` until `until`, checking reads, while the node
/// `node` stops answering; returns the model and how long the loss took to
/// be heard.
fn write_through_a_failing_node(
    s: &Setup,
    io: &dyn VolumeIo,
    fail: impl FnOnce(),
) -> (Vec<u8>, Duration) {
    let mut model = vec![0u8; SIZE as usize];
    write(io, &mut model, 0, &pattern(3, 4096));
    fail();
    let started = Instant::now();
    for i in 1..8u64 {
        write(io, &mut model, i * 256 * 1024, &pattern(i as u8, 4096));
    }
    let heard_after = started.elapsed();
    io.flush().expect("flush");
    assert_eq!(read_all(io), model);
    assert_eq!(local_bytes(s, "m0", 0), model);
    (model, heard_after)
}

#[test]
fn a_stalled_node_loses_its_copy_within_the_request_timeout_and_io_goes_on() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0", "n0"], 1));
    let (_, took) =
        write_through_a_failing_node(&s, io.as_ref(), || node.backend.set_stalled(true));
    assert!(took < TIMEOUT * 3, "took {took:?}");
    assert!(took >= TIMEOUT, "took {took:?}");
    assert_eq!(io.lost_slices(), [(1, 0)]);
    let heard = s.heard.lock().expect("lock").clone();
    assert_eq!(
        heard,
        [CopyFailure {
            medium: "n0".into(),
            slice: key(1),
            medium_failed: true
        }]
    );
    assert_eq!(s.media.failed_media(), ["n0"]);
    node.backend.set_stalled(false);
}

#[test]
fn a_stopped_node_loses_its_copy_and_io_goes_on() {
    let s = setup();
    let mut node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0", "n0"], 1));
    let (_, took) = write_through_a_failing_node(&s, io.as_ref(), || node.stop());
    assert!(took < TIMEOUT, "took {took:?}");
    assert_eq!(io.lost_slices(), [(1, 0)]);
    assert_eq!(s.media.failed_media(), ["n0"]);
    // A volume opened now finds the node down: its copy is lost at once.
    drop(io);
    let io = s
        .media
        .open_volume(&layout(&["m0", "n0"], 2))
        .expect("open");
    assert_eq!(io.lost_slices(), [(1, 0)]);
}

#[test]
fn a_newer_front_fences_the_older_one_without_losing_a_copy() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let old = open(&s, &layout(&["m0", "n0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(old.as_ref(), &mut model, 0, &pattern(1, 4096));
    let new = s
        .media
        .open_volume(&layout(&["m0", "n0"], 2))
        .expect("open");
    write(new.as_ref(), &mut model, MIB, &pattern(2, 4096));
    let changes = node.backend.changes.load(Ordering::SeqCst);
    let remote_before = node.bytes("n0", 1);

    let e = old
        .write(2 * MIB, &pattern(9, 4096), false)
        .expect_err("fenced");
    assert!(crate::is_front_fenced(&e), "{e}");
    assert_eq!(
        e.to_string(),
        "volume v1: this front end (epoch 1) was fenced by a newer one and may not write"
    );
    assert!(old.is_fenced());
    assert!(!new.is_fenced());
    for later in [
        old.write(3 * MIB, &pattern(9, 4096), true),
        old.discard(0, 4096, false),
        old.flush(),
        old.snapshot(1),
    ] {
        let e = later.expect_err("still fenced");
        assert!(crate::is_front_fenced(&e), "{e}");
    }
    // Nothing the old front sent changed the node, and no copy is lost.
    assert_eq!(node.backend.changes.load(Ordering::SeqCst), changes);
    assert_eq!(node.bytes("n0", 1), remote_before);
    assert_eq!(old.lost_slices(), []);
    assert_eq!(s.heard.lock().expect("lock").len(), 0);
    assert_eq!(s.media.failed_media(), Vec::<String>::new());
    // The new front goes on.
    write(new.as_ref(), &mut model, 2 * MIB, &pattern(3, 4096));
    new.flush().expect("flush");
    assert_eq!(node.bytes("n0", 1), model);
}

/// Moves (or rebuilds) slice `copy` to `to` in phases, writing through the
/// volume while the (throttled) fill runs.
fn copy_while_writing(
    io: &Arc<dyn VolumeIo>,
    kind: SliceCopyKind,
    copy: u32,
    to: &str,
    model: &mut Vec<u8>,
) {
    let mut copying = Arc::clone(io)
        .begin_slice_copy(kind, copy, 0, to, 0)
        .expect("begin");
    assert_eq!(copying.starts_at(), 0);
    let options = CopyOptions {
        rate_limit: Some(16 * MIB),
        ..CopyOptions::default()
    };
    let writer_io = Arc::clone(io);
    let mut writer_model = model.clone();
    let writer = std::thread::spawn(move || {
        for i in 0..24u64 {
            // Behind and ahead of the copy's cursor.
            let offset = (i * 680 * 1024) % (SIZE - 8192) / 4096 * 4096;
            write(
                writer_io.as_ref(),
                &mut writer_model,
                offset,
                &pattern(40 + i as u8, 8192),
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        writer_model
    });
    copying.fill(&options, &mut |_, _| {}).expect("fill");
    *model = writer.join().expect("writer");
    copying.switch().expect("switch");
    // The switched slice and (for a move) its old place take writes.
    write(io.as_ref(), model, SIZE - 4096, &pattern(99, 4096));
    copying.finish().expect("finish");
    io.flush().expect("flush");
}

#[test]
fn a_slice_moves_live_from_a_local_medium_to_a_node_and_back() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    for i in 0..4u64 {
        write(
            io.as_ref(),
            &mut model,
            i * MIB,
            &pattern(i as u8, 256 << 10),
        );
    }

    copy_while_writing(&io, SliceCopyKind::Move, 0, "n0", &mut model);
    assert_eq!(node.bytes("n0", 0), model);
    assert_eq!(read_all(io.as_ref()), model);
    s.media.delete_slice("m0", &key(0)).expect("old place");
    write(io.as_ref(), &mut model, 4096, &pattern(7, 4096));
    assert_eq!(node.bytes("n0", 0), model);

    copy_while_writing(&io, SliceCopyKind::Move, 0, "m1", &mut model);
    assert_eq!(local_bytes(&s, "m1", 0), model);
    assert_eq!(read_all(io.as_ref()), model);
    // The old place on the node is the caller's to delete.
    assert_eq!(node.bytes("n0", 0).len() as u64, SIZE);
    assert_eq!(io.lost_slices(), []);
}

#[test]
fn a_copy_lost_with_its_node_is_rebuilt_on_another_node() {
    let s = setup();
    let (a, b) = (TestNode::start(), TestNode::start());
    s.media
        .add_node_medium("na", a.endpoint("node-a"))
        .expect("a");
    s.media
        .add_node_medium("nb", b.endpoint("node-b"))
        .expect("b");
    let io = open(&s, &layout(&["m0", "na"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(5, 512 << 10));
    a.backend.set_stalled(true);
    write(io.as_ref(), &mut model, 2 * MIB, &pattern(6, 4096));
    assert_eq!(io.lost_slices(), [(1, 0)]);

    copy_while_writing(&io, SliceCopyKind::Rebuild, 1, "nb", &mut model);
    assert_eq!(io.lost_slices(), []);
    assert_eq!(b.bytes("nb", 1), model);
    io.fail_medium("m0");
    assert_eq!(read_all(io.as_ref()), model);
}

#[test]
fn an_abandoned_move_to_a_node_leaves_nothing_there() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(1, 4096));
    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "n0", 0)
        .expect("begin");
    copying
        .fill(&CopyOptions::default(), &mut |_, _| {})
        .expect("fill");
    assert!(node
        .backend
        .bytes(&SliceName::new("n0", VOLUME, 0, 0))
        .is_some());
    copying.abort().expect("abort");
    assert!(node
        .backend
        .bytes(&SliceName::new("n0", VOLUME, 0, 0))
        .is_none());
    write(io.as_ref(), &mut model, MIB, &pattern(2, 4096));
    assert_eq!(read_all(io.as_ref()), model);
    assert_eq!(local_bytes(&s, "m0", 0), model);
}

#[test]
fn an_offline_copy_of_a_slice_with_snapshots_to_a_node_is_refused() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0"], 1));
    io.write(0, &pattern(1, 4096), false).expect("write");
    io.snapshot(3).expect("snapshot");
    let e = s
        .media
        .copy_slice("m0", "n0", &key(0), &CopyOptions::default(), &mut |_, _| {})
        .expect_err("refused");
    assert!(
        matches!(e, DataPlaneError::SnapshotsCannotMove { .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "slice v1/c0-k0 ('m0' to 'n0'): an offline copy to or from a storage node cannot carry its snapshots"
    );
    io.delete_snapshot(3).expect("delete snapshot");
    assert!(node
        .backend
        .bytes(&SliceName::new("n0", VOLUME, 0, 0))
        .is_none());
}

#[test]
fn an_offline_copy_goes_to_a_node_and_back_with_equal_digests() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    {
        let io = open(&s, &layout(&["m0"], 1));
        io.write(MIB, &pattern(4, 300 << 10), true).expect("write");
    }
    let options = CopyOptions {
        epoch: 1,
        ..CopyOptions::default()
    };
    let there = s
        .media
        .copy_slice("m0", "n0", &key(0), &options, &mut |_, _| {})
        .expect("to the node");
    assert_eq!(node.bytes("n0", 0), local_bytes(&s, "m0", 0));
    let back = s
        .media
        .copy_slice("n0", "m1", &key(0), &options, &mut |_, _| {})
        .expect("back");
    assert_eq!(there, back);
    assert_eq!(local_bytes(&s, "m1", 0), local_bytes(&s, "m0", 0));
    assert_eq!(
        there,
        crate::digest_file(&s.media.local().slice_path("m0", &key(0)).expect("path"))
            .expect("digest")
    );
}

#[test]
fn a_move_to_a_node_that_stops_answering_fails_in_bounded_time_and_io_goes_on() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(1, SIZE as usize));
    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "n0", 0)
        .expect("begin");
    // The node stops answering once the fill has begun (its first report,
    // before its first chunk: the slice is one chunk to a node), whatever
    // the machine's load (a timer could miss the fill).
    let backend = Arc::clone(&node.backend);
    let started = Instant::now();
    let e = copying
        .fill(&CopyOptions::default(), &mut |_, _| {
            backend.set_stalled(true);
        })
        .expect_err("the target stopped answering");
    assert!(started.elapsed() < TIMEOUT * 4, "{:?}", started.elapsed());
    assert!(
        e.to_string()
            .starts_with("slice v1/c0-k0 on medium 'n0': write: "),
        "{e}"
    );
    // The job may try again later.
    assert!(e.is_transient(), "{e}");
    copying.abort().expect("abort");
    // The volume never depended on the target.
    let started = Instant::now();
    write(io.as_ref(), &mut model, MIB, &pattern(2, 4096));
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    io.flush().expect("flush");
    assert_eq!(read_all(io.as_ref()), model);
    assert_eq!(local_bytes(&s, "m0", 0), model);
    assert_eq!(io.lost_slices(), []);
}

#[test]
fn a_nodes_new_address_and_credential_serve_later_connections() {
    let s = setup();
    let mut node = node_medium(&s, "n0", "node-a");
    s.media.create_slice("n0", &key(0), MIB).expect("slice");
    node.restart("rotated-secret");
    let e = s
        .media
        .create_slice("n0", &key(1), MIB)
        .expect_err("the old address is gone");
    assert!(
        e.to_string()
            .starts_with("medium 'n0' on storage node 'node-a': create: "),
        "{e}"
    );
    let mut moved = node.endpoint("node-a");
    moved.credential = "rotated-secret".into();
    s.media.update_node(moved).expect("updated");
    s.media.create_slice("n0", &key(1), MIB).expect("slice");
    let stored: Vec<u32> = s
        .media
        .stored_slices("n0")
        .expect("listed")
        .iter()
        .map(|x| x.key.copy)
        .collect();
    assert_eq!(stored, [0, 1]);
}

#[test]
fn a_stale_copy_on_a_returning_node_is_resynced_in_place_rewriting_only_what_differs() {
    let s = setup();
    let a = node_medium(&s, "na", "node-a");
    let io = open(&s, &layout(&["m0", "na"], 1));
    let mut model = vec![0u8; SIZE as usize];
    // Data in each of the four 1 MiB chunks.
    for i in 0..4u64 {
        write(
            io.as_ref(),
            &mut model,
            i * MIB,
            &pattern(i as u8, 256 << 10),
        );
    }
    io.flush().expect("flush");
    a.backend.set_stalled(true);
    // Bytes chunk 3 holds already: whether or not the node applies this
    // write once it answers again, its copy is the same there.
    write(io.as_ref(), &mut model, 3 * MIB, &pattern(3, 4096));
    assert_eq!(io.lost_slices(), [(1, 0)]);
    // Made while the node's copy is lost: chunk 1 changes, chunk 2 becomes
    // a hole where the node still has data.
    write(io.as_ref(), &mut model, MIB + 8192, &pattern(9, 4096));
    io.discard(2 * MIB, 256 << 10, false).expect("discard");
    model[2 * MIB as usize..(2 * MIB + (256 << 10)) as usize].fill(0);
    a.backend.set_stalled(false);
    // The node is back: its medium serves again, its copy stays lost.
    s.media.set_medium_failed("na", false);
    assert_eq!(io.lost_slices(), [(1, 0)]);

    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Rebuild, 1, 0, "na", 0)
        .expect("begin");
    assert!(
        !copying.in_place(),
        "a stale copy is never trusted as it is"
    );
    assert_eq!(copying.starts_at(), 0);
    // Lost until the switch: reads come from the healthy copy.
    assert_eq!(io.lost_slices(), [(1, 0)]);
    let written = a.backend.written_bytes.load(Ordering::SeqCst);
    let options = CopyOptions::default();
    copying.fill(&options, &mut |_, _| {}).expect("fill");
    copying.switch().expect("switch");
    copying.finish().expect("finish");
    // Compared all, rewrote chunks 1 (its data) and 2 (punched).
    assert_eq!(options.stats.compared(), SIZE);
    assert_eq!(options.stats.rewritten(), 2 * MIB);
    assert_eq!(
        a.backend.written_bytes.load(Ordering::SeqCst) - written,
        256 << 10,
        "only chunk 1's data went to the node"
    );
    assert_eq!(a.bytes("na", 1), model);
    assert_eq!(io.lost_slices(), []);
    // The resynced slice is the one serving now.
    write(io.as_ref(), &mut model, 4096, &pattern(12, 4096));
    io.fail_medium("m0");
    assert_eq!(read_all(io.as_ref()), model);
    assert_eq!(a.bytes("na", 1), model);
}

/// Fills with a checkpoint every 1 MiB (recorded in `recorded`) until
/// `stop_at` bytes are done, then cancels the copy, as a stopping service
/// does: the fill ends `Cancelled`.
fn fill_until(copying: &mut Box<dyn SliceMove>, stop_at: u64, recorded: &Arc<Mutex<Vec<u64>>>) {
    let sink = Arc::clone(recorded);
    let options = CopyOptions {
        resume: crate::CopyResume {
            from: 0,
            record: Some(Arc::new(move |offset| {
                sink.lock().expect("lock").push(offset);
                Ok(())
            })),
            every_bytes: MIB,
            min_interval: Duration::ZERO,
        },
        ..CopyOptions::default()
    };
    let cancel = options.cancel.clone();
    let filled = copying.fill(&options, &mut |done, _| {
        if done >= stop_at {
            cancel.cancel();
        }
    });
    assert!(
        matches!(filled, Err(DataPlaneError::Cancelled)),
        "{filled:?}"
    );
}

#[test]
fn an_interrupted_copy_to_a_node_resumes_from_its_checkpoint_and_keeps_its_slice() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    for i in 0..4u64 {
        write(
            io.as_ref(),
            &mut model,
            i * MIB,
            &pattern(20 + i as u8, 512 << 10),
        );
    }
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "n0", 0)
        .expect("begin");
    fill_until(&mut copying, 2 * MIB, &recorded);
    drop(copying);
    let checkpoint = recorded.lock().expect("lock").last().copied().unwrap_or(0);
    assert!(checkpoint >= MIB, "{recorded:?}");
    // Kept for the resume: the node still has the slice.
    let name = SliceName::new("n0", VOLUME, 0, 0);
    assert!(node.backend.bytes(&name).is_some());
    // A write below the checkpoint while no copy runs: the resume catches
    // up with it.
    write(io.as_ref(), &mut model, 0, &pattern(77, 8192));

    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "n0", checkpoint)
        .expect("begin again");
    assert_eq!(copying.starts_at(), checkpoint);
    let options = CopyOptions::default();
    copying.fill(&options, &mut |_, _| {}).expect("fill");
    assert_eq!(options.stats.resumed_at(), checkpoint);
    // Below the checkpoint only what was written since the volume was
    // opened is copied again (here, every write of the test).
    assert!(options.stats.catch_up() > 0);
    copying.switch().expect("switch");
    copying.finish().expect("finish");
    assert_eq!(node.bytes("n0", 0), model);
    assert_eq!(read_all(io.as_ref()), model);
}

#[test]
fn a_resume_whose_node_slice_is_gone_starts_from_zero_and_a_failed_copy_leaves_nothing() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["m0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(3, 3 * MIB as usize));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "n0", 0)
        .expect("begin");
    fill_until(&mut copying, 2 * MIB, &recorded);
    drop(copying);
    let checkpoint = recorded.lock().expect("lock").last().copied().unwrap_or(0);
    assert!(checkpoint > 0, "{recorded:?}");
    let name = SliceName::new("n0", VOLUME, 0, 0);
    node.backend.delete_slice(&name).expect("gone");
    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "n0", checkpoint)
        .expect("begin again");
    assert_eq!(copying.starts_at(), 0, "nothing to resume");
    // Undone before the switch (not interrupted): the slice goes.
    copying
        .fill(&CopyOptions::default(), &mut |_, _| {})
        .expect("fill");
    assert!(node.backend.bytes(&name).is_some());
    copying.abort().expect("abort");
    assert!(node.backend.bytes(&name).is_none());
    assert_eq!(read_all(io.as_ref()), model);
}

#[test]
fn a_lost_copy_on_a_local_medium_usable_again_is_resynced_in_place() {
    let s = setup();
    let io = open(&s, &layout(&["m0", "m1"], 0));
    let mut model = vec![0u8; SIZE as usize];
    for i in 0..4u64 {
        write(
            io.as_ref(),
            &mut model,
            i * MIB,
            &pattern(30 + i as u8, 128 << 10),
        );
    }
    io.flush().expect("flush");
    io.fail_medium("m1");
    assert_eq!(io.lost_slices(), [(1, 0)]);
    write(io.as_ref(), &mut model, 3 * MIB + 4096, &pattern(50, 4096));
    let stale = local_bytes(&s, "m1", 1);
    assert_ne!(stale, model, "the lost copy missed a write");

    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Rebuild, 1, 0, "m1", 0)
        .expect("begin");
    assert!(!copying.in_place());
    let options = CopyOptions::default();
    copying.fill(&options, &mut |_, _| {}).expect("fill");
    copying.switch().expect("switch");
    copying.finish().expect("finish");
    assert_eq!(options.stats.compared(), SIZE);
    assert_eq!(
        options.stats.rewritten(),
        MIB,
        "only the chunk written meanwhile"
    );
    assert_eq!(local_bytes(&s, "m1", 1), model);
    assert_eq!(io.lost_slices(), []);
    write(io.as_ref(), &mut model, 0, &pattern(51, 4096));
    io.flush().expect("flush");
    io.fail_medium("m0");
    assert_eq!(read_all(io.as_ref()), model);
    assert_eq!(local_bytes(&s, "m1", 1), model);
}

#[test]
fn an_offline_copy_to_a_node_resumes_from_its_checkpoint() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    {
        let io = open(&s, &layout(&["m0"], 1));
        io.write(0, &pattern(8, 3 * MIB as usize), true)
            .expect("write");
    }
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&recorded);
    let options = CopyOptions {
        epoch: 1,
        resume: crate::CopyResume {
            from: 0,
            record: Some(Arc::new(move |offset| {
                sink.lock().expect("lock").push(offset);
                Ok(())
            })),
            every_bytes: MIB,
            min_interval: Duration::ZERO,
        },
        ..CopyOptions::default()
    };
    let cancel = options.cancel.clone();
    let stopped = s
        .media
        .copy_slice("m0", "n0", &key(0), &options, &mut |done, _| {
            if done >= 2 * MIB {
                cancel.cancel();
            }
        });
    assert!(
        matches!(stopped, Err(DataPlaneError::Cancelled)),
        "{stopped:?}"
    );
    let checkpoint = recorded.lock().expect("lock").last().copied().unwrap_or(0);
    assert!(checkpoint >= MIB, "{recorded:?}");
    // Kept for the resume.
    let name = SliceName::new("n0", VOLUME, 0, 0);
    assert!(node.backend.bytes(&name).is_some());

    let resumed = CopyOptions {
        epoch: 1,
        resume: crate::CopyResume {
            from: checkpoint,
            ..crate::CopyResume::default()
        },
        ..CopyOptions::default()
    };
    let digest = s
        .media
        .copy_slice("m0", "n0", &key(0), &resumed, &mut |_, _| {})
        .expect("resumed");
    assert_eq!(resumed.stats.resumed_at(), checkpoint);
    assert_eq!(resumed.stats.copied(), 3 * MIB - checkpoint);
    assert_eq!(node.bytes("n0", 0), local_bytes(&s, "m0", 0));
    assert_eq!(
        digest,
        crate::digest_file(&s.media.local().slice_path("m0", &key(0)).expect("path"))
            .expect("digest")
    );
}

#[test]
fn reads_come_from_a_copy_in_this_process_before_one_over_the_network() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let io = open(&s, &layout(&["n0", "m0"], 1));
    let data = pattern(3, 8192);
    io.write(0, &data, false).expect("write");
    // Behind the front's back, the node's copy (copy 0, the first) changes:
    // reads show the local copy's bytes.
    let on_node = SliceName::new("n0", VOLUME, 0, 0);
    SliceBackend::write(&*node.backend, &on_node, 0, &[0xee; 4096]).expect("changed");
    let mut buf = vec![0u8; 8192];
    io.read(0, &mut buf).expect("read");
    assert_eq!(
        buf, data,
        "a read went over the network with a local copy there"
    );
    // The node reached in process (the front runs on that node): its copy
    // is as near as the local one, and first.
    let server = node.server.as_ref().expect("running");
    s.media
        .reach_in_process("node-a", server.in_process_client(TIMEOUT));
    io.read(0, &mut buf).expect("read");
    assert_eq!(buf[..4096], [0xee; 4096]);
    // Written in process, fenced as over the network: both copies change.
    io.write(0, &pattern(4, 4096), false).expect("write");
    assert_eq!(node.bytes("n0", 0)[..4096], pattern(4, 4096)[..]);
    assert_eq!(local_bytes(&s, "m0", 1)[..4096], pattern(4, 4096)[..]);
}

/// Times `op` (the fastest of three tries: a loaded machine may stall one).
fn fastest(mut op: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            op();
            start.elapsed()
        })
        .min()
        .expect("three tries")
}

#[test]
fn a_write_and_a_flush_to_three_nodes_wait_for_one_slow_reply_not_three() {
    const DELAY: Duration = Duration::from_millis(50);
    let s = setup();
    let nodes = node_media(&s, &["n0", "n1", "n2"]);
    let io = open(&s, &layout(&["n0", "n1", "n2"], 1));
    let mut model = vec![0u8; SIZE as usize];
    // Learns the slices have no snapshots (a round trip of its own).
    write(io.as_ref(), &mut model, 0, &pattern(1, 4096));
    for node in &nodes {
        node.backend.delay_changes(DELAY);
    }
    let mut seed = 2;
    let took = fastest(|| {
        seed += 1;
        write(io.as_ref(), &mut model, 8192, &pattern(seed, 4096));
    });
    assert!(
        took >= DELAY,
        "{took:?}: the write did not wait for its copies"
    );
    assert!(
        took < 2 * DELAY,
        "{took:?}: the copies were written one after another"
    );
    let took = fastest(|| io.flush().expect("flush"));
    assert!(took >= DELAY && took < 2 * DELAY, "flush took {took:?}");
    let took = fastest(|| io.write(12288, &pattern(9, 4096), true).expect("FUA write"));
    model[12288..16384].copy_from_slice(&pattern(9, 4096));
    // A FUA write: the write, then the sync, each to every node at once.
    assert!(
        took >= 2 * DELAY && took < 3 * DELAY,
        "FUA write took {took:?}"
    );
    for (copy, (node, medium)) in nodes.iter().zip(["n0", "n1", "n2"]).enumerate() {
        assert_eq!(node.bytes(medium, copy as u32), model, "copy {copy}");
    }
    assert_eq!(io.lost_slices(), []);
}

#[test]
fn a_write_fans_out_to_the_nodes_while_the_local_copy_is_written() {
    const DELAY: Duration = Duration::from_millis(50);
    let s = setup();
    let a = node_medium(&s, "n0", "node-a");
    let b = node_medium(&s, "n1", "node-b");
    let io = open(&s, &layout(&["m0", "n0", "n1"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(1, 4096));
    a.backend.delay_changes(DELAY);
    b.backend.delay_changes(DELAY);
    let took = fastest(|| write(io.as_ref(), &mut model, 4096, &pattern(2, 64 << 10)));
    assert!(took >= DELAY && took < 2 * DELAY, "write took {took:?}");
    // A node that stops answering mid-write loses its copy alone.
    b.backend.set_stalled(true);
    write(io.as_ref(), &mut model, 1 << 20, &pattern(3, 4096));
    io.flush().expect("flush");
    assert_eq!(io.lost_slices(), [(2, 0)]);
    assert_eq!(local_bytes(&s, "m0", 0), model);
    assert_eq!(a.bytes("n0", 1), model);
}

#[test]
fn a_newer_front_fences_a_pipelined_write_on_every_node_and_no_copy_changes() {
    let s = setup();
    let nodes = node_media(&s, &["n0", "n1", "n2"]);
    let media = ["n0", "n1", "n2"];
    let old = open(&s, &layout(&media, 1));
    let mut model = vec![0u8; SIZE as usize];
    write(old.as_ref(), &mut model, 0, &pattern(1, 4096));
    let new = s.media.open_volume(&layout(&media, 2)).expect("open");
    write(new.as_ref(), &mut model, MIB, &pattern(2, 4096));
    let before: Vec<(u64, Vec<u8>)> = nodes
        .iter()
        .zip(media)
        .enumerate()
        .map(|(copy, (n, m))| {
            (
                n.backend.changes.load(Ordering::SeqCst),
                n.bytes(m, copy as u32),
            )
        })
        .collect();

    // Sent to the three nodes at once, refused by each: the front stops.
    let e = old
        .write(2 * MIB, &pattern(9, 64 << 10), false)
        .expect_err("fenced");
    assert!(crate::is_front_fenced(&e), "{e}");
    assert!(old.is_fenced());
    for later in [old.flush(), old.write(0, &pattern(9, 4096), true)] {
        assert!(crate::is_front_fenced(&later.expect_err("still fenced")));
    }
    for (copy, ((n, m), (changes, bytes))) in nodes.iter().zip(media).zip(&before).enumerate() {
        assert_eq!(
            n.backend.changes.load(Ordering::SeqCst),
            *changes,
            "copy {copy}"
        );
        assert_eq!(&n.bytes(m, copy as u32), bytes, "copy {copy}");
    }
    assert_eq!(old.lost_slices(), []);
    assert_eq!(s.heard.lock().expect("lock").len(), 0);
    // The new front goes on, its copies alike.
    write(new.as_ref(), &mut model, 2 * MIB, &pattern(3, 4096));
    new.flush().expect("flush");
    for (copy, (n, m)) in nodes.iter().zip(media).enumerate() {
        assert_eq!(n.bytes(m, copy as u32), model, "copy {copy}");
    }
}
