//! Loading a policy: a Policy file laid over the embedded default, checked (apiVersion,
//! defaults, selectors) and compiled; or a policy directory's documents with their
//! instance catalogs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube_core::Selector;

use super::{Defaults, Document, EMBEDDED_POLICY, LabelSelectorSpec, Policy, PolicyFile};
use crate::error::PolicyError;
use crate::read::yaml::{API_VERSION, parse_yaml};
use trainplace_catalog::{Catalog, CatalogFile};

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

    /// A policy file laid over the embedded default (see `PolicyFile::over`).
    pub fn from_parts(text: &str, origin: &str, catalog: Catalog) -> Result<Self, PolicyError> {
        let file: PolicyFile = parse_yaml(text, origin)?;
        let warnings = deprecated_keys(&parse_yaml(text, origin)?, origin);
        let embedded: PolicyFile = parse_yaml(EMBEDDED_POLICY, "policies/default.yaml (embedded)")?;
        let mut policy = Self::compile(file.over(&embedded), origin, catalog)?;
        policy.warnings = warnings;
        Ok(policy)
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
            if let Some(layer) = d.network_proximity.as_ref().and_then(|n| n.required_layer)
                && !(1..=4).contains(&layer)
            {
                return Err(invalid(
                    origin,
                    format!(
                        "{at}defaults.networkProximity.requiredLayer {layer}: EKS labels network layers 1 to 4"
                    ),
                ));
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
