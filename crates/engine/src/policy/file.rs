//! The on-disk shape of a `Policy` file. Every struct rejects unknown keys so a typo is
//! an error with file:line rather than a silently ignored guardrail.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Deny the request.
    Enforce,
    /// Allow; the client sees a warning.
    Warn,
    /// Allow; log and count only.
    Audit,
    /// Do not evaluate.
    Off,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Audit => "audit",
            Mode::Off => "off",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    /// Instance type assumed when a pod selects none and has no annotation.
    pub instance_type: Option<String>,
    /// aws-ofi-nccl version on the nodes; decides which NCCL/FI env is written.
    pub aws_ofi_nccl_version: Option<String>,
    /// /dev/shm size when no annotation sets one (else the instance's default).
    pub shm_size: Option<String>,
    /// Node groups / pools this namespace may use (`name` or `label=value`, matched
    /// against eks.amazonaws.com/nodegroup, karpenter.sh/nodepool and the capacity
    /// reservation label). Limits the GPU types the inventory offers a pod that names
    /// no instance type.
    pub node_pools: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RuleModes {
    pub partial_node: Option<Mode>,
    pub multi_az: Option<Mode>,
    pub unknown_instance_type: Option<Mode>,
}

/// Each mutation can be switched off by policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mutations {
    pub efa: Option<bool>,
    #[serde(rename = "hostIPC")]
    pub host_ipc: Option<bool>,
    pub ipc_lock: Option<bool>,
    pub shm: Option<bool>,
    pub nccl_env: Option<bool>,
    pub tolerations: Option<bool>,
    pub pin_instance_type: Option<bool>,
    pub zone_affinity: Option<bool>,
    pub node_anti_affinity: Option<bool>,
    pub torchrun_env: Option<bool>,
}

/// Who may use an opt-in annotation: the namespace must be listed (or `*`) and the
/// requesting user must be in a listed group (or `*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OptInGrant {
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct OptIns {
    pub allow_partial_node: Option<OptInGrant>,
    pub allow_multi_az: Option<OptInGrant>,
    pub skip: Option<OptInGrant>,
    pub reshape: Option<OptInGrant>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

/// A Kubernetes label selector (matchLabels and matchExpressions, ANDed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorSpec {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirement>,
}

/// Which namespaces an override applies to: any listed name, or the selector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceMatch {
    #[serde(default)]
    pub names: Vec<String>,
    pub selector: Option<LabelSelectorSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceOverride {
    #[serde(rename = "match")]
    pub matches: NamespaceMatch,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub rules: RuleModes,
    #[serde(default)]
    pub mutations: Mutations,
}

/// A `Policy` file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyFile {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub rules: RuleModes,
    #[serde(default)]
    pub mutations: Mutations,
    #[serde(default)]
    pub opt_ins: OptIns,
    /// Extra label selectors that mark a GPU pod as a training pod.
    #[serde(default)]
    pub training_selectors: Vec<LabelSelectorSpec>,
    /// Groups of the controllers that create pods from workload templates (the job
    /// controller, the Kubeflow, JobSet and LWS operators). Only their pods that carry
    /// trainplace's mark skip a second layout judgement; anyone else's are judged.
    pub trusted_controller_groups: Option<Vec<String>>,
    /// Applied in order; a later match overrides an earlier one field by field.
    #[serde(default)]
    pub namespaces: Vec<NamespaceOverride>,
}
