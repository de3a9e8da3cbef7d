//! The docs are a book that builds, and every internal link in it and in the README
//! resolves: `mdbook build docs` succeeds (mdBook pinned and installed by
//! scripts/test-deps.sh; missing, the test fails and says so), every page under docs/
//! is in docs/SUMMARY.md, and every relative link in docs/*.md and README.md names a
//! file that exists and, with `#anchor`, a heading that page has. The policy page's key
//! table lists every key the Policy reader accepts.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::root;

/// `MDBOOK=x.y.z` in scripts/test-deps.sh, the one pin.
fn mdbook_version() -> String {
    let script = std::fs::read_to_string(root().join("scripts/test-deps.sh")).unwrap();
    script
        .lines()
        .find_map(|l| l.strip_prefix("MDBOOK="))
        .expect("scripts/test-deps.sh pins MDBOOK=")
        .trim()
        .to_string()
}

/// Where scripts/test-deps.sh installs it: the cache outside the repository, keyed by
/// the version.
fn mdbook() -> PathBuf {
    let cache = std::env::var_os("TRAINPLACE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/trainplace")
        });
    cache
        .join(format!("mdbook-{}", mdbook_version()))
        .join("bin/mdbook")
}

#[test]
fn the_book_builds() {
    let bin = mdbook();
    assert!(
        bin.is_file(),
        "{} is missing: run scripts/test-deps.sh (it installs the pinned mdBook)",
        bin.display()
    );
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(&bin)
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .expect("mdbook runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "mdbook build failed:\n{stderr}");
    assert!(
        !stderr.contains("WARN") && !stderr.contains("ERROR"),
        "mdbook build warned:\n{stderr}"
    );
    assert!(out.path().join("index.html").is_file());
    assert!(out.path().join("rules.html").is_file());
}

#[test]
fn every_page_is_in_the_summary() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    for page in markdown_files(&docs) {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        if name == "SUMMARY.md" {
            continue;
        }
        assert!(
            listed.contains(&name),
            "docs/{name} is not in docs/SUMMARY.md"
        );
    }
}

#[test]
fn every_internal_link_and_anchor_resolves() {
    let mut files = markdown_files(&root().join("docs"));
    files.push(root().join("README.md"));
    let mut broken = Vec::new();
    for file in &files {
        broken.extend(check_file(file));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// docs/policy.md's table names every key the Policy file reader accepts, as the reader
/// itself lists them: `trainplace policy check` on a file with an unknown key in a
/// section answers with that section's keys (kebab-case spellings aside: deprecated).
#[test]
fn the_policy_page_lists_every_key() {
    let page = std::fs::read_to_string(root().join("docs/policy.md")).unwrap();
    let sections: [(&str, &str, &str); 7] = [
        ("", "bogus: 1\n", "`"),
        ("defaults", "defaults: {bogus: 1}\n", "`defaults."),
        ("rules", "rules: {bogus: 1}\n", "`rules."),
        ("mutations", "mutations: {bogus: 1}\n", "`mutations."),
        ("optIns", "optIns: {bogus: 1}\n", "`optIns."),
        ("recognizers", "recognizers: {bogus: 1}\n", "`recognizers."),
        ("namespaces", "namespaces: [{bogus: 1}]\n", "`namespaces[]."),
    ];
    for (section, body, prefix) in sections {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("policy.yaml"),
            format!("apiVersion: trainplace.io/v1alpha1\nkind: Policy\n{body}"),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["policy", "check"])
            .arg(dir.path())
            .output()
            .expect("trainplace runs");
        let err = String::from_utf8_lossy(&out.stderr);
        let list = err
            .split_once("expected one of ")
            .unwrap_or_else(|| panic!("{section}: no key list in {err}"))
            .1;
        let list = list.split(" at line").next().unwrap();
        let keys: Vec<&str> = list
            .split(", ")
            .map(|k| k.trim().trim_matches('`'))
            .filter(|k| !k.contains('-'))
            .collect();
        assert!(keys.len() > 2, "{section}: {keys:?}");
        for key in keys {
            assert!(
                page.contains(&format!("{prefix}{key}")),
                "docs/policy.md does not list {prefix}{key}`"
            );
        }
    }
}

/// The checker catches what it is for: a missing file, a missing anchor (on another
/// page and on the same one), and passes good links, links to code-fenced text aside.
#[test]
fn the_checker_finds_missing_files_and_anchors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("b.md"),
        "# Page B\n\n## Real heading: with `code`\n\n```\n## not a heading\n```\n",
    )
    .unwrap();
    let a = dir.path().join("a.md");
    std::fs::write(
        &a,
        "# A\n\n[ok](b.md) [ok](b.md#real-heading-with-code) [ok](#a) [ok](https://x.io/#y)\n\
         [gone](c.md) [no anchor](b.md#not-a-heading) [no anchor here](#nowhere)\n\
         `[in code](d.md)`\n```\n[fenced](e.md)\n```\n",
    )
    .unwrap();
    let broken = check_file(&a);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("c.md"));
    assert!(broken[1].contains("b.md#not-a-heading"));
    assert!(broken[2].contains("#nowhere"));
}

fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    out.sort();
    out
}

/// One line per link that does not resolve: `file:line: target (why)`.
fn check_file(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = file.parent().unwrap();
    let mut broken = Vec::new();
    for (line, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let here = format!("{}:{line}: {target}", file.display());
        let dest = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        if !dest.exists() {
            broken.push(format!("{here} (no such file)"));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if dest.extension().is_none_or(|e| e != "md") {
            continue; // an anchor into source or YAML is a line, not a heading
        }
        let page = std::fs::read_to_string(&dest).unwrap();
        if !anchors(&page).contains(anchor) {
            broken.push(format!("{here} (no heading with that anchor)"));
        }
    }
    broken
}

/// Lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((n + 1, line));
        }
    }
    out
}

/// Inline links `[text](target)` outside code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let mut in_code = false;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'`' => in_code = !in_code,
                b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                    if let Some(end) = line[i + 2..].find(')') {
                        let target = line[i + 2..i + 2 + end].trim();
                        let target = target.split_whitespace().next().unwrap_or("");
                        if !target.is_empty() {
                            out.push((n, target.to_string()));
                        }
                        i += 2 + end;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// The anchors of a page's headings as GitHub and mdBook make them: lower case, spaces
/// to `-`, everything but letters, digits, `-` and `_` dropped; a repeated one gets
/// `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = base.clone();
        let mut k = 1;
        while seen.contains(&anchor) {
            anchor = format!("{base}-{k}");
            k += 1;
        }
        seen.insert(anchor);
    }
    seen
}
