//! Platform policy: rule modes, mutation switches, opt-in grants, per-namespace
//! overrides and the instance catalog, loaded from a directory of YAML files
//! (embedded default compiled in).

mod effective;
mod file;
mod load;

use std::collections::BTreeMap;

use kube_core::{Selector, SelectorExt};

pub use file::{
    Defaults, Guarantee, LabelSelectorSpec, Mode, Mutations, NamespaceMatch, NamespaceOverride,
    NetworkProximity, OptInGrant, Placement, PolicyFile, Recognizers, RuleModes,
};

use crate::facts::requester::Requester;
use trainplace_catalog::Catalog;

/// The policy compiled into the binary (`policies/default.yaml`).
pub const EMBEDDED_POLICY: &str = include_str!("../../../../../policies/default.yaml");

/// Service-account groups of the controllers that create training pods, in the
/// namespaces their install manifests use: Volcano's controllers run in volcano-system
/// (https://github.com/volcano-sh/volcano/blob/ed72c7c815a9fd547a787134676f73d42e9d049c/installer/volcano-development.yaml),
/// the HyperPod training operator in aws-hyperpod
/// (https://github.com/aws/sagemaker-hyperpod-cli/blob/011ca927123e02b35a399935bbb3ab1905fe33c7/src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py).
/// KubeRay has no usual namespace: add its operator's group to `trustedControllerGroups`.
const DEFAULT_CONTROLLER_GROUPS: [&str; 8] = [
    "system:serviceaccounts:kube-system",
    "system:serviceaccounts:mpi-operator",
    "system:serviceaccounts:kubeflow",
    "system:serviceaccounts:kubeflow-system",
    "system:serviceaccounts:jobset-system",
    "system:serviceaccounts:lws-system",
    "system:serviceaccounts:volcano-system",
    "system:serviceaccounts:aws-hyperpod",
];

/// Opt-in annotations the policy governs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptIn {
    AllowPartialNode,
    AllowMultiAz,
    Skip,
    Reshape,
}

impl OptIn {
    pub fn annotation(self) -> &'static str {
        match self {
            OptIn::AllowPartialNode => crate::read::annotations::ALLOW_PARTIAL_NODE,
            OptIn::AllowMultiAz => crate::read::annotations::ALLOW_MULTI_AZ,
            OptIn::Skip => crate::read::annotations::SKIP,
            OptIn::Reshape => crate::read::annotations::RESHAPE,
        }
    }

    /// The opt-in an annotation names, if it names one.
    pub fn from_annotation(key: &str) -> Option<OptIn> {
        [
            OptIn::AllowPartialNode,
            OptIn::AllowMultiAz,
            OptIn::Skip,
            OptIn::Reshape,
        ]
        .into_iter()
        .find(|o| o.annotation() == key)
    }

    /// Its key under the policy's `optIns`.
    pub fn policy_key(self) -> &'static str {
        match self {
            OptIn::AllowPartialNode => "allowPartialNode",
            OptIn::AllowMultiAz => "allowMultiAz",
            OptIn::Skip => "skip",
            OptIn::Reshape => "reshape",
        }
    }

    /// What a refusal of this opt-in says: that it is set, who may use it, and where
    /// the platform team grants it.
    pub fn refused(self, policy: &Policy) -> String {
        format!(
            "{}: \"true\" is set, but the policy grants it to {} (ask the platform team: optIns.{}).",
            self.annotation(),
            policy.who_may(self),
            self.policy_key()
        )
    }
}

/// One YAML file of a policy directory, as read by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Where it came from (a path), for error messages.
    pub origin: String,
    pub text: String,
}

/// Everything the engine consults besides the object itself.
#[derive(Debug, Clone)]
pub struct Policy {
    file: PolicyFile,
    namespace_selectors: Vec<Option<Selector>>,
    training_selectors: Vec<Selector>,
    plugin_version: semver::Version,
    pub catalog: Catalog,
    warnings: Vec<String>,
}

/// The policy as it applies to one namespace.
#[derive(Debug, Clone)]
pub struct Effective<'p> {
    pub policy: &'p Policy,
    pub defaults: Defaults,
    pub modes: RuleModes,
    pub mutations: Mutations,
    pub plugin_version: semver::Version,
}

impl Effective<'_> {
    pub fn mode_partial_node(&self) -> Mode {
        self.modes.partial_node.unwrap_or(Mode::Enforce)
    }
    pub fn mode_multi_az(&self) -> Mode {
        self.modes.multi_az.unwrap_or(Mode::Enforce)
    }
    pub fn mode_unknown_instance_type(&self) -> Mode {
        self.modes.unknown_instance_type.unwrap_or(Mode::Warn)
    }
    pub fn mode_device_claims(&self) -> Mode {
        self.modes.device_claims.unwrap_or(Mode::Warn)
    }
    pub fn mode_capacity_block_ends(&self) -> Mode {
        self.modes.capacity_block_ends.unwrap_or(Mode::Warn)
    }
    /// How soon a block must stop a job that states no run time for a finding
    /// (`defaults.capacityBlockHorizon`, validated at load; default 24 h).
    pub fn capacity_block_horizon(&self) -> jiff::SignedDuration {
        self.defaults
            .capacity_block_horizon
            .as_deref()
            .and_then(|h| h.trim().parse().ok())
            .unwrap_or(jiff::SignedDuration::from_hours(24))
    }
    /// Whether a mutation is on; every mutation defaults to on.
    pub fn on(&self, pick: impl Fn(&Mutations) -> Option<bool>) -> bool {
        pick(&self.mutations).unwrap_or(true)
    }
}

impl Policy {
    /// The JSON Schema of a Policy file (`trainplace policy schema`,
    /// schemas/policy.schema.json).
    pub fn file_schema() -> serde_json::Value {
        file::json_schema()
    }
}

impl Policy {
    /// Deprecation notes about the file this policy came from (old key spellings).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether the requester may use an opt-in annotation. No grant = nobody may.
    pub fn may_opt_in(&self, opt: OptIn, who: &Requester<'_>) -> bool {
        let Some(grant) = self.grant(opt) else {
            return false;
        };
        let ns_ok = grant
            .namespaces
            .iter()
            .any(|n| n == "*" || n == who.namespace);
        let group_ok = grant
            .groups
            .iter()
            .any(|g| g == "*" || who.groups.iter().any(|have| have == g));
        ns_ok && group_ok
    }

    /// Who the policy grants an opt-in to, in words, for a message that refuses it:
    /// "namespaces research, any group", or "no one".
    pub fn who_may(&self, opt: OptIn) -> String {
        let Some(grant) = self
            .grant(opt)
            .filter(|g| !g.namespaces.is_empty() && !g.groups.is_empty())
        else {
            return "no one".into();
        };
        let list = |items: &[String], one: &str, any: &str| {
            if items.iter().any(|i| i == "*") {
                any.to_string()
            } else {
                format!("{one} {}", items.join(", "))
            }
        };
        format!(
            "{}, {}",
            list(&grant.namespaces, "namespaces", "any namespace"),
            list(&grant.groups, "groups", "any group")
        )
    }

    fn grant(&self, opt: OptIn) -> Option<&file::OptInGrant> {
        let o = self.file.opt_ins.as_ref()?;
        match opt {
            OptIn::AllowPartialNode => o.allow_partial_node.as_ref(),
            OptIn::AllowMultiAz => o.allow_multi_az.as_ref(),
            OptIn::Skip => o.skip.as_ref(),
            OptIn::Reshape => o.reshape.as_ref(),
        }
    }

    /// Whether the requester is a controller whose pods come from judged templates.
    pub fn trusted_controller(&self, who: &Requester<'_>) -> bool {
        let default = DEFAULT_CONTROLLER_GROUPS.map(String::from);
        let groups = self
            .file
            .trusted_controller_groups
            .as_deref()
            .unwrap_or(&default);
        who.groups.iter().any(|g| groups.contains(g))
    }

    /// Whether labels match one of the policy's extra training-pod selectors.
    pub fn training_selector_matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.training_selectors.iter().any(|s| s.matches(labels))
    }

    /// Which multi-pod recognisers are on.
    pub fn recognizers(&self) -> &Recognizers {
        &self.file.recognizers
    }

    /// The per-namespace overrides, in order.
    pub fn namespace_overrides(&self) -> &[NamespaceOverride] {
        self.file.namespaces.as_deref().unwrap_or_default()
    }

    /// The merged policy file (for exporting it as admission policies).
    pub(crate) fn file(&self) -> &PolicyFile {
        &self.file
    }

    /// Whether the deny rules run in strict mode (`guarantee: strict`).
    pub fn strict(&self) -> bool {
        self.file.guarantee == Some(Guarantee::Strict)
    }

    /// Whether an extended resource is listed as no accelerator
    /// (`nonAcceleratorResources`: names, or prefixes ending in `*`).
    pub fn non_accelerator(&self, resource: &str) -> bool {
        self.non_accelerators()
            .iter()
            .any(|n| match n.strip_suffix('*') {
                Some(prefix) => resource.starts_with(prefix),
                None => resource == n,
            })
    }

    /// The policy's `nonAcceleratorResources`, in file order.
    pub(crate) fn non_accelerators(&self) -> &[String] {
        self.file
            .non_accelerator_resources
            .as_deref()
            .unwrap_or_default()
    }

    /// The groups whose pods [`Policy::trusted_controller`] trusts.
    pub(crate) fn controller_groups(&self) -> Vec<String> {
        match &self.file.trusted_controller_groups {
            Some(groups) => groups.clone(),
            None => DEFAULT_CONTROLLER_GROUPS.map(String::from).to_vec(),
        }
    }
}

#[cfg(test)]
mod tests;
