//! What the fixture-driven tests (fixtures.rs, and the VAP comparison through
//! vap_support) read around a fixture: the repository root, the policy a case names,
//! and the cluster directory it runs against.

use std::path::{Path, PathBuf};

use serde_json::Value;
use trainplace_engine::{Catalog, Policy, Snapshot};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The case's policy: a file under the repository, an inline policy, else the
/// embedded one.
pub fn policy(policy_file: Option<&str>, inline: Option<&Value>) -> Policy {
    if let Some(file) = policy_file {
        let text = std::fs::read_to_string(repo_root().join(file)).expect("policy file");
        return Policy::from_parts(&text, file, Catalog::embedded()).expect("policy loads");
    }
    if let Some(inline) = inline {
        let text = serde_yaml_ng::to_string(inline).unwrap();
        return Policy::from_parts(&text, "inline", Catalog::embedded()).expect("policy loads");
    }
    Policy::embedded()
}

/// One `kubectl get -o json` list of `tests/fixtures/cluster/NAME`; empty when absent.
pub fn cluster_list(name: &str, file: &str) -> Value {
    std::fs::read_to_string(
        repo_root()
            .join("tests/fixtures/cluster")
            .join(name)
            .join(file),
    )
    .map(|t| serde_json::from_str(&t).expect("valid JSON list"))
    .unwrap_or_else(|_| serde_json::json!({"items": []}))
}

/// The snapshot of cluster directory `name`: nodes, pods, namespaces and DRA objects.
pub fn cluster(name: &str) -> Snapshot {
    let list = |f: &str| cluster_list(name, f);
    let mut snapshot = Snapshot::from_lists(
        &list("nodes.json"),
        &list("pods.json"),
        &list("namespaces.json"),
    );
    for file in [
        "resourceclaimtemplates.json",
        "resourceclaims.json",
        "computedomains.json",
    ] {
        snapshot.add_claims(list(file)["items"].as_array().into_iter().flatten());
    }
    snapshot
}
