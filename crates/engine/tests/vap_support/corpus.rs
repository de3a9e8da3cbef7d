//! The fixture corpus the equivalence test runs: `tests/fixtures/pods`, `workloads`,
//! `bypass` and `precise` under the restricted and the embedded default policy.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use trainplace_engine::Policy;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Case {
    pub policy_file: Option<String>,
    pub policy: Option<Value>,
    pub namespace_labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub groups: Vec<String>,
    pub cluster: Option<String>,
    pub object: Value,
    /// DRA objects submitted alongside the object.
    #[serde(default)]
    pub objects: Vec<Value>,
}

use super::fixture_env::repo_root;

pub fn policy_for(case: &Case) -> Policy {
    super::fixture_env::policy(case.policy_file.as_deref(), case.policy.as_ref())
}

/// Every fixture, named `dir/file` (bypass, precise: `dir/file@restricted|default`).
pub fn corpus() -> Vec<(String, Case)> {
    let mut out = Vec::new();
    for dir in ["pods", "workloads", "bypass", "precise"] {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(repo_root().join("tests/fixtures").join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
                .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.file_name().unwrap().to_string_lossy();
            let case: Case = serde_yaml_ng::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if dir == "bypass" || dir == "precise" {
                let mut restricted: Case = serde_yaml_ng::from_str(&text).unwrap();
                restricted.policy_file = Some("examples/policy-restricted.yaml".into());
                out.push((format!("{dir}/{file}@restricted"), restricted));
                out.push((format!("{dir}/{file}@default"), case));
            } else {
                out.push((format!("{dir}/{file}"), case));
            }
        }
    }
    out
}

/// The `cel` crate's parser and interpreter recurse; debug builds need more than the
/// test thread's default stack for the longest exported expressions.
pub fn with_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}
