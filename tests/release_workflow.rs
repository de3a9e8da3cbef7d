//! The release workflow (.github/workflows/release.yml) cannot run here: it needs GitHub's
//! runners, GHCR and a release to publish to. It is linted with actionlint (pinned in
//! tools/actionlint), which runs shellcheck on every `run:` script; scripts/test-deps.sh
//! installs shellcheck, and this test fails without it rather than lint less. A broken
//! copy of the workflow must fail the lint, so a linter that checks nothing fails too.
//! The workflow is also held to what a release must make: both architectures, the image
//! through scripts/image.sh, the chart as an OCI artifact, an SBOM and checksums.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::root;

fn actionlint() -> String {
    let out = Command::new(root().join("scripts/go-tool.sh"))
        .args(["actionlint", "path"])
        .output()
        .expect("go-tool.sh runs");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn lint(file: &Path) -> Output {
    let bin = actionlint();
    assert!(
        Path::new(&bin).is_file(),
        "actionlint is not built at {bin}: run scripts/test-deps.sh"
    );
    Command::new(bin)
        .arg("-shellcheck")
        .arg("shellcheck")
        .arg(file)
        .current_dir(root())
        .output()
        .expect("actionlint runs")
}

const WORKFLOW: &str = ".github/workflows/release.yml";

#[test]
fn the_release_workflow_passes_actionlint_with_shellcheck() {
    let shellcheck = Command::new("shellcheck").arg("--version").output();
    assert!(
        shellcheck.is_ok_and(|o| o.status.success()),
        "shellcheck is missing: run scripts/test-deps.sh (as root it installs the Debian package)"
    );
    let out = lint(&root().join(WORKFLOW));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The same workflow with a matrix key that does not exist and an unquoted expansion
    // in a script: both must be reported.
    let text = std::fs::read_to_string(root().join(WORKFLOW)).unwrap();
    let broken = text
        .replacen("matrix.arch }}\"", "matrix.arhc }}\"", 1)
        .replacen(
            "sha256sum -- * > SHA256SUMS",
            "sha256sum $FILES > SHA256SUMS",
            1,
        );
    assert_ne!(broken, text);
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::write(copy.join("release.yml"), broken).unwrap();
    let out = lint(&copy.join("release.yml"));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "the broken copy passed:\n{report}");
    assert!(report.contains("arhc"), "{report}");
    assert!(
        report.contains("SC2086"),
        "shellcheck ran on the scripts:\n{report}"
    );
}

#[test]
fn a_release_makes_both_architectures_the_chart_an_sbom_and_checksums() {
    let text = std::fs::read_to_string(root().join(WORKFLOW)).unwrap();
    for needed in [
        "arch: amd64",
        "arch: arm64",
        "scripts/image.sh",
        "index append",
        "package charts/trainplace",
        "push \"$RUNNER_TEMP/dist/trainplace-$version.tgz\" \"$CHART_REPO\"",
        "cargo cyclonedx",
        "SHA256SUMS",
        "gh release create",
    ] {
        assert!(text.contains(needed), "{WORKFLOW} lacks {needed}");
    }
}

/// What users download or build for use is the small binary: the release profile keeps no
/// debug info (it made a 146 MB binary with it), and the krew archives hold the static
/// `dist` binary that `scripts/image.sh` builds, not a debug-info build.
#[test]
fn what_ships_and_what_the_readme_builds_is_the_small_binary() {
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    // The lines of one `[profile.NAME]` table, up to the next table.
    let profile = |name: &str| -> Vec<String> {
        let head = format!("[profile.{name}]");
        cargo
            .lines()
            .skip_while(|l| l.trim() != head)
            .skip(1)
            .take_while(|l| !l.trim_start().starts_with('['))
            .map(|l| l.split('#').next().unwrap_or("").replace(' ', ""))
            .filter(|l| !l.is_empty())
            .collect()
    };
    let release = profile("release");
    for line in ["debug=false", "strip=\"debuginfo\""] {
        assert!(
            release.iter().any(|l| l == line),
            "[profile.release] must have {line} (no debug info in the binary users build): {release:?}"
        );
    }
    assert!(
        profile("dist").iter().any(|l| l == "inherits=\"release\""),
        "[profile.dist] inherits release"
    );
    let image = std::fs::read_to_string(root().join("scripts/image.sh")).unwrap();
    assert!(
        image.contains("profile=\"${PROFILE:-dist}\""),
        "scripts/image.sh builds dist"
    );
    let text = std::fs::read_to_string(root().join(WORKFLOW)).unwrap();
    assert!(
        text.contains("scripts/krew.sh archive \"$RUNNER_TEMP/out/trainplace\""),
        "{WORKFLOW}: the krew archive must pack the dist binary scripts/image.sh built"
    );
    assert!(
        text.contains("krew.sh\" manifest"),
        "{WORKFLOW}: no krew manifest"
    );
}
