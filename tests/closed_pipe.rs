//! Every command that prints ends quietly when its reader closes stdout early, as
//! `trainplace policy export --format vap | head -1` does: exit 0, no panic, no message
//! (src/cli/out.rs says why 0).

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};

use rstest::rstest;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

/// The write end of a pipe whose reader has already exited: the first write into it
/// fails with EPIPE, whatever the timing, so every case below takes the closed-pipe path.
fn pipe_without_reader() -> OwnedFd {
    let mut reader = Command::new("true")
        .stdin(Stdio::piped())
        .spawn()
        .expect("true runs");
    let writer = OwnedFd::from(reader.stdin.take().expect("piped stdin"));
    assert!(reader.wait().expect("true exits").success());
    writer
}

#[rstest]
#[case::check_text(&["check", "-f", "examples/pods/llama3-jobset-pods.yaml"])]
#[case::check_denied(&["check", "-f", "examples/pods/one-gpu-per-pod.yaml"])]
#[case::check_json(&["check", "-f", "examples/pods/llama3-jobset-pods.yaml", "-o", "json"])]
#[case::check_yaml(&["check", "-f", "examples/pods/llama3-jobset-pods.yaml", "-o", "yaml"])]
#[case::mutate(&["mutate", "-f", "examples/pods/llama3-jobset-pods.yaml"])]
#[case::mutate_diff(&["mutate", "-f", "examples/pods/llama3-jobset-pods.yaml", "--diff"])]
#[case::policy_export(&["policy", "export", "--format", "vap"])]
#[case::policy_export_json(&["policy", "export", "--format", "vap", "-o", "json"])]
#[case::policy_check(&["policy", "check", "policies"])]
#[case::policy_instances(&["policy", "instances"])]
#[case::audit(&["audit", "--from", "tests/fixtures/audit/cluster-objects.json"])]
#[case::audit_json(&["audit", "--from", "tests/fixtures/audit/cluster-objects.json", "-o", "json"])]
#[case::advise(&["advise", "--gpus", "16", "--days", "1"])]
#[case::advise_json(&["advise", "--gpus", "16", "--days", "1", "-o", "json"])]
#[case::diagnose(&["diagnose", "crates/diagnose/fixtures/p5_1pod_8gpu_p2p_cumem.log"])]
#[case::diagnose_json(&["diagnose", "crates/diagnose/fixtures/p5_1pod_8gpu_p2p_cumem.log", "-o", "json"])]
#[case::sandbox_nodes(&["sandbox", "nodes", "-f", "sandbox/fleet.yaml"])]
fn ends_quietly_on_a_closed_stdout(#[case] args: &[&str]) {
    let run = |stderr: Stdio, stdout: OwnedFd| {
        Command::new(BIN)
            .args(args)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .output()
            .expect("binary runs")
    };
    let closed = run(Stdio::piped(), pipe_without_reader());
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(0), "{args:?}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{args:?}: {stderr}"
    );

    // `2>&1 | head`: stderr is the same closed pipe, and the messages written to it
    // (mutate's report, warnings) must not panic either (exit 101).
    let pipe = pipe_without_reader();
    let both = run(Stdio::from(pipe.try_clone().expect("dup the pipe")), pipe);
    assert_eq!(both.status.code(), Some(0), "{args:?} with 2>&1");
}

/// The shell pipeline itself, under `pipefail`: `head` takes the first line and
/// closes; the export (150 KiB, more than a pipe buffers) must still end with 0.
#[test]
fn head_one_under_pipefail() {
    let out = Command::new("bash")
        .args([
            "-c",
            r#"set -o pipefail; "$0" policy export --format vap | head -1"#,
            BIN,
        ])
        .output()
        .expect("bash runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(stderr.is_empty(), "{stderr}");
}

/// A write that fails for another reason than a closed reader is still an error.
#[test]
fn a_full_disk_is_an_error() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(BIN)
        .args(["policy", "instances"])
        .stdout(full)
        .output()
        .expect("binary runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("writing to stdout"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
