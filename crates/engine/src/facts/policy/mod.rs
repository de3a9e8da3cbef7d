//! Platform policy: rule modes, mutation switches, opt-in grants, per-namespace
//! overrides and the instance catalog, loaded from a directory of YAML files
//! (embedded default compiled in).

mod file;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube_core::{Selector, SelectorExt};

pub use file::{
    Defaults, LabelSelectorSpec, Mode, Mutations, NamespaceMatch, NamespaceOverride, OptInGrant,
    PolicyFile, Recognizers, RuleModes,
};

use crate::error::PolicyError;
use crate::facts::catalog::{Catalog, CatalogFile};
use crate::facts::requester::Requester;
use crate::read::yaml::{API_VERSION, parse_yaml};

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

fn selector(spec: &LabelSelectorSpec, origin: &str) -> Result<Selector, PolicyError> {
    let ls = LabelSelector {
        match_labels: Some(spec.match_labels.clone()),
        match_expressions: Some(
            spec.match_expressions
                .iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: Some(r.values.clone()),
                })
                .collect(),
        ),
    };
    Selector::try_from(ls).map_err(|e| PolicyError::Invalid {
        origin: origin.to_string(),
        message: format!("label selector: {e}"),
    })
}

fn invalid(origin: &str, message: String) -> PolicyError {
    PolicyError::Invalid {
        origin: origin.to_string(),
        message,
    }
}

/// Keys spelled as earlier releases did (`partial-node` for `partialNode`): still read,
/// reported so the file can be updated before the old spelling goes away.
fn deprecated_keys(raw: &serde_yaml_ng::Value, origin: &str) -> Vec<String> {
    let mut sections: Vec<(String, &serde_yaml_ng::Value)> = Vec::new();
    for key in ["rules", "optIns"] {
        if let Some(v) = raw.get(key) {
            sections.push((key.to_string(), v));
        }
    }
    if let Some(list) = raw.get("namespaces").and_then(|n| n.as_sequence()) {
        for (i, ns) in list.iter().enumerate() {
            if let Some(v) = ns.get("rules") {
                sections.push((format!("namespaces[{i}].rules"), v));
            }
        }
    }
    let mut out = Vec::new();
    for (at, section) in sections {
        let Some(map) = section.as_mapping() else {
            continue;
        };
        for key in map
            .keys()
            .filter_map(|k| k.as_str())
            .filter(|k| k.contains('-'))
        {
            out.push(format!(
                "{origin}: {at}.{key} is the deprecated spelling; write {at}.{} (camelCase, like every other key)",
                camel(key)
            ));
        }
    }
    out
}

fn camel(kebab: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in kebab.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn merge_opt<T: Clone>(base: &mut Option<T>, over: &Option<T>) {
    if over.is_some() {
        base.clone_from(over);
    }
}

impl Policy {
    /// The embedded default policy and catalog.
    pub fn embedded() -> Self {
        Self::from_parts(
            EMBEDDED_POLICY,
            "policies/default.yaml (embedded)",
            Catalog::embedded(),
        )
        .expect("embedded policy is validated by the test suite")
    }

    /// A policy file laid over the embedded default (see [`PolicyFile::over`]).
    pub fn from_parts(text: &str, origin: &str, catalog: Catalog) -> Result<Self, PolicyError> {
        let file: PolicyFile = parse_yaml(text, origin)?;
        let warnings = deprecated_keys(&parse_yaml(text, origin)?, origin);
        let embedded: PolicyFile = parse_yaml(EMBEDDED_POLICY, "policies/default.yaml (embedded)")?;
        let mut policy = Self::compile(file.over(&embedded), origin, catalog)?;
        policy.warnings = warnings;
        Ok(policy)
    }

    /// Deprecation notes about the file this policy came from (old key spellings).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn compile(file: PolicyFile, origin: &str, catalog: Catalog) -> Result<Self, PolicyError> {
        if file.api_version != API_VERSION || file.kind != "Policy" {
            return Err(invalid(
                origin,
                format!(
                    "expected apiVersion {API_VERSION} kind Policy, found {} {}",
                    file.api_version, file.kind
                ),
            ));
        }
        let check_defaults = |d: &Defaults, at: &str| -> Result<(), PolicyError> {
            if let Some(t) = &d.instance_type
                && catalog.get(t).is_none()
            {
                return Err(invalid(
                    origin,
                    format!("{at}defaults.instanceType {t:?} is not in the instance catalog"),
                ));
            }
            if let Some(s) = &d.shm_size {
                crate::read::quantity::parse_bytes(s)
                    .map_err(|e| invalid(origin, format!("{at}defaults.shmSize: {e}")))?;
            }
            if let Some(h) = &d.capacity_block_horizon {
                h.trim().parse::<jiff::SignedDuration>().map_err(|e| {
                    invalid(
                        origin,
                        format!("{at}defaults.capacityBlockHorizon {h:?} is not a duration (write e.g. 24h): {e}"),
                    )
                })?;
            }
            if let Some(v) = &d.aws_ofi_nccl_version {
                semver::Version::parse(v).map_err(|e| {
                    invalid(origin, format!("{at}defaults.awsOfiNcclVersion {v:?}: {e}"))
                })?;
            }
            Ok(())
        };
        check_defaults(&file.defaults, "")?;
        let mut namespace_selectors = Vec::new();
        for (i, ns) in file.namespaces.iter().flatten().enumerate() {
            let at = format!("namespaces[{i}].");
            check_defaults(&ns.defaults, &at)?;
            if ns.matches.names.is_empty() && ns.matches.selector.is_none() {
                return Err(invalid(
                    origin,
                    format!("{at}match needs names or a selector"),
                ));
            }
            namespace_selectors.push(match &ns.matches.selector {
                Some(s) => Some(selector(s, origin)?),
                None => None,
            });
        }
        let training_selectors = file
            .training_selectors
            .iter()
            .flatten()
            .map(|s| selector(s, origin))
            .collect::<Result<_, _>>()?;
        let plugin_version = file
            .defaults
            .aws_ofi_nccl_version
            .as_deref()
            .map(semver::Version::parse)
            .transpose()
            .map_err(|e| invalid(origin, e.to_string()))?
            .unwrap_or_else(|| semver::Version::new(1, 16, 0));
        Ok(Policy {
            file,
            namespace_selectors,
            training_selectors,
            plugin_version,
            catalog,
            warnings: Vec::new(),
        })
    }

    /// Build the policy from the YAML documents of a policy directory (`origin`), read
    /// by the caller (the engine does no I/O): exactly one `Policy` and any number of
    /// `InstanceCatalog`s (merged over the embedded catalog), in the order given.
    ///
    /// A directory without its Policy is an error, never the embedded default: the
    /// default grants every opt-in, so a lost or renamed file would quietly loosen a
    /// platform team's guardrails.
    pub fn from_documents(origin: &str, docs: &[Document]) -> Result<Self, PolicyError> {
        let mut catalog = Catalog::embedded();
        let mut policy: Option<&Document> = None;
        for doc in docs {
            let head: serde_yaml_ng::Value = parse_yaml(&doc.text, &doc.origin)?;
            match head.get("kind").and_then(|k| k.as_str()) {
                Some("Policy") => {
                    if let Some(first) = policy {
                        return Err(invalid(
                            &doc.origin,
                            format!(
                                "a second Policy file; {} is already the policy",
                                first.origin
                            ),
                        ));
                    }
                    policy = Some(doc);
                }
                Some("InstanceCatalog") => {
                    let file: CatalogFile = parse_yaml(&doc.text, &doc.origin)?;
                    catalog.merge(file, &doc.origin)?;
                }
                other => {
                    return Err(invalid(
                        &doc.origin,
                        format!("kind must be Policy or InstanceCatalog, found {other:?}"),
                    ));
                }
            }
        }
        match policy {
            Some(doc) => Self::from_parts(&doc.text, &doc.origin, catalog),
            None => Err(invalid(
                origin,
                "the policy directory has no `kind: Policy` file. Add one (a file with only \
                 `apiVersion: trainplace.io/v1alpha1` and `kind: Policy` means the embedded \
                 defaults), or run without --policy-dir for the embedded policy."
                    .into(),
            )),
        }
    }

    /// The policy as it applies to one namespace.
    pub fn effective(&self, who: &Requester<'_>) -> Effective<'_> {
        let mut defaults = self.file.defaults.clone();
        let mut modes = self.file.rules.clone();
        let mut mutations = self.file.mutations.clone();
        for (ns, sel) in self
            .namespace_overrides()
            .iter()
            .zip(&self.namespace_selectors)
        {
            if !self.namespace_matches(ns, sel.as_ref(), who) {
                continue;
            }
            merge_opt(&mut defaults.instance_type, &ns.defaults.instance_type);
            merge_opt(&mut defaults.shm_size, &ns.defaults.shm_size);
            merge_opt(
                &mut defaults.aws_ofi_nccl_version,
                &ns.defaults.aws_ofi_nccl_version,
            );
            merge_opt(&mut defaults.node_pools, &ns.defaults.node_pools);
            merge_opt(&mut defaults.efa_through_dra, &ns.defaults.efa_through_dra);
            merge_opt(
                &mut defaults.capacity_block_horizon,
                &ns.defaults.capacity_block_horizon,
            );
            merge_opt(&mut modes.partial_node, &ns.rules.partial_node);
            merge_opt(&mut modes.multi_az, &ns.rules.multi_az);
            merge_opt(
                &mut modes.unknown_instance_type,
                &ns.rules.unknown_instance_type,
            );
            merge_opt(&mut modes.device_claims, &ns.rules.device_claims);
            merge_opt(
                &mut modes.capacity_block_ends,
                &ns.rules.capacity_block_ends,
            );
            let m = &ns.mutations;
            merge_opt(&mut mutations.efa, &m.efa);
            merge_opt(&mut mutations.host_ipc, &m.host_ipc);
            merge_opt(&mut mutations.ipc_lock, &m.ipc_lock);
            merge_opt(&mut mutations.shm, &m.shm);
            merge_opt(&mut mutations.nccl_env, &m.nccl_env);
            merge_opt(&mut mutations.tolerations, &m.tolerations);
            merge_opt(&mut mutations.pin_instance_type, &m.pin_instance_type);
            merge_opt(&mut mutations.zone_affinity, &m.zone_affinity);
            merge_opt(&mut mutations.node_anti_affinity, &m.node_anti_affinity);
            merge_opt(&mut mutations.torchrun_env, &m.torchrun_env);
        }
        let plugin_version = defaults
            .aws_ofi_nccl_version
            .as_deref()
            .and_then(|v| semver::Version::parse(v).ok())
            .unwrap_or_else(|| self.plugin_version.clone());
        Effective {
            policy: self,
            defaults,
            modes,
            mutations,
            plugin_version,
        }
    }

    fn namespace_matches(
        &self,
        ns: &NamespaceOverride,
        sel: Option<&Selector>,
        who: &Requester<'_>,
    ) -> bool {
        let by_name = ns
            .matches
            .names
            .iter()
            .any(|n| n == who.namespace || n == "*");
        let by_label = match (sel, who.namespace_labels) {
            (Some(sel), Some(labels)) => sel.matches(labels),
            _ => false,
        };
        by_name || by_label
    }

    /// Whether the requester may use an opt-in annotation. No grant = nobody may.
    pub fn may_opt_in(&self, opt: OptIn, who: &Requester<'_>) -> bool {
        let Some(o) = &self.file.opt_ins else {
            return false;
        };
        let grant = match opt {
            OptIn::AllowPartialNode => &o.allow_partial_node,
            OptIn::AllowMultiAz => &o.allow_multi_az,
            OptIn::Skip => &o.skip,
            OptIn::Reshape => &o.reshape,
        };
        let Some(grant) = grant else { return false };
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
