//! The Kubernetes manifests of the CSI driver (deploy/kubernetes), checked
//! against the code: no cluster is available here, so this is what stands
//! between a typo and a driver that never registers. Every manifest parses;
//! the driver name is `svs_csi::DRIVER_NAME` wherever it appears; the socket
//! the plugin serves is the one each sidecar dials (same volume, same path)
//! and the one registered with the kubelet; every ServiceAccount, role and
//! ConfigMap referenced exists; StorageClass parameters are the driver's;
//! the plugins' command lines use only flags `svs csi controller|node` has;
//! the kustomization lists every file. The systemd units (deploy/systemd)
//! run `svs` with flags it has, and `systemd-analyze verify` accepts them
//! where it is installed. The Prometheus configuration and alert rules
//! (deploy/prometheus) pass `promtool`, every alert has a test where it fires
//! and one where it does not, and the Grafana dashboard (deploy/grafana)
//! queries only the metrics docs/metrics.md lists.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;
use svs_csi::DRIVER_NAME;

const NAMESPACE: &str = "svs-csi";
/// Made by the admin with kubectl (docs/csi.md), so not among the manifests.
const CREDENTIALS_SECRET: &str = "svs-csi-credentials";
/// The StorageClass parameters the controller plugin knows (csi-design.md).
const PARAMETERS: &[&str] = &["policy", "type", "filesystem"];
/// The plugins' flags per csi-design.md, used when the built binary has no
/// `svs csi` yet.
const CONTROLLER_FLAGS: &[&str] = &["--endpoint", "--url", "--email", "--password-file"];
const NODE_FLAGS: &[&str] = &["--endpoint", "--node", "--zone", "--state-dir"];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// One YAML document of one manifest file.
struct Doc {
    file: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
    fn namespace(&self) -> Option<&str> {
        self.value["metadata"]["namespace"].as_str()
    }
}

fn yaml_files() -> Vec<String> {
    let mut files: Vec<String> = fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    files.sort();
    files
}

/// Every document of one file, as JSON values (plain to index).
fn parse(file: &str) -> Vec<Value> {
    let text = fs::read_to_string(dir().join(file)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{file} does not parse: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every object the kustomization deploys.
fn objects() -> Vec<Doc> {
    yaml_files()
        .into_iter()
        .filter(|f| f != "kustomization.yaml")
        .flat_map(|file| {
            parse(&file).into_iter().map(move |value| Doc {
                file: file.clone(),
                value,
            })
        })
        .collect()
}

fn of_kind<'a>(docs: &'a [Doc], kind: &str) -> Vec<&'a Doc> {
    docs.iter().filter(|d| d.kind() == kind).collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The pod spec of a Deployment or DaemonSet.
fn pod_spec(doc: &Doc) -> &Value {
    &doc.value["spec"]["template"]["spec"]
}

fn workloads(docs: &[Doc]) -> Vec<&Doc> {
    docs.iter()
        .filter(|d| d.kind() == "Deployment" || d.kind() == "DaemonSet")
        .collect()
}

fn containers(doc: &Doc) -> Vec<&Value> {
    pod_spec(doc)["containers"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// `command` followed by `args`.
fn command_line(container: &Value) -> Vec<String> {
    let mut line = strings(&container["command"]);
    line.extend(strings(&container["args"]));
    line
}

/// The plugin container: the one that runs `svs csi ...`.
fn plugin(doc: &Doc) -> &Value {
    containers(doc)
        .into_iter()
        .find(|c| command_line(c).first().map(String::as_str) == Some("svs"))
        .unwrap_or_else(|| panic!("{} {} runs no `svs` container", doc.kind(), doc.name()))
}

/// The value of `--flag=value` or `--flag value` on a command line.
fn flag(line: &[String], name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    line.iter().enumerate().find_map(|(i, arg)| {
        if let Some(v) = arg.strip_prefix(&prefix) {
            Some(v.to_string())
        } else if arg == name {
            line.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// Which of the pod's volumes holds `path` inside `container`, and where in
/// it: the longest mountPath that is a prefix of `path`.
fn resolve(container: &Value, path: &str) -> (String, String) {
    let mounts = container["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    mounts
        .iter()
        .filter_map(|m| {
            let at = m["mountPath"].as_str()?.trim_end_matches('/');
            let rest = path.strip_prefix(at)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| {
                (
                    at.len(),
                    m["name"].as_str().unwrap().to_string(),
                    rest.to_string(),
                )
            })
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, volume, rest)| (volume, rest))
        .unwrap_or_else(|| {
            panic!(
                "container {} mounts nothing at {path}",
                container["name"].as_str().unwrap_or("?")
            )
        })
}

fn host_path(doc: &Doc, volume: &str) -> Option<String> {
    pod_spec(doc)["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == volume)?["hostPath"]["path"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn every_manifest_parses_into_named_objects() {
    let docs = objects();
    assert!(docs.len() >= 15, "only {} objects", docs.len());
    for doc in &docs {
        assert!(
            doc.value["apiVersion"].is_string() && !doc.kind().is_empty() && !doc.name().is_empty(),
            "{}: an object without apiVersion, kind or name: {}",
            doc.file,
            doc.value
        );
    }
    let mut seen = BTreeSet::new();
    for doc in &docs {
        let key = (doc.kind(), doc.namespace(), doc.name());
        assert!(seen.insert(key), "{}: {key:?} twice", doc.file);
    }
}

#[test]
fn the_kustomization_lists_every_file_and_only_those() {
    let kustomization = parse("kustomization.yaml");
    assert_eq!(kustomization.len(), 1);
    assert_eq!(kustomization[0]["kind"], "Kustomization");
    let listed: Vec<String> = strings(&kustomization[0]["resources"]);
    let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(listed.len(), listed_set.len(), "a file listed twice");
    let files: BTreeSet<String> = yaml_files()
        .into_iter()
        .filter(|f| f != "kustomization.yaml")
        .collect();
    assert_eq!(listed_set, files);
    // The namespace first, so `kubectl apply -f` of the list in order works too.
    assert_eq!(listed[0], "namespace.yaml");
}

#[test]
fn everything_namespaced_is_in_the_drivers_namespace() {
    let docs = objects();
    let namespaces = of_kind(&docs, "Namespace");
    assert_eq!(namespaces.len(), 1);
    assert_eq!(namespaces[0].name(), NAMESPACE);
    let cluster_wide = [
        "Namespace",
        "CSIDriver",
        "StorageClass",
        "VolumeSnapshotClass",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    for doc in &docs {
        if cluster_wide.contains(&doc.kind()) {
            assert_eq!(
                doc.namespace(),
                None,
                "{}: {} {}",
                doc.file,
                doc.kind(),
                doc.name()
            );
        } else {
            assert_eq!(
                doc.namespace(),
                Some(NAMESPACE),
                "{}: {} {}",
                doc.file,
                doc.kind(),
                doc.name()
            );
        }
    }
}

#[test]
fn the_driver_name_is_the_codes_everywhere() {
    let docs = objects();
    let drivers = of_kind(&docs, "CSIDriver");
    assert_eq!(drivers.len(), 1);
    let spec = &drivers[0].value["spec"];
    assert_eq!(drivers[0].name(), DRIVER_NAME);
    assert_eq!(spec["attachRequired"], true);
    assert_eq!(spec["podInfoOnMount"], false);
    assert_eq!(strings(&spec["volumeLifecycleModes"]), ["Persistent"]);
    assert_eq!(spec["fsGroupPolicy"], "File");

    let classes = of_kind(&docs, "StorageClass");
    assert_eq!(classes.len(), 2);
    for class in classes {
        assert_eq!(class.value["provisioner"], DRIVER_NAME, "{}", class.name());
    }
    let snapshot_classes = of_kind(&docs, "VolumeSnapshotClass");
    assert_eq!(snapshot_classes.len(), 1);
    assert_eq!(snapshot_classes[0].value["driver"], DRIVER_NAME);

    // The node's socket directory on the host, and the path registered with
    // the kubelet (also in the registrar's liveness probe).
    let node = of_kind(&docs, "DaemonSet")[0];
    let registration = format!("/var/lib/kubelet/plugins/{DRIVER_NAME}/csi.sock");
    let mut seen = 0;
    for container in containers(node) {
        let mut lines = vec![command_line(container)];
        lines.push(strings(&container["livenessProbe"]["exec"]["command"]));
        for line in lines {
            if let Some(path) = flag(&line, "--kubelet-registration-path") {
                assert_eq!(path, registration);
                seen += 1;
            }
        }
    }
    assert_eq!(
        seen, 2,
        "the registrar and its probe name the registration path"
    );

    // Nothing else names some other driver: any `csi.<x>.dev`-like name in
    // the text is the driver's.
    for file in yaml_files() {
        let text = fs::read_to_string(dir().join(&file)).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("csi.") && line.contains(".dev") {
                assert!(line.contains(DRIVER_NAME), "{file}:{}: {line}", n + 1);
            }
        }
    }
}

#[test]
fn sidecars_dial_the_socket_the_plugin_serves() {
    let docs = objects();
    let workloads = workloads(&docs);
    assert_eq!(workloads.len(), 2);
    for workload in workloads {
        let plugin = plugin(workload);
        let endpoint = flag(&command_line(plugin), "--endpoint").unwrap();
        let socket = endpoint
            .strip_prefix("unix://")
            .unwrap_or_else(|| panic!("{endpoint} is not unix://"));
        let served = resolve(plugin, socket);
        let mut sidecars = 0;
        for container in containers(workload) {
            let line = command_line(container);
            let Some(address) = flag(&line, "--csi-address") else {
                continue;
            };
            let address = address.strip_prefix("unix://").unwrap_or(&address);
            assert_eq!(
                resolve(container, address),
                served,
                "{}: {} dials {address}, the plugin serves {socket}",
                workload.name(),
                container["name"]
            );
            sidecars += 1;
        }
        let expected = if workload.kind() == "Deployment" {
            5
        } else {
            2
        };
        assert_eq!(sidecars, expected, "{}", workload.name());

        if workload.kind() == "DaemonSet" {
            // The socket as the kubelet sees it on the host.
            let (volume, rest) = served;
            let on_host = format!("{}{rest}", host_path(workload, &volume).unwrap());
            let registrar = containers(workload)
                .into_iter()
                .find(|c| c["name"] == "node-driver-registrar")
                .unwrap();
            assert_eq!(
                flag(&command_line(registrar), "--kubelet-registration-path").unwrap(),
                on_host
            );
        } else {
            assert!(pod_spec(workload)["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == served.0 && v["emptyDir"].is_object()));
        }
    }
}

#[test]
fn liveness_probes_ask_the_livenessprobe_sidecars_port() {
    let docs = objects();
    for workload in workloads(&docs) {
        let plugin = plugin(workload);
        let ports = plugin["ports"].as_array().unwrap();
        let healthz = ports.iter().find(|p| p["name"] == "healthz").unwrap();
        assert_eq!(plugin["livenessProbe"]["httpGet"]["port"], "healthz");
        let sidecar = containers(workload)
            .into_iter()
            .find(|c| c["name"] == "liveness-probe")
            .unwrap();
        let port = flag(&command_line(sidecar), "--health-port").unwrap();
        assert_eq!(
            healthz["containerPort"].to_string(),
            port,
            "{}",
            workload.name()
        );
    }
}

#[test]
fn sidecars_are_pinned_upstream_images() {
    let docs = objects();
    for workload in workloads(&docs) {
        for container in containers(workload) {
            let image = container["image"].as_str().unwrap();
            if image.starts_with("svs:") {
                continue;
            }
            let rest = image
                .strip_prefix("registry.k8s.io/sig-storage/")
                .unwrap_or_else(|| panic!("{image} is not an upstream sidecar"));
            let (_, tag) = rest.split_once(':').unwrap();
            let numbers: Vec<&str> = tag.trim_start_matches('v').split('.').collect();
            assert!(
                tag.starts_with('v')
                    && numbers.len() == 3
                    && numbers.iter().all(|n| n.parse::<u32>().is_ok()),
                "{image}: not a pinned release tag"
            );
        }
    }
    let controller = of_kind(&docs, "Deployment")[0];
    let provisioner = containers(controller)
        .into_iter()
        .find(|c| c["name"] == "csi-provisioner")
        .unwrap();
    let line = command_line(provisioner);
    assert!(line.contains(&"--feature-gates=Topology=true".to_string()));
    assert!(line.contains(&"--extra-create-metadata".to_string()));
}

#[test]
fn every_service_account_role_and_config_referenced_exists() {
    let docs = objects();
    let accounts: BTreeSet<(String, String)> = of_kind(&docs, "ServiceAccount")
        .iter()
        .map(|d| (d.namespace().unwrap().to_string(), d.name().to_string()))
        .collect();
    for workload in workloads(&docs) {
        let account = pod_spec(workload)["serviceAccountName"].as_str().unwrap();
        let key = (NAMESPACE.to_string(), account.to_string());
        assert!(
            accounts.contains(&key),
            "{}: no ServiceAccount {account}",
            workload.name()
        );
    }
    let mut bound = BTreeSet::new();
    for binding in docs
        .iter()
        .filter(|d| d.kind() == "RoleBinding" || d.kind() == "ClusterRoleBinding")
    {
        for subject in binding.value["subjects"].as_array().unwrap() {
            assert_eq!(subject["kind"], "ServiceAccount");
            let key = (
                subject["namespace"].as_str().unwrap().to_string(),
                subject["name"].as_str().unwrap().to_string(),
            );
            assert!(
                accounts.contains(&key),
                "{}: no ServiceAccount {key:?}",
                binding.name()
            );
            bound.insert(key.1);
        }
        let role = &binding.value["roleRef"];
        let role_kind = role["kind"].as_str().unwrap();
        assert!(
            docs.iter()
                .any(|d| d.kind() == role_kind && d.name() == role["name"]),
            "{}: no {role_kind} {}",
            binding.name(),
            role["name"]
        );
    }
    // The controller's sidecars are bound; the node needs no API access.
    assert!(bound.contains("svs-csi-controller"));
    assert!(!bound.contains("svs-csi-node"));
    // Every role is bound to someone.
    for role in docs
        .iter()
        .filter(|d| d.kind() == "Role" || d.kind() == "ClusterRole")
    {
        assert!(
            docs.iter()
                .any(|d| d.value["roleRef"]["name"] == role.name()
                    && d.value["roleRef"]["kind"] == role.kind()),
            "{} {} is bound to no one",
            role.kind(),
            role.name()
        );
    }

    // ConfigMaps referenced exist with the key; Secrets are the credentials.
    for workload in workloads(&docs) {
        for container in containers(workload) {
            for env in container["env"].as_array().cloned().unwrap_or_default() {
                let from = &env["valueFrom"];
                if let Some(name) = from["configMapKeyRef"]["name"].as_str() {
                    let key = from["configMapKeyRef"]["key"].as_str().unwrap();
                    assert!(
                        of_kind(&docs, "ConfigMap")
                            .iter()
                            .any(|c| c.name() == name && c.value["data"][key].is_string()),
                        "no ConfigMap {name} with {key}"
                    );
                }
                if let Some(name) = from["secretKeyRef"]["name"].as_str() {
                    assert_eq!(name, CREDENTIALS_SECRET);
                }
            }
        }
    }
}

#[test]
fn storage_classes_use_only_parameters_the_driver_knows() {
    let docs = objects();
    let mut by_name = BTreeMap::new();
    for class in of_kind(&docs, "StorageClass") {
        let parameters = class.value["parameters"].as_object().unwrap();
        for (key, value) in parameters {
            assert!(
                PARAMETERS.contains(&key.as_str()),
                "{}: unknown parameter {key}",
                class.name()
            );
            assert!(
                value.is_string(),
                "{}: {key} must be a string",
                class.name()
            );
        }
        assert!(parameters["policy"].is_string(), "{}", class.name());
        if let Some(t) = parameters.get("type") {
            assert!(t == "file" || t == "block", "{}: type {t}", class.name());
        }
        if let Some(fs) = parameters.get("filesystem") {
            assert!(
                fs == "ext4" || fs == "xfs",
                "{}: filesystem {fs}",
                class.name()
            );
        }
        assert_eq!(
            class.value["allowVolumeExpansion"],
            true,
            "{}",
            class.name()
        );
        assert_eq!(
            class.value["volumeBindingMode"],
            "WaitForFirstConsumer",
            "{}",
            class.name()
        );
        by_name.insert(class.name().to_string(), parameters.clone());
    }
    assert_eq!(by_name["svs-file"]["type"], "file");
    assert_eq!(by_name["svs-file"]["filesystem"], "xfs");
    assert_eq!(by_name["svs-block"]["type"], "block");
}

/// The long flags `svs csi <role> --help` lists, if the binary has that
/// subcommand yet.
fn flags_from_help(role: &str) -> Option<BTreeSet<String>> {
    let out = Command::new(env!("CARGO_BIN_EXE_svs"))
        .args(["csi", role, "--help"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn plugin_command_lines_use_only_flags_the_cli_has() {
    let docs = objects();
    for workload in workloads(&docs) {
        let plugin = plugin(workload);
        let line = command_line(plugin);
        let (role, design, required): (&str, &[&str], &[&str]) = match workload.kind() {
            "Deployment" => (
                "controller",
                CONTROLLER_FLAGS,
                &["--endpoint", "--url", "--email"],
            ),
            _ => (
                "node",
                NODE_FLAGS,
                &["--endpoint", "--node", "--zone", "--state-dir"],
            ),
        };
        assert_eq!(line[..3], ["svs", "csi", role]);
        let known: BTreeSet<String> = match flags_from_help(role) {
            Some(flags) => flags,
            None => {
                eprintln!("`svs csi {role} --help` failed: checking against csi-design.md");
                design.iter().map(|f| f.to_string()).collect()
            }
        };
        let used: Vec<String> = line[3..]
            .iter()
            .filter(|a| a.starts_with("--"))
            .map(|a| a.split('=').next().unwrap().to_string())
            .collect();
        for f in &used {
            assert!(known.contains(f), "`svs csi {role}` has no {f}");
            assert!(design.contains(&f.as_str()), "{f} is not in csi-design.md");
        }
        for f in required {
            assert!(used.iter().any(|u| u == f), "`svs csi {role}` without {f}");
        }
        // Every $(VAR) is defined in the container's env: Kubernetes
        // leaves an undefined one as it is.
        let env: BTreeSet<&str> = plugin["env"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["name"].as_str()).collect())
            .unwrap_or_default();
        for arg in &line {
            if let Some(var) = arg.strip_prefix("$(").and_then(|a| a.strip_suffix(')')) {
                assert!(
                    env.contains(var),
                    "{arg} is not in the env of `svs csi {role}`"
                );
            }
        }
    }
    // The password comes from the Secret through the environment, never a flag.
    let controller = plugin(of_kind(&docs, "Deployment")[0]);
    assert!(controller["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "SVS_CSI_PASSWORD"
            && e["valueFrom"]["secretKeyRef"]["name"] == CREDENTIALS_SECRET));
}

#[test]
fn the_node_plugin_has_the_privileges_it_needs_and_no_more() {
    let docs = objects();
    let node = of_kind(&docs, "DaemonSet")[0];
    let spec = pod_spec(node);
    assert_ne!(spec["hostPID"], true, "hostPID is not needed");
    assert_eq!(
        spec["hostNetwork"], true,
        "NBD exports open from the node's address"
    );
    let plugin = plugin(node);
    assert_eq!(plugin["securityContext"]["privileged"], true);
    let mounts = plugin["volumeMounts"].as_array().unwrap();
    let mount = |path: &str| {
        mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
    };
    assert_eq!(
        mount("/var/lib/kubelet")["mountPropagation"],
        "Bidirectional"
    );
    for (path, on_host) in [
        ("/var/lib/kubelet", "/var/lib/kubelet"),
        ("/dev", "/dev"),
        ("/sys/module", "/sys/module"),
        ("/var/lib/svs-csi", "/var/lib/svs-csi"),
    ] {
        let volume = mount(path)["name"].as_str().unwrap();
        assert_eq!(host_path(node, volume).as_deref(), Some(on_host));
    }
    assert_eq!(
        flag(&command_line(plugin), "--state-dir").as_deref(),
        Some("/var/lib/svs-csi")
    );
    // Only the node plugin is privileged.
    for workload in workloads(&docs) {
        for container in containers(workload) {
            if container["securityContext"]["privileged"] == true {
                assert_eq!(container["name"], "svs-csi-node");
            }
        }
    }
}

#[test]
fn the_container_build_has_the_tools_the_node_plugin_runs() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/Containerfile");
    let text = fs::read_to_string(file).unwrap();
    assert!(text.contains("FROM docker.io/library/rust:1-bookworm AS builder"));
    assert!(text.contains("cargo build --release --locked"));
    assert!(text.contains("FROM docker.io/library/debian:bookworm-slim"));
    for package in [
        "util-linux",
        "e2fsprogs",
        "xfsprogs",
        "fuse3",
        "ca-certificates",
    ] {
        assert!(text.contains(package), "{package} is not installed");
    }
}

/// The `[Service]` lines of a systemd unit in deploy/systemd, as (key, value).
fn unit_settings(file: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/systemd")
        .join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn unit_value(settings: &[(String, String)], key: &str) -> String {
    settings
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {key}="))
}

/// The long flags `svs <subcommand> --help` lists.
fn help_flags(subcommand: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_svs"))
        .args([subcommand, "--help"])
        .output()
        .expect("svs runs");
    assert!(out.status.success(), "svs {subcommand} --help");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| {
            w.trim_end_matches(',')
                .split('=')
                .next()
                .unwrap_or(w)
                .to_string()
        })
        .collect()
}

#[test]
fn the_systemd_units_run_svs_with_flags_it_has_and_keep_the_service_data_writable() {
    for (file, subcommand) in [
        ("svs.service", "serve"),
        ("svs-agent.service", "agent"),
        ("svs-storage-node.service", "storage-node"),
    ] {
        let settings = unit_settings(file);
        let exec = unit_value(&settings, "ExecStart");
        let words: Vec<&str> = exec.split_whitespace().collect();
        assert_eq!(
            words[..2],
            ["/usr/local/bin/svs", subcommand],
            "{file}: {exec}"
        );
        let known = help_flags(subcommand);
        for flag in words.iter().filter(|w| w.starts_with("--")) {
            assert!(
                known.contains(*flag),
                "{file}: svs {subcommand} has no {flag}"
            );
        }
    }
    // The data directory svs serve is given is the one systemd makes and
    // leaves writable under ProtectSystem=strict; media go under /srv/svs.
    let serve = unit_settings("svs.service");
    let exec = unit_value(&serve, "ExecStart");
    assert!(exec.contains("--data-dir /var/lib/svs"), "{exec}");
    assert_eq!(unit_value(&serve, "StateDirectory"), "svs");
    assert_eq!(unit_value(&serve, "ProtectSystem"), "strict");
    assert_eq!(unit_value(&serve, "ReadWritePaths"), "-/srv/svs");
    assert_eq!(unit_value(&serve, "NoNewPrivileges"), "yes");
    // File volumes: FUSE and loop devices stay reachable.
    let allowed: Vec<String> = serve
        .iter()
        .filter(|(k, _)| k == "DeviceAllow")
        .map(|(_, v)| v.clone())
        .collect();
    for device in ["/dev/fuse rw", "/dev/loop-control rw", "block-loop rw"] {
        assert!(allowed.iter().any(|a| a == device), "{allowed:?}");
    }
    assert!(!serve.iter().any(|(k, _)| k == "PrivateDevices"));
    // The storage node: its state under StateDirectory, media under
    // /srv/svs, no capability.
    let node = unit_settings("svs-storage-node.service");
    assert_eq!(unit_value(&node, "StateDirectory"), "svs-storage-node");
    assert_eq!(unit_value(&node, "ProtectSystem"), "strict");
    assert_eq!(unit_value(&node, "ReadWritePaths"), "-/srv/svs");
    assert_eq!(unit_value(&node, "CapabilityBoundingSet"), "");
}

#[test]
fn systemd_analyze_verify_accepts_the_units() {
    let available = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        eprintln!("systemd-analyze is not installed: not verifying the units");
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    for file in [
        "svs.service",
        "svs-agent.service",
        "svs-storage-node.service",
    ] {
        let text = fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("deploy/systemd")
                .join(file),
        )
        .expect("unit read");
        // verify wants the binary to exist: the one just built.
        let unit = tmp.path().join(file);
        fs::write(
            &unit,
            text.replace("/usr/local/bin/svs", env!("CARGO_BIN_EXE_svs")),
        )
        .expect("unit written");
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&unit)
            .output()
            .expect("systemd-analyze runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "{file}: {stderr}"
        );
    }
}

/// A file of the repository, by its path from the repository's root.
fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// One YAML document of the repository, as a JSON value.
fn yaml(path: &str) -> Value {
    let text = fs::read_to_string(repo_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path} does not parse: {e}"))
}

/// promtool: Debian's, or the first on PATH.
fn promtool() -> PathBuf {
    let debian = PathBuf::from("/usr/bin/promtool");
    if debian.is_file() {
        return debian;
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("promtool"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "promtool is not installed (neither /usr/bin/promtool nor on PATH): \
                 scripts/test.sh installs it with Debian's `prometheus` package"
            )
        })
}

/// `promtool check rules` and `promtool check config` accept the alert rules
/// and the scrape configuration, and `promtool test rules` passes the rules'
/// unit tests.
#[test]
fn the_alert_rules_pass_promtool() {
    let promtool = promtool();
    for args in [
        ["check", "rules", "deploy/prometheus/svs-alerts.yml"],
        ["test", "rules", "deploy/prometheus/svs-alerts.test.yml"],
        ["check", "config", "deploy/prometheus/prometheus.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {} failed ({}):\n{}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every alert of svs-alerts.yml has a case in svs-alerts.test.yml where it
/// fires (a non-empty `exp_alerts`) and one where it does not (an empty
/// one), and the tests name no alert the rules lack (promtool would pass a
/// test expecting nothing of an alert that does not exist).
#[test]
fn every_alert_rule_is_tested() {
    let rules = yaml("deploy/prometheus/svs-alerts.yml");
    let alerts: BTreeSet<String> = rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|rule| rule["alert"].as_str().map(str::to_string))
        .collect();
    assert!(
        alerts.len() >= 6,
        "only {} alerts: {alerts:?}",
        alerts.len()
    );

    let tests = yaml("deploy/prometheus/svs-alerts.test.yml");
    assert_eq!(tests["rule_files"], serde_json::json!(["svs-alerts.yml"]));
    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for group in tests["tests"].as_array().expect("tests") {
        for case in group["alert_rule_test"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            assert!(alerts.contains(&name), "a test of unknown alert {name}");
            // No `exp_alerts` at all expects no alert too, as for promtool.
            let expected = case["exp_alerts"].as_array().map_or(0, Vec::len);
            if expected == 0 {
                silent.insert(name);
            } else {
                firing.insert(name);
            }
        }
    }
    for alert in &alerts {
        assert!(firing.contains(alert), "no test where {alert} fires");
        assert!(
            silent.contains(alert),
            "no test where {alert} does not fire"
        );
    }
}

/// Every panel of a dashboard, those inside rows too.
fn all_panels(panels: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in panels.as_array().into_iter().flatten() {
        all.push(panel);
        all.extend(all_panels(&panel["panels"]));
    }
    all
}

/// The metric names a PromQL expression uses: `svs_*` and `process_*`
/// identifiers.
fn metric_names(expr: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = Vec::new();
    for (i, _) in expr.char_indices() {
        let rest = &expr[i..];
        if !(rest.starts_with("svs_") || rest.starts_with("process_")) {
            continue;
        }
        if expr[..i].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(rest.len());
        names.push(rest[..end].to_string());
    }
    names
}

/// The dashboard queries only metrics docs/metrics.md lists (a histogram's
/// `_bucket`, `_sum` and `_count` series by the histogram's name); its panel
/// ids are unique and every panel has a gridPos.
#[test]
fn the_dashboard_uses_only_exported_metrics() {
    let docs = fs::read_to_string(repo_file("docs/metrics.md")).expect("docs/metrics.md read");
    // The words in backticks; the metrics among them.
    let documented: BTreeSet<&str> = docs.split('`').skip(1).step_by(2).collect();
    let is_histogram = |name: &str| docs.contains(&format!("| `{name}` | histogram |"));

    let text = fs::read_to_string(repo_file("deploy/grafana/svs.json")).expect("dashboard read");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "svs");
    assert_eq!(dashboard["schemaVersion"], 39);
    let panels = all_panels(&dashboard["panels"]);
    assert!(panels.len() >= 20, "only {} panels", panels.len());

    let mut ids = BTreeSet::new();
    // Each metric used, with the first panel that uses it.
    let mut used = BTreeMap::new();
    for panel in &panels {
        let title = panel["title"].as_str().unwrap_or("?");
        let id = panel["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("panel {title} has no id"));
        assert!(ids.insert(id), "panel id {id} twice ({title})");
        let grid = &panel["gridPos"];
        assert!(
            ["h", "w", "x", "y"].iter().all(|k| grid[k].is_u64()),
            "panel {title} has no gridPos: {grid}"
        );
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("a target of panel {title} has no expr"));
            for name in metric_names(expr) {
                used.entry(name).or_insert(title);
            }
        }
    }
    assert!(used.len() >= 30, "only {} metrics used", used.len());
    for (name, title) in used {
        let histogram = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|base| is_histogram(base));
        let known = match histogram {
            Some(base) => documented.contains(base),
            None => documented.contains(name.as_str()),
        };
        assert!(known, "panel {title}: {name} is not in docs/metrics.md");
    }
}
