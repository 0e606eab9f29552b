//! The layering rule: domain ← store / dataplane ← the roles, each a crate
//! (common ← wire, front ← control ← api ← the binary; the storage node
//! beside the control plane; the agent, CSI and the client over HTTP only).
//! Cargo enforces the arrows a crate's manifest declares; this checks that
//! every manifest declares only the arrows allowed (a new dependency is a
//! change of the architecture, made here too), and what cargo cannot see:
//! the layers inside the control plane (jobs / reconcilers ← services) and
//! inside the data plane, and that no crate has an import cycle between its
//! modules.

use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir` (or `dir` itself when it is a file). A path
/// that does not exist fails the test: a check of a moved or renamed module
/// must not pass vacuously.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut files = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("layer check of {}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Lines of the files under `part` that name one of `forbidden`.
fn upward_imports(part: &str, forbidden: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for file in rust_files(&root.join(part)) {
        let text = fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for f in forbidden {
                if code.contains(f) {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    found
}

fn assert_layer(part: &str, forbidden: &[&str]) {
    let found = upward_imports(part, forbidden);
    assert!(
        found.is_empty(),
        "{part} imports a higher layer:\n{}",
        found.join("\n")
    );
}

/// The crates below the roles, grouped as the rules name them.
const PURE: &[&str] = &["svs-domain"];
/// Bytes on disks and wires: the data plane and what it builds on.
const IO: &[&str] = &[
    "svs-buffers",
    "svs-stream",
    "svs-sliceproto",
    "svs-nbd",
    "svs-hostdev",
    "svs-dataplane",
];
/// A host's block devices (the agent's and CSI's), without the data plane.
const HOST: &[&str] = &["svs-nbd", "svs-hostdev"];
const STORE: &[&str] = &["svs-store"];

/// Each crate (folder, package) and the groups of svs crates it may depend
/// on. Every crate of `crates/` is named (one missing fails the check).
const CRATES: [(&str, &str, &[&[&str]]); 20] = [
    ("crates/domain", "svs-domain", &[]),
    ("crates/buffers", "svs-buffers", &[]),
    ("crates/stream", "svs-stream", &[]),
    ("crates/store", "svs-store", &[PURE]),
    ("crates/nbd", "svs-nbd", &[&["svs-buffers", "svs-stream"]]),
    (
        "crates/sliceproto",
        "svs-sliceproto",
        &[&["svs-buffers", "svs-stream"]],
    ),
    (
        "crates/hostdev",
        "svs-hostdev",
        &[&["svs-nbd", "svs-buffers", "svs-stream"]],
    ),
    ("crates/csi", "svs-csi", &[]),
    ("crates/dataplane", "svs-dataplane", &[PURE, IO]),
    ("crates/common", "svs-common", &[PURE, IO]),
    ("crates/wire", "svs-wire", &[PURE, &["svs-common"]]),
    // A volume's front knows no store and no control plane.
    (
        "crates/front",
        "svs-front",
        &[PURE, IO, &["svs-common", "svs-wire"]],
    ),
    (
        "crates/control",
        "svs-control",
        &[PURE, IO, STORE, &["svs-common", "svs-wire", "svs-front"]],
    ),
    (
        "crates/api",
        "svs-api",
        &[
            PURE,
            IO,
            STORE,
            &["svs-common", "svs-wire", "svs-front", "svs-control"],
        ],
    ),
    // The storage node runs fronts, and talks to the control plane over
    // HTTP only: no store.
    (
        "crates/storage-node",
        "svs-storage-node",
        &[PURE, IO, &["svs-common", "svs-wire", "svs-front"]],
    ),
    // The agent, the client and CSI: over HTTP only, no store, no data
    // plane.
    (
        "crates/agent",
        "svs-agent",
        &[PURE, HOST, &["svs-common", "svs-wire"]],
    ),
    (
        "crates/client",
        "svs-client",
        &[PURE, HOST, &["svs-common", "svs-wire"]],
    ),
    (
        "crates/csi-driver",
        "svs-csi-driver",
        &[
            PURE,
            HOST,
            &[
                "svs-csi",
                "svs-common",
                "svs-wire",
                "svs-agent",
                "svs-client",
            ],
        ],
    ),
    // The command line: every role but `svs serve`'s HTTP face (its
    // commands start them; the offline ones work on the store).
    (
        "crates/cli",
        "svs-cli",
        &[
            PURE,
            STORE,
            &[
                "svs-dataplane",
                "svs-common",
                "svs-wire",
                "svs-control",
                "svs-storage-node",
                "svs-agent",
                "svs-client",
                "svs-csi-driver",
            ],
        ],
    ),
    // The binary: the command line, and `svs serve` over `svs-api`.
    (
        ".",
        "svs",
        &[&["svs-common", "svs-control", "svs-api", "svs-cli"]],
    ),
];

/// The svs crates a manifest's `[dependencies]` names.
fn svs_dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies {
            continue;
        }
        let name: String = line
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if name.starts_with("svs-") {
            found.push(name);
        }
    }
    found
}

#[test]
fn every_crate_depends_only_on_the_crates_its_role_may_use() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    for (folder, package, allowed) in CRATES {
        let manifest = fs::read_to_string(root.join(folder).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{folder}/Cargo.toml: {e}"));
        assert!(
            manifest.contains(&format!("name = \"{package}\"")),
            "{folder} is not the package {package}"
        );
        for dependency in svs_dependencies(&manifest) {
            if !allowed
                .iter()
                .any(|group| group.contains(&dependency.as_str()))
            {
                wrong.push(format!("{package} depends on {dependency}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows not in the architecture:\n{}",
        wrong.join("\n")
    );
    let mut unnamed = Vec::new();
    for entry in fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
    {
        let folder = format!("crates/{}", entry.file_name().to_string_lossy());
        if !CRATES.iter().any(|(f, _, _)| *f == folder) {
            unnamed.push(folder);
        }
    }
    assert!(unnamed.is_empty(), "crates with no rule here: {unnamed:?}");
}

#[test]
fn a_dependency_outside_the_dependencies_table_is_not_counted() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nsvs-common.workspace = true\n\
                    tokio = \"1\"\n[dev-dependencies]\nsvs-store = { workspace = true }\n";
    assert_eq!(svs_dependencies(manifest), ["svs-common"]);
}

#[test]
fn the_pure_crates_import_no_other_svs_crate_above_them() {
    assert_layer(
        "crates/domain",
        &["svs_store", "svs_dataplane", "svs_nbd", "svs::"],
    );
    assert_layer("crates/store", &["svs_dataplane", "svs_nbd", "svs::"]);
    assert_layer("crates/dataplane/src", &["svs_store", "svs::"]);
    assert_layer("crates/nbd/src", &["svs_store", "svs_dataplane", "svs::"]);
}

/// Inside the control plane: jobs and reconcilers below the services
/// (which call them), the jobs below the reconcilers.
#[test]
fn jobs_and_reconcilers_import_no_service() {
    assert_layer(
        "crates/control/src/jobs",
        &["crate::service", "crate::reconcile"],
    );
    assert_layer("crates/control/src/reconcile", &["crate::service"]);
    assert_layer(
        "crates/control/src/front_layout.rs",
        &["crate::jobs", "crate::service"],
    );
    assert_layer("crates/control/src/changes.rs", &["crate::"]);
}

#[test]
fn services_do_not_import_the_reconcilers() {
    assert_layer("crates/control/src/service", &["crate::reconcile"]);
}

/// The handlers do not reach into start-up (it wires them).
#[test]
fn the_api_does_not_import_the_start_up() {
    assert_layer("crates/api/src/api", &["crate::app"]);
}

#[test]
#[should_panic(expected = "layer check of")]
fn a_layer_check_of_a_path_that_does_not_exist_fails() {
    assert_layer("src/no_such_module", &["crate::control::api"]);
}

/// The data plane's modules, lowest first, each with the names `lib.rs`
/// re-exports from it (an import of `crate::Name` goes through those, which
/// would hide a cycle). A module may import the ones before it, never one
/// after it; `lib.rs`, the crate's root, holds the shared types and may use
/// every module.
const DATAPLANE_MODULES: [(&str, &[&str]); 15] = [
    ("fsutil", &[]),
    ("extents", &[]),
    ("throttle", &[]),
    ("usage", &[]),
    ("digest", &["digest_file"]),
    ("space", &[]),
    (
        "resume",
        &[
            "CopyResume",
            "CopyStats",
            "CheckpointFn",
            "LatestCheckpoint",
        ],
    ),
    ("snapshot", &["SliceSnapshots", "SnapshotInfo", "COW_CHUNK"]),
    ("copier", &[]),
    ("copy", &[]),
    (
        "volume",
        &[
            "LocalVolumeIo",
            "SliceCopyKind",
            "SliceMove",
            "VolumeIo",
            "VolumeLayout",
            "Extent",
            "STRIPE",
        ],
    ),
    ("local", &["LocalMedia"]),
    (
        "node",
        &[
            "NodeSlices",
            "FileEpochStore",
            "SharedSecret",
            "start_slice_server",
            "MAP_PAGE_BYTES",
        ],
    ),
    ("probe", &[]),
    (
        "remote",
        &["ClusterMedia", "NodeEndpoint", "DEFAULT_REQUEST_TIMEOUT"],
    ),
];

/// The volume front end's submodules, lowest first (`mod.rs`, the root,
/// holds the `VolumeIo` trait and may use them all).
const VOLUME_MODULES: [(&str, &[&str]); 9] = [
    ("hooks", &[]),
    ("layout", &[]),
    ("device", &[]),
    ("media", &[]),
    ("slice", &[]),
    ("io", &[]),
    ("snapshots", &[]),
    ("live_copy", &[]),
    ("slice_move", &[]),
];

/// The words of every `<prefix>` path in `text` (comments and test modules
/// left out): `use crate::{a, b::c}` gives `a`, `b`, `c`.
fn paths_after(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    let code: Vec<&str> = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let joined = code.join("\n");
    let mut words = Vec::new();
    let mut rest = joined.as_str();
    while let Some(at) = rest.find(prefix) {
        let line = joined[..joined.len() - rest.len() + at]
            .lines()
            .count()
            .max(1);
        let after = &rest[at + prefix.len()..];
        let end = if after.starts_with('{') {
            let mut depth = 0;
            after
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(after.len(), |(i, _)| i + 1)
        } else {
            after
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(after.len())
        };
        for word in after[..end].split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !word.is_empty() {
                words.push((line, word.to_string()));
            }
        }
        rest = &after[end..];
    }
    words
}

/// The source file of module `name` under `dir`: `name.rs` or
/// `name/mod.rs` with its submodules (their own test files left out).
/// A module that is not there fails the check.
fn module_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let file = dir.join(format!("{name}.rs"));
    let folder = dir.join(name);
    let files = if file.is_file() {
        vec![file]
    } else if folder.join("mod.rs").is_file() {
        rust_files(&folder)
    } else {
        panic!(
            "layer check of {}: no such module",
            dir.join(name).display()
        );
    };
    files
        .into_iter()
        .filter(|f| {
            let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            stem != "tests" && !stem.ends_with("_tests")
        })
        .collect()
}

/// Imports (through `prefix`) by each module of `order` of a module or a
/// re-exported name of a module after it.
fn upward_module_imports(dir: &Path, order: &[(&str, &[&str])], prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (rank, (module, _)) in order.iter().enumerate() {
        let higher: Vec<&str> = order[rank + 1..]
            .iter()
            .flat_map(|(m, names)| std::iter::once(*m).chain(names.iter().copied()))
            .collect();
        for file in module_files(dir, module) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            // Submodules of a folder module import each other by `super::`;
            // those are checked by that folder's own order.
            for (line, word) in paths_after(&text, prefix) {
                if higher.contains(&word.as_str()) {
                    found.push(format!("{}:{line}: {prefix}{word}", file.display()));
                }
            }
        }
    }
    found
}

fn assert_module_order(dir: &str, order: &[(&str, &[&str])], prefix: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let found = upward_module_imports(&root, order, prefix);
    assert!(
        found.is_empty(),
        "{dir}: a module imports one above it:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_data_planes_modules_import_only_modules_below_them() {
    assert_module_order("crates/dataplane/src", &DATAPLANE_MODULES, "crate::");
    assert_module_order("crates/dataplane/src/volume", &VOLUME_MODULES, "super::");
}

#[test]
fn an_import_of_a_higher_module_through_a_re_export_is_found() {
    let words = paths_after(
        "use crate::{digest::CHUNK, LocalMedia};\n// crate::local\nfn f() { crate::volume::eio(); }\n",
        "crate::",
    );
    let words: Vec<&str> = words.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(words, ["digest", "CHUNK", "LocalMedia", "volume", "eio"]);
}

#[test]
#[should_panic(expected = "layer check of")]
fn a_module_order_naming_a_module_that_does_not_exist_fails() {
    assert_module_order(
        "crates/dataplane/src",
        &[("fsutil", &[]), ("no_such_module", &[])],
        "crate::",
    );
}

/// What the module-cycle check sees of one module tree: each module's
/// source files and the item names it declares.
struct ModuleTree {
    /// Module name → its files (test files and test-only fixtures left out).
    files: std::collections::BTreeMap<String, Vec<PathBuf>>,
    /// Item name → the modules declaring it (a re-export through the root,
    /// `crate::Name`, is an import of the module that declares `Name`).
    declared: std::collections::BTreeMap<String, Vec<String>>,
}

/// Whether a file is test code (unit test files, test-only fixtures).
fn is_test_file(path: &Path) -> bool {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    stem == "tests" || stem.ends_with("_tests") || stem == "testing"
}

/// The children of folder `dir`: its `.rs` files and folders with a
/// `mod.rs`, except the folder's own root files.
fn module_tree(dir: &Path) -> ModuleTree {
    let mut files = std::collections::BTreeMap::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("layer check of {}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        if path.is_dir() && path.join("mod.rs").is_file() {
            if name == "testing" || name == "tests" {
                continue;
            }
            let module: Vec<PathBuf> = rust_files(&path)
                .into_iter()
                .filter(|f| !is_test_file(f))
                .collect();
            files.insert(name, module);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !is_test_file(&path)
            && !["lib", "main", "mod"].contains(&name.as_str())
        {
            files.insert(name, vec![path]);
        }
    }
    let mut declared: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (module, paths) in &files {
        for path in paths {
            let text = fs::read_to_string(path).unwrap_or_default();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            for line in code.lines() {
                let words: Vec<&str> = line
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .collect();
                if words.first() != Some(&"pub") {
                    continue;
                }
                let kinds = ["struct", "enum", "trait", "fn", "const", "type", "static"];
                if let Some(at) = words.iter().position(|w| kinds.contains(w)) {
                    if let Some(name) = words.get(at + 1) {
                        let owners = declared.entry(name.to_string()).or_default();
                        if !owners.contains(module) {
                            owners.push(module.clone());
                        }
                    }
                }
            }
        }
    }
    ModuleTree { files, declared }
}

/// The import graph between the children of folder `dir` of a crate:
/// `a → b` when a file of `a` names `b` (or an item only `b` declares)
/// through `prefix` (`crate::` for a crate's root folder, `super::` for a
/// folder module's children).
/// The first name of each path after `prefix` (of each path of a group,
/// `prefix{a::X, b}`): the module it enters, or an item re-exported there.
/// What follows the first name lies inside that module.
fn path_heads(text: &str, prefix: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    let code: Vec<&str> = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let joined = code.join("\n");
    let mut heads = Vec::new();
    let mut rest = joined.as_str();
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let word = |s: &str| -> String {
            s.trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        if let Some(group) = after.strip_prefix('{') {
            let (mut depth, mut start) = (0, 0);
            let mut end = group.len();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = i;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        heads.push(word(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            heads.push(word(&group[start..end]));
            rest = &group[end..];
        } else {
            heads.push(word(after));
            rest = after;
        }
    }
    heads.retain(|h| !h.is_empty());
    heads
}

fn import_graph(
    dir: &Path,
    prefix: &str,
    absolute: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let tree = module_tree(dir);
    let mut graph = std::collections::BTreeMap::new();
    for (module, paths) in &tree.files {
        let edges: &mut std::collections::BTreeSet<String> =
            graph.entry(module.clone()).or_default();
        for path in paths {
            // Only a module's root file (`x.rs`, `x/mod.rs`) reaches its
            // siblings through `super::`; deeper files' `super::` stays
            // inside the module.
            let root_file = path.parent() == Some(dir)
                || (path.file_name().is_some_and(|n| n == "mod.rs")
                    && path.parent().and_then(Path::parent) == Some(dir));
            if prefix == "super::" && !root_file {
                continue;
            }
            let text = fs::read_to_string(path).unwrap_or_default();
            let mut words = path_heads(&text, prefix);
            if prefix == "crate::" && root_file {
                words.extend(path_heads(&text, "super::"));
            }
            if prefix == "super::" {
                // `crate::a::b::sibling` from inside folder module `a::b`.
                words.extend(path_heads(&text, absolute));
            }
            for word in words {
                let target = if tree.files.contains_key(&word) {
                    Some(word.clone())
                } else {
                    match tree.declared.get(&word).map(Vec::as_slice) {
                        Some([only]) => Some(only.clone()),
                        _ => None,
                    }
                };
                if let Some(target) = target.filter(|t| t != module) {
                    edges.insert(target);
                }
            }
        }
    }
    graph
}

/// The cycles of a graph: its strongly connected components of more than
/// one module (Tarjan's algorithm), each sorted.
fn cycles(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        index: std::collections::BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        on_stack: std::collections::BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, node: &'g str) -> usize {
        let n = w.index.len();
        w.index.insert(node, (n, n));
        w.stack.push(node);
        w.on_stack.insert(node);
        let mut low = n;
        if let Some(next) = w.graph.get(node) {
            for to in next {
                let to = to.as_str();
                if !w.graph.contains_key(to) {
                    continue;
                }
                match w.index.get(to) {
                    None => low = low.min(visit(w, to)),
                    Some(&(i, _)) if w.on_stack.contains(to) => low = low.min(i),
                    Some(_) => {}
                }
            }
        }
        w.index.insert(node, (n, low));
        if low == n {
            let mut component = Vec::new();
            while let Some(top) = w.stack.pop() {
                w.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.found.push(component);
            }
        }
        low
    }
    let mut walk = Walk {
        graph,
        index: Default::default(),
        stack: Vec::new(),
        on_stack: Default::default(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

/// Every folder holding Rust modules under `dir` (itself included), with
/// the prefix its children import each other through.
fn module_folders(
    dir: &Path,
    prefix: &'static str,
    absolute: &str,
    out: &mut Vec<(PathBuf, &'static str, String)>,
) {
    out.push((dir.to_path_buf(), prefix, absolute.to_string()));
    if let Ok(entries) = fs::read_dir(dir) {
        let mut folders: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && p.join("mod.rs").is_file())
            .collect();
        folders.sort();
        for folder in folders {
            let name = folder.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let absolute = format!("{absolute}{name}::");
            module_folders(&folder, "super::", &absolute, out);
        }
    }
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    let crates = fs::read_dir(root.join("crates")).expect("crates/");
    let mut crate_dirs: Vec<PathBuf> = crates.flatten().map(|e| e.path().join("src")).collect();
    crate_dirs.sort();
    sources.extend(crate_dirs);
    let mut folders = Vec::new();
    for src in &sources {
        module_folders(src, "crate::", "crate::", &mut folders);
    }
    let mut found = Vec::new();
    for (folder, prefix, absolute) in &folders {
        for cycle in cycles(&import_graph(folder, prefix, absolute)) {
            found.push(format!("{}: {}", folder.display(), cycle.join(" ⇄ ")));
        }
    }
    assert!(
        folders.len() > 10,
        "too few module folders found: {folders:?}"
    );
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn a_cycle_between_two_modules_is_found() {
    let mut graph = std::collections::BTreeMap::new();
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
    graph.insert("a".to_string(), set(&["b"]));
    graph.insert("b".to_string(), set(&["c"]));
    graph.insert("c".to_string(), set(&["a"]));
    graph.insert("d".to_string(), set(&["a"]));
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
    graph.insert("c".to_string(), set(&[]));
    assert!(cycles(&graph).is_empty());
}
