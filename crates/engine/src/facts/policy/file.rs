//! The on-disk shape of a `Policy` file. Every struct rejects unknown keys so a typo is
//! an error with file:line rather than a silently ignored guardrail.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::read::recognize::Recognizers;

/// What a rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// The cluster gives EFA through the EFA DRA driver (DRANET, Kubernetes >= 1.34):
    /// pods claim it with a ResourceClaim of device class `efa.networking.k8s.aws` and
    /// nodes advertise no `vpc.amazonaws.com/efa`, so trainplace never adds that
    /// resource (the pod would stay Pending) and says how to claim EFA instead.
    /// https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html
    pub efa_through_dra: Option<bool>,
    /// Rule `capacity-block-ends` on a job that states no expected run time: report
    /// only a block whose pods stop within this long (a duration, e.g. `24h`; the
    /// default).
    pub capacity_block_horizon: Option<String>,
    /// The availability zone accelerator pods of this namespace are pinned to under
    /// `guarantee: strict` (the zone of the team's Capacity Block or reservation). The
    /// mutating webhook writes the pin; the validating webhook and the exported policies
    /// refuse an accelerator pod pinned anywhere else.
    pub zone: Option<String>,
    /// How a multi-node job's pods are held close in the AWS network, under the same
    /// network nodes (EKS's `topology.k8s.aws/network-node-layer-N` node labels).
    pub network_proximity: Option<NetworkProximity>,
}

/// Placement by network proximity (docs/guardrails.md, "Network proximity").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkProximity {
    /// `preferred` (default): weighted preferences from the most selective layer up, so
    /// a job that does not fit under one network node spills to the next layer.
    /// `required`: jobs of at most `requiredUpToPods` pods must be under one network
    /// node of `requiredLayer` (they stay Pending while no such node has room); larger
    /// jobs get the preferences. `off`: neither.
    pub placement: Option<Placement>,
    /// The layer `required` holds a job under: 1 (broadest) to 4; default 3.
    pub required_layer: Option<u8>,
    /// The largest job, in pods, that `required` applies to; default 16.
    pub required_up_to_pods: Option<u32>,
}

/// See [`NetworkProximity::placement`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Off,
    #[default]
    Preferred,
    Required,
}

/// What the deny rules rest on. `precise` (the default) reads a job's size and identity
/// from its workload, launcher and labels and trusts pods made from a template it
/// admitted; `strict` judges every pod and template on its own resources and node
/// selection only, with no marks and no inference (docs/security.md states each mode's
/// guarantee).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Guarantee {
    #[default]
    Precise,
    Strict,
}

/// Rule modes. Keys are camelCase like every other key; the kebab-case spelling of
/// earlier releases (`partial-node`) is still read, with a deprecation warning.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleModes {
    #[serde(alias = "partial-node")]
    pub partial_node: Option<Mode>,
    #[serde(alias = "multi-az")]
    pub multi_az: Option<Mode>,
    #[serde(alias = "unknown-instance-type")]
    pub unknown_instance_type: Option<Mode>,
    /// A training pod that claims devices through DRA `resourceClaims`, which trainplace
    /// cannot count yet (default warn).
    pub device_claims: Option<Mode>,
    /// A job expected to outlive its Capacity Block (default warn).
    pub capacity_block_ends: Option<Mode>,
}

/// Each mutation can be switched off by policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OptInGrant {
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// Opt-in grants (camelCase keys; `allow-partial-node` is read with a deprecation
/// warning). An opt-in without a grant is granted to nobody.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OptIns {
    #[serde(alias = "allow-partial-node")]
    pub allow_partial_node: Option<OptInGrant>,
    #[serde(alias = "allow-multi-az")]
    pub allow_multi_az: Option<OptInGrant>,
    pub skip: Option<OptInGrant>,
    pub reshape: Option<OptInGrant>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

/// A Kubernetes label selector (matchLabels and matchExpressions, ANDed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorSpec {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirement>,
}

/// Which namespaces an override applies to: any listed name, or the selector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceMatch {
    #[serde(default)]
    pub names: Vec<String>,
    pub selector: Option<LabelSelectorSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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

/// A `Policy` file. A section the file omits keeps the embedded default (see
/// [`PolicyFile::over`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyFile {
    #[schemars(extend("const" = "trainplace.io/v1alpha1"))]
    pub api_version: String,
    #[schemars(extend("const" = "Policy"))]
    pub kind: String,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub rules: RuleModes,
    #[serde(default)]
    pub mutations: Mutations,
    pub opt_ins: Option<OptIns>,
    /// Extra label selectors that mark a GPU pod as a training pod.
    pub training_selectors: Option<Vec<LabelSelectorSpec>>,
    /// Groups of the controllers that create pods from workload templates (the job
    /// controller, the Kubeflow, JobSet and LWS operators). Only their pods that carry
    /// trainplace's mark skip a second layout judgement; anyone else's are judged.
    pub trusted_controller_groups: Option<Vec<String>>,
    /// Applied in order; a later match overrides an earlier one field by field.
    pub namespaces: Option<Vec<NamespaceOverride>>,
    #[serde(default)]
    pub recognizers: Recognizers,
    /// `precise` (default) or `strict`: see [`Guarantee`].
    pub guarantee: Option<Guarantee>,
    /// Extended resources that are not accelerators (`name`, or a prefix ending in
    /// `*`). Under `guarantee: strict` every other extended resource outside the
    /// `kubernetes.io` domains counts as an accelerator.
    pub non_accelerator_resources: Option<Vec<String>>,
}

/// The JSON Schema (draft 2020-12) of a Policy file, from the types the reader reads it
/// with: every key, its type and its doc comment; unknown keys are refused as the reader
/// refuses them. Kebab-case spellings of earlier releases are read but not in it.
pub(super) fn json_schema() -> serde_json::Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(PolicyFile)).unwrap_or(serde_json::Value::Null);
    schema["title"] = "trainplace Policy".into();
    schema
}

fn keep<T: Clone>(over: &mut Option<T>, base: &Option<T>) {
    if over.is_none() {
        over.clone_from(base);
    }
}

impl PolicyFile {
    /// This file laid over `base` (the embedded policy). The merge rule: `defaults`,
    /// `rules`, `mutations` and `recognizers` merge key by key (a key the file sets wins); `optIns`,
    /// `trainingSelectors`, `trustedControllerGroups` and `namespaces` replace the
    /// base's whole when the file has them, and keep the base's when it does not. So a
    /// file that only sets `defaults.instanceType` changes nothing else, and a file that
    /// writes `optIns` decides every grant (an opt-in it leaves out is granted to nobody).
    pub fn over(mut self, base: &PolicyFile) -> PolicyFile {
        let (d, b) = (&mut self.defaults, &base.defaults);
        keep(&mut d.instance_type, &b.instance_type);
        keep(&mut d.aws_ofi_nccl_version, &b.aws_ofi_nccl_version);
        keep(&mut d.shm_size, &b.shm_size);
        keep(&mut d.node_pools, &b.node_pools);
        keep(&mut d.efa_through_dra, &b.efa_through_dra);
        keep(&mut d.capacity_block_horizon, &b.capacity_block_horizon);
        keep(&mut d.zone, &b.zone);
        keep(&mut d.network_proximity, &b.network_proximity);
        let (r, b) = (&mut self.rules, &base.rules);
        keep(&mut r.partial_node, &b.partial_node);
        keep(&mut r.multi_az, &b.multi_az);
        keep(&mut r.unknown_instance_type, &b.unknown_instance_type);
        keep(&mut r.device_claims, &b.device_claims);
        keep(&mut r.capacity_block_ends, &b.capacity_block_ends);
        let (m, b) = (&mut self.mutations, &base.mutations);
        keep(&mut m.efa, &b.efa);
        keep(&mut m.host_ipc, &b.host_ipc);
        keep(&mut m.ipc_lock, &b.ipc_lock);
        keep(&mut m.shm, &b.shm);
        keep(&mut m.nccl_env, &b.nccl_env);
        keep(&mut m.tolerations, &b.tolerations);
        keep(&mut m.pin_instance_type, &b.pin_instance_type);
        keep(&mut m.zone_affinity, &b.zone_affinity);
        keep(&mut m.node_anti_affinity, &b.node_anti_affinity);
        keep(&mut m.torchrun_env, &b.torchrun_env);
        let (r, b) = (&mut self.recognizers, &base.recognizers);
        keep(&mut r.command_line, &b.command_line);
        keep(&mut r.env_value_from, &b.env_value_from);
        keep(&mut r.ray, &b.ray);
        keep(&mut r.volcano, &b.volcano);
        keep(&mut self.opt_ins, &base.opt_ins);
        keep(&mut self.training_selectors, &base.training_selectors);
        keep(
            &mut self.trusted_controller_groups,
            &base.trusted_controller_groups,
        );
        keep(&mut self.namespaces, &base.namespaces);
        keep(&mut self.guarantee, &base.guarantee);
        keep(
            &mut self.non_accelerator_resources,
            &base.non_accelerator_resources,
        );
        self
    }
}
