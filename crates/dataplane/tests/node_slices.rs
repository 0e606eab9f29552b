//! A storage node's slices over the slice protocol: a real `SliceServer`
//! over `NodeSlices` on temporary directories and a real `SliceClient`,
//! over TCP on 127.0.0.1. What the client does is checked on the files the
//! local data plane keeps.

use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use svs_dataplane::{
    start_slice_server, CopyOptions, DataPlane, FileEpochStore, LocalMedia, NodeSlices,
    SharedSecret, SliceKey, COW_CHUNK,
};
use svs_sliceproto::{
    remote_error, ServerConfig, SliceClient, SliceName, SliceServer, SnapshotInfo, Status,
    StoredSlice,
};

const SECRET: &str = "node-secret";
const TIMEOUT: Duration = Duration::from_secs(10);
const MIB: u64 = 1024 * 1024;

/// A storage node on 127.0.0.1 over two media in a temporary directory;
/// the directory goes with it.
struct Node {
    server: Option<SliceServer>,
    slices: Arc<NodeSlices>,
    root: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let root = tempfile::tempdir().expect("temp dir");
        let (server, slices) = Node::serve(root.path());
        Node {
            server: Some(server),
            slices,
            root,
        }
    }

    fn media(root: &Path) -> Vec<(String, PathBuf)> {
        ["m1", "m2"]
            .iter()
            .map(|m| (m.to_string(), root.join("media").join(m)))
            .collect()
    }

    fn serve(root: &Path) -> (SliceServer, Arc<NodeSlices>) {
        let slices = Arc::new(NodeSlices::open(Node::media(root)).expect("media"));
        let epochs = Arc::new(FileEpochStore::open(&root.join("state")).expect("epochs"));
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let server = SliceServer::start(
            listener,
            ServerConfig::default(),
            slices.clone(),
            Arc::new(SharedSecret::new(SECRET)),
            epochs,
        )
        .expect("server");
        (server, slices)
    }

    /// Stops the server and starts another over the same media and state.
    fn restart(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
        let (server, slices) = Node::serve(self.root.path());
        self.server = Some(server);
        self.slices = slices;
    }

    fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("running").local_addr()
    }

    fn client(&self) -> SliceClient {
        SliceClient::connect(self.addr(), SECRET, "front-1", TIMEOUT).expect("connect")
    }

    /// The slice's file, as the local data plane names it.
    fn file(&self, s: &SliceName) -> PathBuf {
        self.root
            .path()
            .join("media")
            .join(&s.medium)
            .join(&s.volume)
            .join(format!("c{}-k{}.slice", s.copy, s.column))
    }

    fn file_bytes(&self, s: &SliceName, offset: u64, len: usize) -> Vec<u8> {
        let bytes = fs::read(self.file(s)).expect("slice file");
        bytes[offset as usize..offset as usize + len].to_vec()
    }

    /// The local data plane over the same media.
    fn local(&self) -> LocalMedia {
        LocalMedia::new(Node::media(self.root.path()))
    }
}

fn slice() -> SliceName {
    SliceName::new("m1", "vol-1", 0, 1)
}

/// The node's answer to a failed request: status and message.
fn refusal(e: &io::Error) -> (Status, String) {
    let r = remote_error(e).unwrap_or_else(|| panic!("not the node's answer: {e}"));
    (r.status, r.message.clone())
}

/// `actual == expected`, saying where they first differ (not every byte).
#[track_caller]
fn same(actual: &[u8], expected: &[u8]) {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    if let Some(at) = actual.iter().zip(expected).position(|(a, b)| a != b) {
        panic!(
            "bytes differ from offset {at}: {} where {} was expected",
            actual[at], expected[at]
        );
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8) | 1)
        .collect()
}

#[test]
fn every_op_round_trips_and_the_bytes_are_those_of_the_slice_file() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).expect("create");
    assert_eq!(fs::metadata(node.file(&s)).expect("file").len(), MIB);
    assert_eq!(c.size(&s).expect("size"), MIB);
    c.grow_slice(&s, 2 * MIB).expect("grow");
    assert_eq!(c.size(&s).expect("size"), 2 * MIB);
    assert_eq!(fs::metadata(node.file(&s)).expect("file").len(), 2 * MIB);
    c.check_present(&s).expect("present");

    let data = pattern(3, 8192);
    c.prepare_write(&s, 1, 65536, 8192).expect("prepare");
    c.write(&s, 1, 65536, &data).expect("write");
    c.sync(&s, 1).expect("sync");
    same(&node.file_bytes(&s, 65536, 8192), &data);
    let mut back = vec![0u8; 8192];
    c.read(&s, 65536, &mut back).expect("read");
    same(&back, &data);
    // The end of the grown slice, across the old size.
    let tail = pattern(9, 4096);
    c.write(&s, 1, MIB - 2048, &tail)
        .expect("write across the old end");
    same(&node.file_bytes(&s, MIB - 2048, 4096), &tail);

    assert_eq!(
        c.allocation(&s, 0, 3 * 65536).expect("allocation"),
        vec![(65536, true), (8192, false), (2 * 65536 - 8192, true)]
    );
    assert_eq!(
        c.next_data(&s, 0, 2 * MIB).expect("next data"),
        Some((65536, 65536 + 8192))
    );
    assert_eq!(
        c.data_bytes(&s, 0, 2 * MIB).expect("data bytes"),
        8192 + 8192
    );
    c.will_need(&s, 0, 4096);

    c.discard(&s, 1, 65536, 4096).expect("discard");
    same(&node.file_bytes(&s, 65536, 4096), &[0u8; 4096]);
    same(&node.file_bytes(&s, 65536 + 4096, 4096), &data[4096..]);
    assert_eq!(
        c.allocation(&s, 65536, 8192).expect("allocation"),
        vec![(4096, true), (4096, false)]
    );

    // A 6 MiB write and read: split by the client at the 4 MiB max payload.
    let big = SliceName::new("m2", "vol-1", 1, 1);
    c.create_slice(&big, 8 * MIB).expect("create");
    let data = pattern(5, 6 * MIB as usize);
    c.write(&big, 1, MIB, &data).expect("big write");
    let mut back = vec![0u8; data.len()];
    c.read(&big, MIB, &mut back).expect("big read");
    assert!(back == data);
    assert!(node.file_bytes(&big, MIB, data.len()) == data);

    assert_eq!(
        c.stored_slices("m1").expect("stored"),
        vec![StoredSlice {
            volume: "vol-1".into(),
            copy: 0,
            column: 1,
            partial: false
        }]
    );
    // A copy in progress (the local data plane's partial file) is flagged.
    let partial = node.file(&SliceName::new("m2", "vol-2", 0, 0));
    fs::create_dir_all(partial.parent().expect("dir")).expect("dir");
    fs::write(partial.with_extension("slice.partial"), b"").expect("partial");
    assert_eq!(
        c.stored_slices("m2").expect("stored"),
        vec![
            StoredSlice {
                volume: "vol-1".into(),
                copy: 1,
                column: 1,
                partial: false
            },
            StoredSlice {
                volume: "vol-2".into(),
                copy: 0,
                column: 0,
                partial: true
            },
        ]
    );
}

#[test]
fn snapshots_keep_the_old_bytes_and_a_rollback_restores_them() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).expect("create");
    let old = pattern(1, 3 * 4096);
    c.write(&s, 1, 4096, &old).expect("write");
    c.create_snapshot(&s, 1, 7).expect("snapshot");
    let dir = node.file(&s).parent().expect("dir").to_path_buf();
    assert!(dir.join("c0-k1.s7.map").is_file());
    assert!(dir.join("c0-k1.s7.delta").is_file());

    let new = pattern(2, 4096);
    c.write(&s, 1, 8192, &new)
        .expect("write after the snapshot");
    // Held until its save is durable: in the slice file after a sync.
    c.sync(&s, 1).expect("sync");
    same(&node.file_bytes(&s, 8192, 4096), &new);
    let mut snap = vec![0u8; old.len()];
    c.read_snapshot(&s, 7, 4096, &mut snap)
        .expect("read snapshot");
    same(&snap, &old);
    // The chunk saved by the copy-on-write, as a copy fetches it.
    let mut chunk = vec![0u8; COW_CHUNK as usize];
    c.read_snapshot_chunk(&s, 7, 0, &mut chunk)
        .expect("snapshot chunk");
    assert_eq!(chunk[4096..4096 + old.len()], old[..]);
    assert_eq!(c.snapshot_ids(&s).expect("ids"), vec![7]);
    let list = c.snapshots(&s).expect("list");
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].id, list[0].size), (7, MIB));
    assert!(list[0].used_bytes >= COW_CHUNK, "{:?}", list[0]);
    assert_eq!(
        c.snapshot_allocation(&s, 7, 0, 2 * 65536)
            .expect("allocation"),
        // Chunk 0 saved whole in the delta, chunk 1 still the live slice's hole.
        vec![(65536, false), (65536, true)]
    );
    // The map: its header and one record (chunk 0 saved), whole.
    let map = fs::read(dir.join("c0-k1.s7.map")).expect("map");
    let tail = c.snapshot_map_since(&s, 7, 0).expect("map");
    assert_eq!(
        (tail.bytes.clone(), tail.end),
        (map.clone(), map.len() as u64)
    );
    assert_eq!(map.len(), 32 + 24);
    let rest = c.snapshot_map_since(&s, 7, 32).expect("map tail");
    assert_eq!((rest.bytes, rest.end), (map[32..].to_vec(), 56));

    c.discard(&s, 1, 4096, 4096).expect("discard");
    c.rollback(&s, 1, 7).expect("rollback");
    same(&node.file_bytes(&s, 4096, old.len()), &old);
    let mut back = vec![0u8; old.len()];
    c.read(&s, 4096, &mut back).expect("read");
    same(&back, &old);

    c.delete_snapshot(&s, 1, 7).expect("delete snapshot");
    assert!(c.snapshot_ids(&s).expect("ids").is_empty());
    assert_eq!(c.snapshots(&s).expect("list"), Vec::<SnapshotInfo>::new());
    assert!(!dir.join("c0-k1.s7.map").exists());
    assert!(!dir.join("c0-k1.s7.delta").exists());
}

#[test]
fn delete_removes_the_files_and_forgets_the_open_slice() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    let sibling = SliceName::new("m1", "vol-1", 1, 1);
    c.create_slice(&s, MIB).expect("create");
    c.create_slice(&sibling, MIB).expect("create");
    c.write(&s, 1, 0, &[1u8; 4096]).expect("write");
    c.create_snapshot(&s, 1, 3).expect("snapshot");
    c.write(&s, 1, 0, &[2u8; 4096]).expect("write");
    assert_eq!(node.slices.open_slices(), 1);
    c.size(&sibling).expect("size");
    assert_eq!(node.slices.open_slices(), 2);

    c.delete_slice(&s).expect("delete");
    let dir = node.file(&s).parent().expect("dir").to_path_buf();
    let left: Vec<String> = fs::read_dir(&dir)
        .expect("volume dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["c1-k1.slice"]);
    assert_eq!(node.slices.open_slices(), 1);
    let e = c.size(&s).expect_err("deleted");
    assert_eq!(
        refusal(&e),
        (
            Status::Errno(2),
            "Size vol-1/c0-k1 on m1: slice vol-1/c0-k1 is not on medium 'm1' of this node".into()
        )
    );
    // A retried delete is fine; the last slice takes the volume's directory.
    c.delete_slice(&s).expect("delete again");
    c.delete_slice(&sibling).expect("delete");
    assert!(!dir.exists());
    assert_eq!(node.slices.open_slices(), 0);

    // Made again: a new, empty slice (not the old open file).
    c.create_slice(&s, MIB).expect("create again");
    let mut back = vec![9u8; 4096];
    c.read(&s, 0, &mut back).expect("read");
    assert_eq!(back, vec![0u8; 4096]);
    assert!(c.snapshot_ids(&s).expect("ids").is_empty());
}

#[test]
fn the_digest_is_the_local_data_planes() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, 4 * MIB).expect("create");
    c.write(&s, 1, 12345, &pattern(4, 100_000)).expect("write");
    c.write(&s, 1, 3 * MIB, &[0u8; 8192]).expect("zeros");
    let remote = c.digest(&s).expect("digest");
    // The digest the local data plane's verified copy computes.
    let local = node.local();
    let key = SliceKey {
        volume_id: s.volume.clone(),
        copy: s.copy,
        column: s.column,
    };
    let copied = local
        .copy_slice("m1", "m2", &key, &CopyOptions::default(), &mut |_, _| {})
        .expect("local copy");
    assert_eq!(remote, copied.0);
    let on_m2 = SliceName::new("m2", "vol-1", 0, 1);
    assert_eq!(c.digest(&on_m2).expect("digest of the copy"), remote);
    c.write(&s, 1, 0, &[1u8]).expect("write");
    assert_ne!(c.digest(&s).expect("digest"), remote);
}

#[test]
fn a_stale_epoch_is_refused_and_stays_refused_after_a_restart() {
    let mut node = Node::start();
    let s = slice();
    {
        let c = node.client();
        c.create_slice(&s, MIB).expect("create");
        c.write(&s, 1, 0, &[1u8; 4096]).expect("epoch 1");
        c.write(&s, 2, 0, &[2u8; 4096]).expect("epoch 2 takes over");
        let e = c.write(&s, 1, 0, &[3u8; 4096]).expect_err("stale");
        assert_eq!(
            refusal(&e),
            (
                Status::StaleEpoch,
                "Write vol-1/c0-k1 on m1: epoch 1 is stale, volume vol-1 is at epoch 2 on this \
                 node (another front end took the volume over)"
                    .into()
            )
        );
        same(&node.file_bytes(&s, 0, 4096), &[2u8; 4096]);
        for refused in [
            c.discard(&s, 1, 0, 4096),
            c.sync(&s, 1),
            c.create_snapshot(&s, 1, 1),
        ] {
            assert_eq!(refusal(&refused.expect_err("stale")).0, Status::StaleEpoch);
        }
        assert!(c.snapshot_ids(&s).expect("ids").is_empty());
    }
    node.restart();
    let c = node.client();
    let e = c
        .write(&s, 1, 0, &[3u8; 4096])
        .expect_err("stale after restart");
    assert_eq!(refusal(&e).0, Status::StaleEpoch);
    same(&node.file_bytes(&s, 0, 4096), &[2u8; 4096]);
    c.write(&s, 2, 0, &[4u8; 4096]).expect("epoch 2 still in");
    c.write(&s, 3, 0, &[5u8; 4096]).expect("epoch 3");
    same(&node.file_bytes(&s, 0, 4096), &[5u8; 4096]);
    // Other volumes have their own epochs.
    let other = SliceName::new("m1", "vol-2", 0, 0);
    c.create_slice(&other, MIB).expect("create");
    c.write(&other, 1, 0, &[6u8; 4096])
        .expect("epoch 1 of vol-2");
}

#[test]
fn errors_come_back_with_their_errno_and_message() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).expect("create");

    let unknown = SliceName::new("m9", "vol-1", 0, 1);
    assert_eq!(
        refusal(&c.size(&unknown).expect_err("unknown medium")),
        (
            Status::Errno(2),
            "Size vol-1/c0-k1 on m9: no medium 'm9' on this node".into()
        )
    );
    assert_eq!(
        refusal(&c.stored_slices("m9").expect_err("unknown medium")),
        (
            Status::Errno(2),
            "StoredSlices /c0-k0 on m9: no medium 'm9' on this node".into()
        )
    );
    assert_eq!(
        refusal(&c.create_slice(&unknown, MIB).expect_err("unknown medium")).0,
        Status::Errno(2)
    );
    let missing = SliceName::new("m1", "vol-9", 2, 3);
    assert_eq!(
        refusal(&c.read(&missing, 0, &mut [0u8; 10]).expect_err("missing")),
        (
            Status::Errno(2),
            "Read vol-9/c2-k3 on m1: slice vol-9/c2-k3 is not on medium 'm1' of this node".into()
        )
    );
    assert_eq!(
        refusal(&c.grow_slice(&missing, MIB).expect_err("missing")).0,
        Status::Errno(2)
    );
    assert!(!node.file(&missing).exists());

    for (volume, why) in [
        ("", "is empty"),
        ("..", "is a path segment ('.' or '..')"),
        ("../m2", "contains '/'"),
        ("a\u{7}b", "contains a control character"),
    ] {
        let bad = SliceName::new("m1", volume, 0, 0);
        let e = c.create_slice(&bad, MIB).expect_err(volume);
        assert_eq!(
            refusal(&e),
            (
                Status::Errno(22),
                format!(
                    "CreateSlice {volume}/c0-k0 on m1: volume id {volume:?} {why}: not a plain \
                     file name"
                )
            )
        );
        // Fenced ops are refused before any epoch is recorded.
        assert_eq!(
            refusal(&c.write(&bad, 1, 0, &[1]).expect_err(volume)).0,
            Status::Errno(22)
        );
    }
    let bad_medium = SliceName::new("..", "vol-1", 0, 0);
    assert_eq!(
        refusal(&c.size(&bad_medium).expect_err("bad medium")),
        (
            Status::Errno(22),
            "Size vol-1/c0-k0 on ..: medium name \"..\" is a path segment ('.' or '..'): not a \
             plain file name"
                .into()
        )
    );
    // Nothing was made outside the media.
    let media: Vec<String> = fs::read_dir(node.root.path().join("media"))
        .expect("media")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(media.len(), 2, "{media:?}");

    assert_eq!(
        refusal(
            &c.read(&s, MIB - 100, &mut [0u8; 200])
                .expect_err("past the end")
        ),
        (
            Status::Errno(22),
            format!(
                "Read vol-1/c0-k1 on m1: read of 200 bytes at {} goes past the end of the \
                 slice ({MIB} bytes)",
                MIB - 100
            )
        )
    );
    assert_eq!(
        refusal(&c.write(&s, 1, MIB, &[1u8; 1]).expect_err("past the end")),
        (
            Status::Errno(22),
            format!(
                "Write vol-1/c0-k1 on m1: write of 1 bytes at {MIB} goes past the end of the \
                 slice ({MIB} bytes)"
            )
        )
    );
    assert_eq!(
        refusal(&c.discard(&s, 1, 0, MIB + 1).expect_err("past the end")).0,
        Status::Errno(22)
    );
    assert_eq!(
        refusal(&c.prepare_write(&s, 1, u64::MAX, 2).expect_err("overflow")).0,
        Status::Errno(22)
    );
    assert_eq!(fs::metadata(node.file(&s)).expect("file").len(), MIB);
    assert_eq!(
        refusal(&c.rollback(&s, 1, 99).expect_err("no snapshot")),
        (
            Status::Errno(2),
            "Rollback vol-1/c0-k1 on m1: no snapshot 99".into()
        )
    );
    assert_eq!(
        refusal(
            &c.read_snapshot_chunk(&s, 1, u64::MAX, &mut [0u8; 16])
                .expect_err("chunk overflow")
        )
        .0,
        Status::Errno(22)
    );
}

#[test]
fn a_full_medium_is_enospc_and_leaves_the_slice_as_it_was() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).expect("create");
    c.write(&s, 1, 0, &[1u8; 4096]).expect("write");
    c.create_snapshot(&s, 1, 1).expect("snapshot");
    // No room for the copy-on-write save the next write needs.
    node.slices.set_snapshot_budget("m1", Some(0));
    let e = c.write(&s, 1, 0, &[2u8; 4096]).expect_err("full");
    let (status, message) = refusal(&e);
    assert_eq!(status, Status::Errno(28), "{message}");
    assert!(
        message.starts_with("Write vol-1/c0-k1 on m1: "),
        "{message}"
    );
    same(&node.file_bytes(&s, 0, 4096), &[1u8; 4096]);
    assert_eq!(
        refusal(&c.prepare_write(&s, 1, 0, 4096).expect_err("full")).0,
        Status::Errno(28)
    );
    node.slices.set_snapshot_budget("m1", None);
    c.write(&s, 1, 0, &[2u8; 4096]).expect("room again");
    let mut snap = vec![0u8; 4096];
    c.read_snapshot(&s, 1, 0, &mut snap).expect("snapshot");
    assert_eq!(snap, vec![1u8; 4096]);
}

#[test]
fn a_slice_file_gone_from_its_medium_is_not_present() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).expect("create");
    c.check_present(&s).expect("present");
    c.collect(c.send_sync(&s, 1, true)).expect("a checked sync");
    fs::remove_file(node.file(&s)).expect("remove behind the node's back");
    let (status, message) = refusal(&c.check_present(&s).expect_err("gone"));
    assert_eq!(status, Status::Errno(2), "{message}");
    assert_eq!(
        message,
        "CheckPresent vol-1/c0-k1 on m1: No such file or directory (os error 2)"
    );
    // A flush's sync asks the same question first; a plain one does not.
    c.sync(&s, 1).expect("the open file syncs");
    let (status, message) = refusal(&c.collect(c.send_sync(&s, 1, true)).expect_err("gone"));
    assert_eq!(status, Status::Errno(2), "{message}");
    assert_eq!(
        message,
        "Sync vol-1/c0-k1 on m1: No such file or directory (os error 2)"
    );
    // Made again: the new file is served, not the open one.
    c.create_slice(&s, MIB).expect("create again");
    c.check_present(&s).expect("present again");
    c.write(&s, 1, 0, &[8u8; 4096]).expect("write");
    same(&node.file_bytes(&s, 0, 4096), &[8u8; 4096]);
}

#[test]
fn the_nodes_own_front_reads_from_the_page_cache_in_process_and_no_one_else_does() {
    let node = Node::start();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).expect("create");
    c.write(&s, 1, 0, &pattern(5, 8192)).expect("write");
    let mut buf = vec![0u8; 8192];
    // Over the network: never (every read is a request).
    assert!(!c.read_cached(&s, 0, &mut buf));
    let own = node
        .server
        .as_ref()
        .expect("running")
        .in_process_client(TIMEOUT);
    assert!(
        own.read_cached(&s, 0, &mut buf),
        "just written: in the page cache"
    );
    same(&buf, &pattern(5, 8192));
    // Past the end, or a slice that is not there: not from memory (the
    // plain read answers the error).
    assert!(!own.read_cached(&s, MIB - 4096, &mut buf));
    assert!(!own.read_cached(&SliceName::new("m1", "other", 0, 0), 0, &mut buf));
}

#[test]
fn concurrent_writes_from_two_clients_all_land() {
    let node = Node::start();
    let s = slice();
    let clients = [Arc::new(node.client()), Arc::new(node.client())];
    clients[0].create_slice(&s, 4 * MIB).expect("create");
    clients[0].create_snapshot(&s, 1, 1).expect("snapshot");
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let c = Arc::clone(&clients[(t % 2) as usize]);
            let s = s.clone();
            std::thread::spawn(move || -> io::Result<()> {
                for i in 0..64u64 {
                    let offset = (i * 8 + t) * 8192;
                    c.write(&s, 1, offset, &pattern((t * 64 + i) as u8, 8192))?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread").expect("writes");
    }
    clients[1].sync(&s, 1).expect("sync");
    let file = fs::read(node.file(&s)).expect("file");
    for t in 0..8u64 {
        for i in 0..64u64 {
            let offset = ((i * 8 + t) * 8192) as usize;
            assert_eq!(
                file[offset..offset + 8192],
                pattern((t * 64 + i) as u8, 8192)[..],
                "thread {t} write {i}"
            );
        }
    }
    // The snapshot kept what was there before: zeros.
    let mut snap = vec![1u8; 4 * MIB as usize];
    clients[0]
        .read_snapshot(&s, 1, 0, &mut snap)
        .expect("snapshot");
    assert!(snap.iter().all(|&b| b == 0));
}

#[test]
fn the_server_started_for_a_node_takes_only_its_secret() {
    let root = tempfile::tempdir().expect("temp dir");
    let secret = Arc::new(SharedSecret::new("first"));
    let server = start_slice_server(
        Node::media(root.path()),
        &root.path().join("state"),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        secret.clone(),
        None,
    )
    .expect("start");
    let addr = server.local_addr();
    let c = SliceClient::connect(addr, "first", "front-1", TIMEOUT).expect("connect");
    c.create_slice(&slice(), MIB).expect("create");
    let Err(refused) = SliceClient::connect(addr, "wrong", "front-2", TIMEOUT) else {
        panic!("a wrong secret was accepted");
    };
    assert_eq!(
        refusal(&refused),
        (
            Status::Unauthorized,
            "unknown or revoked node credential (caller \"front-2\")".into()
        )
    );
    secret.set("second");
    assert!(SliceClient::connect(addr, "first", "front-1", TIMEOUT).is_err());
    let c2 = SliceClient::connect(addr, "second", "front-1", TIMEOUT).expect("new secret");
    assert_eq!(c2.size(&slice()).expect("size"), MIB);
    // The connection made before the rotation goes on.
    assert_eq!(c.size(&slice()).expect("size"), MIB);
    assert!(root.path().join("state/epochs").is_dir());
    server.shutdown();

    // A medium that cannot be a directory stops the start.
    fs::write(root.path().join("not-a-dir"), b"").expect("file");
    let Err(e) = start_slice_server(
        vec![("m1".into(), root.path().join("not-a-dir"))],
        &root.path().join("state"),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        secret,
        None,
    ) else {
        panic!("a medium that is a file was accepted");
    };
    assert_eq!(e.raw_os_error(), Some(17), "{e}");
}

/// `cargo test -p svs-dataplane --release --test node_slices -- --ignored --nocapture`:
/// 4 KiB writes and reads over loopback against slice files (16 threads on
/// one connection, as the protocol's own benchmark over memory).
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn four_kib_round_trips_per_second_over_files() {
    const THREADS: u64 = 16;
    const RUN: Duration = Duration::from_secs(3);
    let node = Node::start();
    let c = Arc::new(node.client());
    let s = slice();
    c.create_slice(&s, THREADS * 1024 * 4096).expect("create");
    let run = |label: &str, write: bool| {
        let started = Instant::now();
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let c = Arc::clone(&c);
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut buf = [0x5au8; 4096];
                    let mut n = 0u64;
                    while started.elapsed() < RUN {
                        let offset = (t * 1024 + n % 1024) * 4096;
                        if write {
                            c.write(&s, 1, offset, &buf).expect("write");
                        } else {
                            c.read(&s, offset, &mut buf).expect("read");
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{label}: {:.0} round trips/s ({total} in {secs:.1} s, {THREADS} threads, one \
             connection, slice files)",
            total as f64 / secs
        );
    };
    run("4 KiB write", true);
    run("4 KiB read", false);
}

#[test]
fn media_are_checked_when_the_node_opens_them() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("m1");
    let Err(e) = NodeSlices::open(vec![("../m1".into(), dir.clone())]) else {
        panic!("a medium name with a '/' was taken");
    };
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        "medium name \"../m1\" contains '/': not a plain file name"
    );
    let Err(e) = NodeSlices::open(vec![("m1".into(), dir.clone()), ("m1".into(), dir.clone())])
    else {
        panic!("a medium given twice was taken");
    };
    assert_eq!(e.to_string(), "medium 'm1' is given twice");
    assert!(!dir.exists());
    let slices = NodeSlices::open(vec![("m1".into(), dir.clone())]).expect("open");
    assert!(dir.is_dir());
    assert_eq!(slices.media().collect::<Vec<_>>(), ["m1"]);
}
