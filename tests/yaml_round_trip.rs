//! YAML the way kubectl reads it, and YAML every reader reads back unchanged.
//!
//! - Input: for every manifest (examples, upstream examples, the YAML 1.1 scalar
//!   fixture), the real kubectl's reading (`kubectl label --local -o json`, no cluster
//!   needed) plus trainplace's patch equals trainplace's mutated object: trainplace
//!   read every untouched field exactly as kubectl does.
//! - Output: for every fixture, `trainplace mutate` YAML read by the real kubectl, by
//!   PyYAML `safe_load` (YAML 1.1) and by serde_yaml_ng (YAML 1.2) equals the `-o json`
//!   objects.

mod common;

use common::root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

fn trainplace(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(root())
        .output()
        .expect("binary runs")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).to_string()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let path = e.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
}

fn files(dirs: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dirs {
        walk(&root().join(d), &mut out);
    }
    // Vendored Helm chart sources are templates, not manifests.
    out.retain(|p| !p.components().any(|c| c.as_os_str() == "charts"));
    // `aws ec2 describe-capacity-reservations` output is a fixture, not a manifest.
    out.retain(|p| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        serde_json::from_str::<Value>(&text)
            .map_or(true, |v| v.get("CapacityReservations").is_none())
    });
    out.sort();
    out
}

/// A test case file (`description`, `expect`, `object`) holds its object under
/// `object`; everything else is a manifest as it is.
fn manifest_of(path: &Path, scratch: &Path) -> PathBuf {
    let raw = std::fs::read_to_string(path).unwrap();
    let case = serde_yaml_ng::from_str::<Value>(&raw).unwrap_or_default();
    if case.get("object").is_some() && case.get("kind").is_none() {
        let name = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('/', "_");
        let out = scratch.join(format!("{name}.json"));
        std::fs::write(&out, serde_json::to_vec(&case["object"]).unwrap()).unwrap();
        return out;
    }
    path.to_path_buf()
}

fn python() -> PathBuf {
    let p = root().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: run scripts/test-deps.sh (installs PyYAML)",
        p.display()
    );
    p
}

/// Compares each pair (YAML stream, `-o json` entries) under PyYAML, type by type
/// (Python's `True == 1` would hide a retyped value).
const PYYAML_COMPARE: &str = r#"
import json, sys, yaml
def same(a, b, path):
    if isinstance(a, bool) or isinstance(b, bool):
        ok = type(a) is type(b) and a == b
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        ok = a == b
    elif isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys differ: {sorted(map(str, a.keys() ^ b.keys()))}"
        for k in a:
            d = same(a[k], b[k], f"{path}.{k}")
            if d: return d
        return None
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b): return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d: return d
        return None
    else:
        ok = type(a) is type(b) and a == b
    return None if ok else f"{path}: YAML gives {a!r} ({type(a).__name__}), JSON {b!r} ({type(b).__name__})"
bad = 0
for name, y, j in json.load(open(sys.argv[1])):
    docs = [d for d in yaml.safe_load_all(open(y)) if d is not None]
    want = [e["object"] for e in json.load(open(j)) if e["allowed"]]
    d = same(docs, want, name)
    if d:
        bad += 1
        print(d)
sys.exit(1 if bad else 0)
"#;

#[test]
fn mutate_output_reads_back_the_same_in_kubectl_pyyaml_and_yaml_1_2() {
    let scratch = tempfile::tempdir().unwrap();
    let all = files(&["tests/fixtures", "crates/engine/tests/fixtures", "examples"]);
    assert!(all.len() > 150, "only {} fixture files", all.len());
    let mut pairs = Vec::new();
    for (i, path) in all.iter().enumerate() {
        let input = manifest_of(path, scratch.path());
        let input = input.to_str().unwrap();
        let yaml = trainplace(&["mutate", "-f", input]);
        let json = trainplace(&["mutate", "-f", input, "-o", "report-json"]);
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        assert_ne!(
            yaml.status.code(),
            Some(2),
            "{name}: {}",
            text(&yaml.stderr)
        );
        assert!(!text(&yaml.stderr).contains("panicked"), "{name}");
        let entries: Vec<Value> = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", text(&json.stderr)));
        let allowed: Vec<&Value> = entries
            .iter()
            .filter(|e| e["allowed"] == true)
            .map(|e| &e["object"])
            .collect();
        let yaml12: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text(&yaml.stdout))
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .filter(|v: &Value| !v.is_null())
            .collect();
        assert_eq!(
            yaml12.len(),
            allowed.len(),
            "{name}: denied objects stay off stdout"
        );
        for (got, want) in yaml12.iter().zip(&allowed) {
            assert_eq!(got, *want, "{name}: YAML 1.2 reading differs");
        }
        let read_by_kubectl = kubectl_reading_of(&yaml.stdout);
        assert_eq!(read_by_kubectl.len(), allowed.len(), "{name}");
        for (mut got, want) in read_by_kubectl.into_iter().zip(&allowed) {
            drop_added_metadata(&mut got, want);
            assert_eq!(
                &got, *want,
                "{name}: kubectl reads mutate's output differently"
            );
        }
        let (y, j) = (
            scratch.path().join(format!("{i}.yaml")),
            scratch.path().join(format!("{i}.json")),
        );
        std::fs::write(&y, &yaml.stdout).unwrap();
        std::fs::write(&j, &json.stdout).unwrap();
        pairs.push((name, y, j));
    }
    let list = scratch.path().join("pairs.json");
    std::fs::write(&list, serde_json::to_vec(&pairs).unwrap()).unwrap();
    let o = Command::new(python())
        .args(["-c", PYYAML_COMPARE])
        .arg(&list)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "PyYAML (YAML 1.1) reads mutate's output differently:\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

/// The objects `kubectl label --local -o json` prints for `path`: kubectl's own
/// reading of the file (no cluster needed).
fn kubectl_reading(path: &Path) -> Vec<Value> {
    kubectl_label(path.as_os_str(), None, &path.display().to_string())
}

/// The same for YAML text on stdin; empty text holds no objects.
fn kubectl_reading_of(yaml: &[u8]) -> Vec<Value> {
    if yaml.is_empty() {
        return Vec::new();
    }
    kubectl_label("-".as_ref(), Some(yaml), "stdin")
}

fn kubectl_label(file: &std::ffi::OsStr, stdin: Option<&[u8]>, what: &str) -> Vec<Value> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("kubectl")
        .args(["label", "--local", "-o", "json", "-f"])
        .arg(file)
        .arg("trainplace-test-none-")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed (scripts/test-deps.sh checks)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or_default())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "kubectl reading {what}: {}",
        text(&o.stderr)
    );
    serde_json::Deserializer::from_slice(&o.stdout)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

/// Removing a label, kubectl adds an empty `metadata.labels` (and `metadata`).
fn drop_added_metadata(object: &mut Value, reference: &Value) {
    if object["metadata"]["labels"] == serde_json::json!({})
        && reference["metadata"].get("labels").is_none()
    {
        object["metadata"].as_object_mut().unwrap().remove("labels");
    }
    if object["metadata"] == serde_json::json!({}) && reference.get("metadata").is_none() {
        object.as_object_mut().unwrap().remove("metadata");
    }
}

#[test]
fn trainplace_reads_yaml_as_kubectl_does() {
    let all = files(&[
        "examples",
        "tests/fixtures/upstream",
        "tests/fixtures/yaml11",
    ]);
    assert!(all.len() > 45, "only {} manifests", all.len());
    for path in &all {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        let o = trainplace(&["mutate", "-f", path.to_str().unwrap(), "-o", "report-json"]);
        let entries: Vec<Value> = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", text(&o.stderr)));
        let mut theirs = kubectl_reading(path);
        // trainplace's own configuration (a Policy) is named on stderr, not judged.
        theirs.retain(|o| {
            !(o["apiVersion"]
                .as_str()
                .is_some_and(|a| a.starts_with("trainplace.io/"))
                && ["Policy", "InstanceCatalog", "SandboxFleet"]
                    .contains(&o["kind"].as_str().unwrap_or("")))
        });
        assert_eq!(theirs.len(), entries.len(), "{name}: object count");
        for (mut object, entry) in theirs.into_iter().zip(&entries) {
            drop_added_metadata(&mut object, &entry["object"]);
            let patch: json_patch::Patch = serde_json::from_value(entry["patch"].clone()).unwrap();
            json_patch::patch(&mut object, &patch).unwrap_or_else(|e| {
                panic!("{name}: patch does not apply to kubectl's reading: {e}")
            });
            assert_eq!(
                object, entry["object"],
                "{name}: trainplace read a field differently from kubectl"
            );
        }
    }
}

#[test]
fn the_yaml_11_fixture_means_what_kubectl_means() {
    let o = trainplace(&[
        "mutate",
        "-f",
        "tests/fixtures/yaml11/scalars.yaml",
        "-o",
        "report-json",
    ]);
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let pod = &entries[0]["object"];
    assert_eq!(pod["spec"]["volumes"][0]["configMap"]["defaultMode"], 493);
    assert_eq!(pod["metadata"]["annotations"]["example.com/enabled"], "on");
    let plain = &entries[1]["object"]["data2"];
    for (key, want) in [
        ("octal", serde_json::json!(493)),
        ("hex", serde_json::json!(16)),
        ("exponent", serde_json::json!(1000)),
        ("short-yes", serde_json::json!(true)),
        ("true", serde_json::json!(true)),
        ("493", serde_json::json!("octal key")),
        ("sexagesimal", serde_json::json!("1:30")),
        ("date", serde_json::json!("2025-01-01")),
    ] {
        assert_eq!(plain[key], want, "{key}");
    }
    let yaml = text(&trainplace(&["mutate", "-f", "tests/fixtures/yaml11/scalars.yaml"]).stdout);
    for line in [
        "example.com/enabled: 'on'",
        "example.com/short: 'y'",
        "example.com/duration: '1:30'",
        "example.com/date: '2025-01-01'",
        "example.com/hex: '0x10'",
        "example.com/octal: '012'",
        "example.com/exponent: '1e3'",
        "example.com/tilde: '~'",
        "'2025-01-01': date key",
        "defaultMode: 493",
    ] {
        assert!(yaml.contains(line), "{line} missing:\n{yaml}");
    }
}

#[test]
fn duplicate_key_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("dup.yaml");
    std::fs::write(
        &f,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: x\n  name: b\n",
    )
    .unwrap();
    let o = trainplace(&["check", "-f", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("dup.yaml: document 1 (line 6): duplicate key \"name\" (first at line 4)"),
        "{err}"
    );
}
