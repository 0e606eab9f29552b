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
