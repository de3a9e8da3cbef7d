//! `kubectl trainplace` through krew: scripts/krew.sh packs the binary and writes the plugin
//! manifest; the pinned krew (tools/krew, built by scripts/test-deps.sh) installs it from
//! that manifest and archive, offline, into a krew root of its own; the real kubectl then
//! finds and runs the plugin. Without krew the test fails and says to run
//! scripts/test-deps.sh; it never skips.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

use common::root;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn krew_bin() -> PathBuf {
    let out = Command::new(root().join("scripts/go-tool.sh"))
        .args(["krew", "path"])
        .output()
        .expect("run scripts/go-tool.sh krew path");
    let bin = PathBuf::from(text(&out.stdout).trim());
    assert!(
        bin.is_file(),
        "krew is not built ({} missing): run scripts/test-deps.sh, which builds it from the pin in tools/krew once",
        bin.display()
    );
    bin
}

fn krew_sh(args: &[&str]) -> String {
    let out = Command::new(root().join("scripts/krew.sh"))
        .args(args)
        .output()
        .unwrap();
    ok(&format!("scripts/krew.sh {args:?}"), out)
}

/// The archives for linux/amd64 and darwin/arm64 (the same bytes: only the manifest's
/// shape is under test for the second), and the manifest for them.
fn package(dir: &Path) -> (PathBuf, PathBuf, Value) {
    let bin = env!("CARGO_BIN_EXE_trainplace");
    let d = dir.to_str().unwrap();
    let linux = PathBuf::from(krew_sh(&["archive", bin, "linux", "amd64", d]).trim());
    let darwin = krew_sh(&["archive", bin, "darwin", "arm64", d]);
    let yaml = krew_sh(&[
        "manifest",
        "v0.1.0",
        "https://releases.example.com/trainplace/v0.1.0/",
        linux.to_str().unwrap(),
        darwin.trim(),
    ]);
    let manifest = dir.join("trainplace.yaml");
    std::fs::write(&manifest, &yaml).unwrap();
    let value = Value::deserialize(serde_yaml_ng::Deserializer::from_str(&yaml)).unwrap();
    (linux, manifest, value)
}

#[test]
fn manifest_names_each_platform_with_its_archive_and_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let (linux, _, m) = package(tmp.path());
    assert_eq!(
        m["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(m["kind"], "Plugin");
    assert_eq!(m["metadata"]["name"], "trainplace");
    assert_eq!(m["spec"]["version"], "v0.1.0");
    let platforms = m["spec"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 2);
    let p = &platforms[0];
    assert_eq!(p["selector"]["matchLabels"]["os"], "linux");
    assert_eq!(p["selector"]["matchLabels"]["arch"], "amd64");
    assert_eq!(
        p["uri"],
        "https://releases.example.com/trainplace/v0.1.0/trainplace-linux-amd64.tar.gz"
    );
    let sum = Command::new("sha256sum").arg(&linux).output().unwrap();
    assert_eq!(
        p["sha256"].as_str().unwrap(),
        text(&sum.stdout).split_whitespace().next().unwrap()
    );
    assert_eq!(platforms[1]["selector"]["matchLabels"]["os"], "darwin");
    // The archive is reproducible: packing the same binary again gives the same bytes.
    let again = tempfile::tempdir().unwrap();
    let (linux2, _, _) = package(again.path());
    assert!(std::fs::read(&linux).unwrap() == std::fs::read(linux2).unwrap());
    // A version without the v is refused (krew requires it).
    let out = Command::new(root().join("scripts/krew.sh"))
        .args(["manifest", "0.1.0", "https://x/", linux.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn krew_installs_the_plugin_and_kubectl_runs_it() {
    let krew = krew_bin();
    let tmp = tempfile::tempdir().unwrap();
    let (linux, manifest, _) = package(tmp.path());
    let krew_root = tmp.path().join("krew-root");
    let out = Command::new(&krew)
        .arg("install")
        .arg(format!("--manifest={}", manifest.display()))
        .arg(format!("--archive={}", linux.display()))
        .env("KREW_ROOT", &krew_root)
        .env("KREW_OS", "linux")
        .env("KREW_ARCH", "amd64")
        .env("HOME", tmp.path())
        .output()
        .unwrap();
    ok("krew install --manifest --archive", out);
    let link = krew_root.join("bin/kubectl-trainplace");
    assert!(link.exists(), "krew linked {}", link.display());

    let path = format!(
        "{}:{}",
        krew_root.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let out = Command::new("kubectl")
        .args(["plugin", "list", "--name-only"])
        .env("PATH", &path)
        .output()
        .expect("kubectl is installed (scripts/test-deps.sh checks it)");
    assert!(
        text(&out.stdout).lines().any(|l| l == "kubectl-trainplace"),
        "kubectl finds the plugin: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // The plugin judges a manifest as `trainplace check` does: a one-GPU-per-pod job
    // across nodes is denied (exit 1) with the rule named.
    let job = root().join("tests/fixtures/workloads/job-one-gpu.yaml");
    let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&job).unwrap()).unwrap();
    let file = tmp.path().join("job.json");
    std::fs::write(&file, doc["object"].to_string()).unwrap();
    let out = Command::new("kubectl")
        .args(["trainplace", "check", "-f"])
        .arg(&file)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("partial-node"),
        "{}",
        text(&out.stdout)
    );
    // krew's record of the install (`krew list` needs the public index, not here).
    let receipt = std::fs::read_to_string(krew_root.join("receipts/trainplace.yaml")).unwrap();
    assert!(receipt.contains("version: v0.1.0"), "{receipt}");
}
