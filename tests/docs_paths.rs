//! The repository paths the README and docs/ name exist (issue 49:
//! docs/architecture.md cited files that had been split or removed), and
//! docs/layout.md names every folder of `src/` and `crates/`.
//!
//! A path is a word, in backticks or in a fenced block, that starts with
//! one of the repository's top-level folders (`src/`, `crates/`, ...) or
//! is one of its root files; or a link's target (relative to its page).
//! What follows a path is not part of it: `:line`, `#anchor`, `::item`.
//! `{a,b}` expands to each; a glob (`src/fronts*`) must match something.
//! Paths git ignores (`e2e/artifacts/`: made by running the tests) need not
//! exist.

use std::path::{Component, Path};

/// Top-level folders a path may start with.
const FOLDERS: &[&str] = &[
    "src/", "crates/", "tests/", "docs/", "ui/", "e2e/", "bench/", "scripts/", "deploy/", ".ci/",
];
/// Root files a word may be.
const ROOT_FILES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    ".gitignore",
    ".dockerignore",
];
/// Not walked for globs: build output, dependencies, git.
const NOT_WALKED: &[&str] = &["target", ".git", "node_modules"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, as paths relative to the root.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A word as written, where it was, and whether it is a link's target.
struct Written {
    line: usize,
    word: String,
    link: bool,
}

/// The words in backticks and fenced blocks, and the links' targets.
fn written(markdown: &str) -> Vec<Written> {
    let mut out = Vec::new();
    let mut fence = false;
    for (i, line) in markdown.lines().enumerate() {
        let line_no = i + 1;
        let mut push = |word: &str, link: bool| {
            out.push(Written {
                line: line_no,
                word: word.to_string(),
                link,
            })
        };
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            line.split_whitespace().for_each(|w| push(w, false));
            continue;
        }
        // Odd pieces are inside backticks.
        for (n, piece) in line.split('`').enumerate() {
            if n % 2 == 1 {
                piece.split_whitespace().for_each(|w| push(w, false));
            }
        }
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            if let Some(end) = rest.find(')') {
                push(&rest[..end], true);
            }
        }
    }
    out
}

/// The word without the punctuation of the sentence or the code around it.
fn trimmed(word: &str) -> &str {
    word.trim_start_matches(['(', '[', '<', '"', '\'', '='])
        .trim_end_matches([')', ']', '>', '"', '\'', ',', ';', '.', ':', '!', '?'])
}

/// The path alone: no `#anchor`, `::item` or `:line`.
fn bare(path: &str) -> &str {
    let path = path.split('#').next().unwrap_or(path);
    let path = path.split("::").next().unwrap_or(path);
    match path.split_once(':') {
        Some((p, line)) if line.chars().all(|c| c.is_ascii_digit() || c == '-') => p,
        _ => path,
    }
}

fn repository_path(word: &str) -> bool {
    FOLDERS.iter().any(|f| word.starts_with(f)) || ROOT_FILES.contains(&word)
}

/// `a/{x,y}.rs` → `a/x.rs`, `a/y.rs` (each brace in turn).
fn expanded(path: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (path.find('{'), path.find('}')) else {
        return vec![path.to_string()];
    };
    if close < open {
        return vec![path.to_string()];
    }
    path[open + 1..close]
        .split(',')
        .flat_map(|part| expanded(&format!("{}{part}{}", &path[..open], &path[close + 1..])))
        .collect()
}

/// A link's target as a path from the root; None when it leaves the
/// repository.
fn from_root(page: &str, target: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let dir = Path::new(page).parent().unwrap_or(Path::new(""));
    for c in dir.join(target).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// Every file and folder of the repository, as paths from the root
/// (folders end in `/`).
fn tree() -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if NOT_WALKED.contains(&name.as_str()) {
                continue;
            }
            let path = format!("{prefix}{name}");
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(format!("{path}/"));
                walk(&e.path(), &format!("{path}/"), out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(root(), "", &mut out);
    out
}

/// Shell-style match: `*` any run and `?` one character, neither across
/// a `/`.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], text)
                || (text.first().is_some_and(|c| *c != b'/') && glob_match(pattern, &text[1..]))
        }
        (Some(b'?'), Some(c)) if *c != b'/' => glob_match(&pattern[1..], &text[1..]),
        (Some(p), Some(c)) if p == c => glob_match(&pattern[1..], &text[1..]),
        _ => false,
    }
}

/// Whether `gitignore`'s folder patterns (`/target`, `bench/out/`,
/// `artifacts/`) ignore `path`, from the .gitignore's folder.
fn ignored(path: &str, gitignore: &str) -> bool {
    gitignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains('*'))
        .any(|pattern| {
            let folder = pattern.trim_end_matches('/');
            if let Some(anchored) = folder.strip_prefix('/') {
                path == anchored || path.starts_with(&format!("{anchored}/"))
            } else if folder.contains('/') {
                path.starts_with(&format!("{folder}/"))
            } else {
                path.split('/').any(|part| part == folder)
            }
        })
}

/// Whether git ignores `path`, by the .gitignore of the root or of any
/// folder on its way (`e2e/.gitignore` has `artifacts/`).
fn ignored_anywhere(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    (0..parts.len()).any(|depth| {
        let folder = root().join(parts[..depth].join("/"));
        std::fs::read_to_string(folder.join(".gitignore"))
            .is_ok_and(|gitignore| ignored(&parts[depth..].join("/"), &gitignore))
    })
}

/// Whether `path` (from the root, a glob or not) names something.
fn exists(path: &str, tree: &[String]) -> bool {
    if path.contains(['*', '?']) {
        let pattern = path.trim_end_matches('/');
        return tree
            .iter()
            .any(|p| glob_match(pattern.as_bytes(), p.trim_end_matches('/').as_bytes()));
    }
    root().join(path).exists()
}

/// Each missing path as `page:line: word (path)`.
fn missing_paths() -> Vec<String> {
    let tree = tree();
    let mut missing = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).expect("page");
        for w in written(&text) {
            let word = trimmed(&w.word);
            let path = if w.link {
                if word.contains("://") || word.starts_with("mailto:") || word.starts_with('#') {
                    continue;
                }
                match from_root(&page, bare(word)) {
                    Some(p) => p,
                    None => {
                        missing.push(format!(
                            "{page}:{}: {word} (outside the repository)",
                            w.line
                        ));
                        continue;
                    }
                }
            } else {
                let path = bare(word);
                if !repository_path(path) {
                    continue;
                }
                path.to_string()
            };
            for one in expanded(&path) {
                if !exists(&one, &tree) && !ignored_anywhere(&one) {
                    missing.push(format!("{page}:{}: {word} ({one})", w.line));
                }
            }
        }
    }
    missing
}

#[test]
fn every_path_the_readme_and_docs_name_exists() {
    let missing = missing_paths();
    assert!(
        missing.is_empty(),
        "paths named in README.md or docs/ that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_layout_names_every_folder_of_src_and_crates() {
    let layout = std::fs::read_to_string(root().join("docs/layout.md")).expect("layout");
    // `src/x` named as a folder (`src/x/`, `src/x` alone) or as its module
    // file (`src/x.rs`).
    let named = |path: &str| {
        layout.match_indices(path).any(|(at, _)| {
            let after = &layout[at + path.len()..];
            after.is_empty()
                || after.starts_with(['/', ' ', '\n', '`', ')', ',', ';'])
                || after.starts_with(".rs")
        })
    };
    let mut unnamed = Vec::new();
    for top in ["src", "crates"] {
        let mut folders: Vec<String> = std::fs::read_dir(root().join(top))
            .expect("folder")
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| format!("{top}/{}", e.file_name().to_string_lossy()))
            .collect();
        folders.sort();
        unnamed.extend(folders.into_iter().filter(|f| !named(f)));
    }
    assert!(
        unnamed.is_empty(),
        "docs/layout.md does not name: {}",
        unnamed.join(", ")
    );
}

#[test]
fn paths_are_read_as_written() {
    assert_eq!(bare("src/api/mod.rs:120"), "src/api/mod.rs");
    assert_eq!(
        bare("src/jobs/slice_move.rs::copy_step"),
        "src/jobs/slice_move.rs"
    );
    assert_eq!(bare("docs/tls.md#auto"), "docs/tls.md");
    assert_eq!(trimmed("(src/x.rs),"), "src/x.rs");
    assert_eq!(trimmed(".ci/run"), ".ci/run");
    assert_eq!(expanded("src/{a,b}.rs"), vec!["src/a.rs", "src/b.rs"]);
    assert_eq!(
        from_root("docs/a.md", "../README.md").as_deref(),
        Some("README.md")
    );
    assert_eq!(from_root("README.md", "../x.md"), None);
    assert!(glob_match(b"src/fronts*", b"src/fronts_wire.rs"));
    assert!(!glob_match(b"src/*", b"src/api/mod.rs"));
    let gitignore = "/target\nbench/out/\nartifacts/\n";
    assert!(ignored("e2e/artifacts/shot.png", gitignore));
    assert!(ignored("target/debug/svs", gitignore));
    assert!(!ignored("src/api/mod.rs", gitignore));
    assert!(ignored_anywhere("e2e/artifacts/never-made.png"));
    assert!(!ignored_anywhere("e2e/never-made.png"));
}
