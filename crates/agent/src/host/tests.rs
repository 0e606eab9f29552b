//! Unit tests of `host`: no device is made (nothing here needs root).

use super::processes::is_device_cmdline;
use super::*;

#[test]
fn a_device_process_is_known_by_its_directory() {
    let args: Vec<String> = ["/usr/bin/svs", "agent-device", "--dir", "/s/devices/v-top"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(is_device_cmdline(&args, Path::new("/s/devices/v-top")));
    assert!(!is_device_cmdline(&args, Path::new("/s/devices/v-1")));
    assert!(!is_device_cmdline(
        &args[..2],
        Path::new("/s/devices/v-top")
    ));
}

#[test]
fn a_kernel_device_is_read_from_its_file_and_must_be_an_nbd_device() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(kernel_device(dir.path()), None);
    std::fs::write(kernel_device_file(dir.path()), "/dev/nbd3\n").unwrap();
    assert_eq!(kernel_device(dir.path()), Some(PathBuf::from("/dev/nbd3")));
    std::fs::write(kernel_device_file(dir.path()), "/dev/sda").unwrap();
    assert_eq!(kernel_device(dir.path()), None);
}

fn desired(mountpoint: &str, snapshot: &str) -> DesiredAttachment {
    DesiredAttachment {
        volumeid: "v".into(),
        volumename: "data".into(),
        snapshotid: snapshot.into(),
        snapshotname: if snapshot == "top" {
            "top".into()
        } else {
            "s1".into()
        },
        state: "Attached".into(),
        readonly: false,
        mountpoint: mountpoint.into(),
        exportname: "e".into(),
        uri: "nbd://127.0.0.1:1/e".into(),
        kind: "file".into(),
        filesystem: Some("xfs".into()),
        filesystemprovisioned: true,
        size: 1,
        manager: "agent".into(),
        growjob: None,
    }
}

#[test]
fn csi_attachments_are_left_to_the_csi_node_plugin() {
    let state = tempfile::tempdir().unwrap();
    // `/bin/false` as the device binary: an attempt to attach would
    // report an error outcome.
    let mut host = Host::open(HostConfig {
        state_dir: state.path().to_path_buf(),
        mount_root: state.path().join("mnt"),
        exe: PathBuf::from("/bin/false"),
        mode: BlockDeviceMode::Fuse,
    })
    .unwrap();
    let mut csi = desired("", "top");
    csi.manager = "csi".into();
    assert!(host.reconcile(&[csi]).is_empty());
    assert!(!host.pending());
    assert!(host.records.is_empty());
    let devices = std::fs::read_dir(state.path().join("devices")).unwrap();
    assert_eq!(devices.count(), 0);
    let records = std::fs::read_dir(state.path().join("attachments")).unwrap();
    assert_eq!(records.count(), 0);
}

#[test]
fn mount_targets_default_under_the_mount_root_and_refuse_relative_paths() {
    let state = tempfile::tempdir().unwrap();
    let host = Host::open(HostConfig {
        state_dir: state.path().to_path_buf(),
        mount_root: PathBuf::from("/mnt/svs"),
        exe: PathBuf::from("/bin/false"),
        mode: BlockDeviceMode::Fuse,
    })
    .unwrap();
    assert_eq!(
        host.mount_target(&desired("", "top")).unwrap(),
        Path::new("/mnt/svs/data")
    );
    assert_eq!(
        host.mount_target(&desired("", "3")).unwrap(),
        Path::new("/mnt/svs/data@s1")
    );
    assert_eq!(
        host.mount_target(&desired("/srv/data", "top")).unwrap(),
        Path::new("/srv/data")
    );
    assert_eq!(
        host.mount_target(&desired("srv/data", "top")).unwrap_err(),
        "mountpoint \"srv/data\" must be an absolute path without '..'"
    );
    assert!(host.mount_target(&desired("/srv/../etc", "top")).is_err());
}

fn record(export: &str, readonly: bool, address: Option<&str>) -> Record {
    Record {
        volumeid: "v".into(),
        snapshotid: "top".into(),
        volumename: "data".into(),
        exportname: export.into(),
        readonly,
        device_pid: None,
        loop_device: None,
        mountpath: None,
        created_mountpath: false,
        grown_for: None,
        grow_error: None,
        grow_job: None,
        address: address.map(str::to_string),
    }
}

#[test]
fn a_moved_front_is_followed_and_another_export_or_mode_replaces_the_device() {
    let rec = record("e", false, Some("10.0.0.1:10809"));
    assert_eq!(
        device_change(&rec, "e", false, "10.0.0.1:10809"),
        DeviceChange::Keep
    );
    assert_eq!(
        device_change(&rec, "e", false, "10.0.0.2:10809"),
        DeviceChange::Address
    );
    assert_eq!(
        device_change(&rec, "e", false, "10.0.0.1:10810"),
        DeviceChange::Address
    );
    // Another export wins over a new address: as before, a new device.
    assert_eq!(
        device_change(&rec, "e2", false, "10.0.0.2:10809"),
        DeviceChange::Replace
    );
    assert_eq!(
        device_change(&rec, "e", true, "10.0.0.1:10809"),
        DeviceChange::Replace
    );
    // A record of an older agent learns its address.
    assert_eq!(
        device_change(&record("e", false, None), "e", false, "10.0.0.1:10809"),
        DeviceChange::Address
    );
}

#[test]
fn records_of_older_agents_have_no_address() {
    let mut json = serde_json::to_value(record("e", false, Some("10.0.0.1:10809"))).unwrap();
    json.as_object_mut().unwrap().remove("address");
    let rec: Record = serde_json::from_value(json).unwrap();
    assert_eq!(rec.address, None);
}

#[test]
fn following_a_moved_front_rewrites_the_address_file_and_the_record() {
    let state = tempfile::tempdir().unwrap();
    let mut host = Host::open(HostConfig {
        state_dir: state.path().to_path_buf(),
        mount_root: state.path().join("mnt"),
        exe: PathBuf::from("/bin/false"),
        mode: BlockDeviceMode::Fuse,
    })
    .unwrap();
    let dir = host.device_dir("v-top");
    let mut rec = record("e", false, None);
    // A record without an address learns it quietly.
    let note = host
        .follow_address("v-top", &mut rec, &dir, "127.0.0.1:10809")
        .unwrap();
    assert_eq!(note, None);
    assert_eq!(
        super::super::device::read_address(&dir),
        Ok(Some("127.0.0.1:10809".into()))
    );

    let note = host
        .follow_address("v-top", &mut rec, &dir, "127.0.0.2:10809")
        .unwrap();
    assert_eq!(
        note.as_deref(),
        Some("the volume's front moved to 127.0.0.2:10809")
    );
    assert_eq!(
        super::super::device::read_address(&dir),
        Ok(Some("127.0.0.2:10809".into()))
    );
    assert_eq!(rec.address.as_deref(), Some("127.0.0.2:10809"));
    // Saved: a restarted agent knows the address too.
    let saved: Record =
        serde_json::from_slice(&std::fs::read(host.record_path("v-top")).unwrap()).unwrap();
    assert_eq!(saved.address.as_deref(), Some("127.0.0.2:10809"));
    // The device directory goes with its address file.
    remove_device_dir(&dir).unwrap();
    assert!(!dir.exists());
}
