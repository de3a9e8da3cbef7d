//! The policy directory on disk: which files count, reading them, and their
//! fingerprint. One scan serves the CLI, the server's start-up and its reload watcher,
//! so all three agree on which files make the policy. The engine parses what is read
//! here and does no I/O itself.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use trainplace_engine::{Policy, PolicyDocument, PolicyError};

/// The files of a policy directory that count: visible `*.yaml` / `*.yml` entries,
/// sorted by name. Hidden entries (the `..data` links of a mounted ConfigMap) do not.
fn policy_files(dir: &Path) -> Result<Vec<PathBuf>, PolicyError> {
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
    let policy = Policy::from_documents(&dir.display().to_string(), &read(dir)?)?;
    for warning in policy.warnings() {
        tracing::warn!(%warning, "policy file uses a deprecated key");
    }
    Ok(policy)
}

/// The policy from a directory when one is given, else the embedded default.
pub fn load_or_embedded(dir: Option<&Path>) -> Result<Policy, PolicyError> {
    match dir {
        Some(dir) => load(dir),
        None => Ok(Policy::embedded()),
    }
}
