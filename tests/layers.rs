//! The layering rule, checked on the source: domain ← store / dataplane ←
//! jobs / services ← api ← app. Nothing lower imports anything higher, so no
//! module cycle can form between the layers.

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

const ABOVE_SERVICES: [&str; 6] = [
    "crate::agent",
    "crate::api",
    "crate::app",
    "crate::cli",
    "crate::client",
    "crate::reconcile",
];

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

#[test]
fn jobs_and_reconcilers_import_neither_services_nor_the_api() {
    let mut forbidden = vec!["crate::service"];
    forbidden.extend(ABOVE_SERVICES.iter().filter(|m| **m != "crate::reconcile"));
    assert_layer("src/jobs", &forbidden);
    assert_layer("src/reconcile", &forbidden);
    assert_layer(
        "src/exports.rs",
        &["crate::jobs", "crate::service", "crate::api"],
    );
    assert_layer("src/clock.rs", &["crate::"]);
    assert_layer("src/changes.rs", &["crate::"]);
}

#[test]
fn services_do_not_import_the_api_or_the_binary() {
    assert_layer("src/service", &ABOVE_SERVICES);
}

#[test]
fn the_api_does_not_import_the_binary() {
    assert_layer("src/api", &["crate::app", "crate::cli", "crate::client"]);
}

#[test]
fn the_agent_talks_to_the_service_over_http_only() {
    assert_layer(
        "src/agent",
        &[
            "crate::api",
            "crate::app",
            "crate::cli",
            "crate::client",
            "crate::service",
            "crate::jobs",
            "crate::reconcile",
            "crate::exports",
            "svs_store",
            "svs_dataplane",
        ],
    );
}

#[test]
fn the_csi_driver_talks_to_the_service_over_http_only() {
    assert_layer(
        "src/csi",
        &[
            "crate::service",
            "crate::api",
            "crate::jobs",
            "crate::app",
            "crate::reconcile",
            "svs_store",
            "svs_dataplane",
        ],
    );
}

#[test]
#[should_panic(expected = "layer check of")]
fn a_layer_check_of_a_path_that_does_not_exist_fails() {
    assert_layer("src/no_such_module", &["crate::api"]);
}

/// The data plane's modules, lowest first, each with the names `lib.rs`
/// re-exports from it (an import of `crate::Name` goes through those, which
/// would hide a cycle). A module may import the ones before it, never one
/// after it; `lib.rs`, the crate's root, holds the shared types and may use
/// every module.
const DATAPLANE_MODULES: [(&str, &[&str]); 13] = [
    ("fsutil", &[]),
    ("extents", &[]),
    ("throttle", &[]),
    ("usage", &[]),
    ("digest", &["digest_file"]),
    ("space", &[]),
    ("resume", &["CopyResume", "CopyStats", "CheckpointFn"]),
    ("snapshot", &["SliceSnapshots", "SnapshotInfo", "COW_CHUNK"]),
    ("copier", &[]),
    ("copy", &[]),
    (
        "volume",
        &[
            "LocalVolumeIo",
            "VolumeIo",
            "VolumeLayout",
            "Extent",
            "STRIPE",
        ],
    ),
    ("local", &["LocalMedia"]),
    ("probe", &[]),
];

/// The volume front end's submodules, lowest first (`mod.rs`, the root,
/// holds the `VolumeIo` trait and may use them all).
const VOLUME_MODULES: [(&str, &[&str]); 8] = [
    ("hooks", &[]),
    ("layout", &[]),
    ("device", &[]),
    ("slice", &[]),
    ("media", &[]),
    ("io", &[]),
    ("snapshots", &[]),
    ("live_copy", &[]),
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
