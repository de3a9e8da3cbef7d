//! The container image, built as users and the release workflow build it: without a
//! Docker daemon, by `scripts/image.sh` (crane, pinned in tools/crane). Built here with
//! `PROFILE=dev` (the release builds with `dist`; the image is otherwise the same).
//! Checked from the OCI layout it writes: platform, user, entrypoint, command, ports;
//! one layer holding only the binary, owned by root and executable; the binary statically
//! linked; and the binary, taken out of the layer, runs with nothing around it (in a
//! chroot of the layer alone when run as root, as CI is). The Dockerfile, which CI
//! cannot build (no container engine), is checked to build the same binary the same way
//! and to set the same user, entrypoint, command and ports.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::root;
use serde_json::Value;

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().expect("command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A blob of the OCI layout by its digest (`sha256:...`).
fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algo, hex) = digest.split_once(':').expect("algo:hex digest");
    layout.join("blobs").join(algo).join(hex)
}

fn json_blob(layout: &Path, digest: &str) -> Value {
    serde_json::from_slice(&std::fs::read(blob(layout, digest)).expect("blob")).expect("JSON blob")
}

struct Image {
    config: Value,
    layers: Vec<PathBuf>,
}

fn read_layout(layout: &Path) -> Image {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).expect("index.json"))
            .expect("index is JSON");
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "one image in the layout: {index}");
    let manifest = json_blob(layout, manifests[0]["digest"].as_str().unwrap());
    let config = json_blob(layout, manifest["config"]["digest"].as_str().unwrap());
    let layers = manifest["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| blob(layout, l["digest"].as_str().unwrap()))
        .collect();
    Image { config, layers }
}

/// `tar -tv` of a layer: (mode and owner, path) per entry.
fn listing(layer: &Path) -> Vec<(String, String)> {
    let out = run(Command::new("tar")
        .arg("--numeric-owner")
        .arg("-tvzf")
        .arg(layer));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (format!("{} {}", f[0], f[1]), f[f.len() - 1].to_string())
        })
        .collect()
}

#[test]
fn the_image_is_the_static_binary_alone_run_as_non_root() {
    let out = tempfile::tempdir().unwrap();
    run(Command::new(root().join("scripts/image.sh"))
        .arg(out.path())
        .env("PROFILE", "dev")
        .current_dir(root()));
    let image = read_layout(&out.path().join("oci"));
    let c = &image.config;
    assert_eq!(c["os"], "linux");
    assert_eq!(c["architecture"], "amd64");
    assert_eq!(c["config"]["User"], "65532:65532");
    assert_eq!(
        c["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/trainplace"])
    );
    assert_eq!(c["config"]["Cmd"], serde_json::json!(["serve"]));
    let ports: Vec<&String> = c["config"]["ExposedPorts"]
        .as_object()
        .expect("ports")
        .keys()
        .collect();
    assert_eq!(ports, ["8080/tcp", "8443/tcp"]);
    assert_eq!(image.layers.len(), 1, "one layer on an empty base");

    let entries = listing(&image.layers[0]);
    let files: Vec<&(String, String)> = entries.iter().filter(|(_, p)| !p.ends_with('/')).collect();
    assert_eq!(files.len(), 1, "only the binary: {entries:?}");
    assert_eq!(files[0].1, "usr/local/bin/trainplace");
    assert!(
        files[0].0.starts_with("-rwxr-xr-x 0/0"),
        "executable, owned by root: {:?}",
        files[0]
    );

    // Out of the layer, with nothing else: no interpreter, no libraries.
    let fs = out.path().join("rootfs");
    std::fs::create_dir(&fs).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&image.layers[0])
        .arg("-C")
        .arg(&fs));
    let bin = fs.join("usr/local/bin/trainplace");
    let headers = run(Command::new("readelf").arg("-l").arg(&bin));
    let headers = String::from_utf8_lossy(&headers.stdout);
    assert!(
        !headers.contains("Requesting program interpreter"),
        "statically linked:\n{headers}"
    );
    let pod = std::fs::read(root().join("examples/pods/one-gpu-per-pod.yaml")).unwrap();
    let check = |cmd: &mut Command| {
        use std::io::Write;
        let mut child = cmd
            .args(["check", "-f", "-"])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary from the layer starts");
        child.stdin.take().unwrap().write_all(&pod).unwrap();
        child.wait_with_output().unwrap()
    };
    // Root (CI) can chroot into the layer alone; anyone else runs it from an empty dir.
    let out = if is_root() {
        check(
            Command::new(on_path("chroot"))
                .arg(&fs)
                .arg("/usr/local/bin/trainplace"),
        )
    } else {
        check(Command::new(&bin).current_dir(out.path()))
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("DENIED") && stdout.contains("[partial-node]"),
        "{stdout}"
    );
}

/// A program's full path, since the check runs it with an empty environment.
fn on_path(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// The Dockerfile builds what scripts/image.sh builds and sets what it sets.
#[test]
fn the_dockerfile_builds_the_same_image() {
    let docker = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let script = std::fs::read_to_string(root().join("scripts/image.sh")).unwrap();
    for both in [
        "RUSTFLAGS=\"-C target-feature=+crt-static\" cargo build",
        "--target-dir",
        "-p trainplace --bin trainplace",
    ] {
        assert!(docker.contains(both), "Dockerfile lacks {both}");
        assert!(script.contains(both), "image.sh lacks {both}");
    }
    assert!(docker.contains("--profile dist"));
    assert!(script.contains("profile=\"${PROFILE:-dist}\""));
    assert!(docker.contains("FROM scratch"), "an empty base");
    assert_eq!(
        docker.matches("\nCOPY ").count(),
        2,
        "the build context, then the binary"
    );
    for (docker_line, script_flag) in [
        ("USER 65532:65532", "--user 65532:65532"),
        (
            "ENTRYPOINT [\"/usr/local/bin/trainplace\"]",
            "--entrypoint /usr/local/bin/trainplace",
        ),
        ("CMD [\"serve\"]", "--cmd serve"),
        ("EXPOSE 8443 8080", "--exposed-ports 8443/tcp,8080/tcp"),
    ] {
        assert!(
            docker.contains(docker_line),
            "Dockerfile lacks {docker_line}"
        );
        assert!(script.contains(script_flag), "image.sh lacks {script_flag}");
    }
}
