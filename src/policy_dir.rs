//! The policy directory on disk: which files count, reading them, and their
//! fingerprint. One scan serves the CLI, the server's start-up and its reload watcher,
//! so all three agree on which files make the policy. The engine parses what is read
//! here and does no I/O itself.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use trainplace_engine::{Policy, PolicyDocument, PolicyError};

use crate::cli::yaml::load::LoadError;

/// The files of a policy directory that count: visible `*.yaml` / `*.yml` entries,
/// sorted by name. Hidden entries (the `..data` links of a mounted ConfigMap) do not. A
/// single file given instead of a directory is the whole policy
/// (`--policy-dir examples/policy-strict.yaml`).
fn policy_files(dir: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    if dir.is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| PolicyError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"))
        })
        .collect();
    paths.sort();
    Ok(paths)
}

/// Read every file of the directory that counts.
pub fn read(dir: &Path) -> Result<Vec<PolicyDocument>, PolicyError> {
    policy_files(dir)?
        .into_iter()
        .map(|path| {
            let origin = path.display().to_string();
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok(PolicyDocument { origin, text }),
                Err(e) => Err(PolicyError::Io {
                    path: origin,
                    message: e.to_string(),
                }),
            }
        })
        .collect()
}

/// A fingerprint of what was read: names and contents, in order.
pub fn fingerprint(docs: &[PolicyDocument]) -> [u8; 32] {
    let mut h = Sha256::new();
    for d in docs {
        h.update(d.origin.as_bytes());
        h.update([0u8]);
        h.update(d.text.as_bytes());
        h.update([0u8]);
    }
    h.finalize().into()
}

/// Read and compile a policy directory; it must hold a `kind: Policy` file.
pub fn load(dir: &Path) -> Result<Policy, PolicyError> {
    let docs = read(dir)?;
    let policy = Policy::from_documents(&dir.display().to_string(), &docs)
        .map_err(|error| at_duplicate(error, &docs))?;
    for warning in policy.warnings() {
        tracing::warn!(%warning, "policy file uses a deprecated key");
    }
    Ok(policy)
}

/// A duplicate key located at the duplicate. The YAML parser the engine uses reports
/// it at the start of the mapping holding it, which is usually the first occurrence;
/// the manifest loader (`cli::yaml`) knows the line of each key.
fn at_duplicate(error: PolicyError, docs: &[PolicyDocument]) -> PolicyError {
    let PolicyError::Parse { origin, message } = &error else {
        return error;
    };
    if !message.contains("duplicate entry") {
        return error;
    }
    let Some(doc) = docs.iter().find(|d| origin.starts_with(&d.origin)) else {
        return error;
    };
    match crate::cli::yaml::load::documents(&doc.text) {
        Err(LoadError {
            line,
            duplicate: Some((name, first)),
            ..
        }) => PolicyError::Parse {
            origin: format!("{}:{line}", doc.origin),
            message: format!("duplicate key {name:?} (first at line {first}): remove one"),
        },
        _ => error,
    }
}

/// The policy from a directory when one is given, else the embedded default.
/// Read and compile one file for `policy check FILE`: a Policy file (with the embedded
/// catalog), or an InstanceCatalog file (with the embedded policy).
pub fn load_file(path: &Path) -> Result<Policy, PolicyError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| PolicyError::Io {
        path: origin.clone(),
        message: e.to_string(),
    })?;
    let is_policy = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Policy"));
    let mut docs = vec![PolicyDocument {
        origin: origin.clone(),
        text,
    }];
    if !is_policy {
        docs.insert(
            0,
            PolicyDocument {
                origin: "policies/default.yaml (embedded)".into(),
                text: trainplace_engine::EMBEDDED_POLICY.into(),
            },
        );
    }
    let policy =
        Policy::from_documents(&origin, &docs).map_err(|error| at_duplicate(error, &docs))?;
    Ok(policy)
}

pub fn load_or_embedded(dir: Option<&Path>) -> Result<Policy, PolicyError> {
    match dir {
        Some(dir) => load(dir),
        None => Ok(Policy::embedded()),
    }
}
