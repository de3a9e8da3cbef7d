//! The repository stands alone: a user clones it and nothing else. No tracked file may
//! point outside the checkout (a sibling `shared/` folder, a developer's absolute paths)
//! or cite design notes that are not in the repository.

use std::path::Path;
use std::process::Command;

/// Text that only makes sense on the authors' machines. Assembled from parts so that
/// this file does not contain the literals it forbids.
const FORBIDDEN: [&str; 6] = [
    concat!("..", "/shared"),
    concat!("/work", "/shared"),
    concat!("/work", "/main"),
    concat!("shared", "/seeds"),
    concat!("DESIGN", ".md"),
    concat!("DOMAIN", ".md"),
];

fn tracked_files(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .expect("utf-8 paths")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn no_tracked_file_refers_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = tracked_files(root);
    assert!(
        files.len() > 100,
        "expected the whole repository, got {} files",
        files.len()
    );
    let mut offenders = Vec::new();
    for file in &files {
        // Vendored upstream data is copied byte-for-byte.
        if file.starts_with("schemas/") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue; // binary or removed in the work tree
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(p) = FORBIDDEN.iter().find(|p| line.contains(**p)) {
                offenders.push(format!("{file}:{}: {p}", n + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "tracked files refer to paths or notes outside the repository:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn every_schema_the_tests_read_is_vendored_with_its_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("schemas/README.md")).unwrap();
    for entry in walk(&root.join("schemas")) {
        let rel = entry.strip_prefix(root.join("schemas")).unwrap();
        let rel = rel.to_string_lossy();
        if rel == "README.md" {
            continue;
        }
        assert!(
            readme.contains(&format!("`{rel}`")),
            "schemas/{rel} has no row (source, commit) in schemas/README.md"
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
