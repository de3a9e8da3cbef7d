//! The webhook configurations registered by the server (`--register-webhooks FILE`), as
//! the policy engines that run at scale do it (Kyverno registers its own webhooks once it
//! serves): a fresh install registers nothing that could refuse a pod before a replica
//! can answer. Once this replica serves the Secret's certificate and the Service the
//! configurations call has a ready endpoint, both configurations of FILE are applied
//! (server-side apply, field manager `trainplace`) with the Secret's trust bundle as
//! every webhook's caBundle, and applied again on every check, which undoes drift.
//!
//! With `--webhook-owner CLUSTERROLE` they carry an ownerReference to that ClusterRole
//! (the chart's, which grants this very registration): deleting it (`helm uninstall`)
//! has the garbage collector delete them, so enforcement never outlives the install.
//! <https://kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/>

use std::path::{Path, PathBuf};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Deserialize;
use thiserror::Error;

/// `--register-webhooks` and `--webhook-owner`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub file: PathBuf,
    /// A ClusterRole's name: the configurations' owner.
    pub owner: Option<String>,
}

#[derive(Debug, Error)]
pub enum RegisterError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a webhook configuration: {source}")]
    Parse {
        path: PathBuf,
        source: serde_yaml_ng::Error,
    },
    #[error("{path}: {problem}")]
    Content { path: PathBuf, problem: String },
    #[error("the owner ClusterRole {name}: {source}")]
    Owner { name: String, source: kube::Error },
    #[error("the EndpointSlices of Service {namespace}/{name}: {source}")]
    Endpoints {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: &'static str,
        name: String,
        source: kube::Error,
    },
}

/// Both configurations as the file has them.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub mutating: MutatingWebhookConfiguration,
    pub validating: ValidatingWebhookConfiguration,
}

#[derive(Deserialize)]
struct Kind {
    kind: Option<String>,
}

/// Read FILE: YAML documents holding exactly one MutatingWebhookConfiguration and one
/// ValidatingWebhookConfiguration (named `mutating` and `validating`), and nothing else.
pub fn read(path: &Path, mutating: &str, validating: &str) -> Result<Desired, RegisterError> {
    let text = std::fs::read_to_string(path).map_err(|source| RegisterError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, mutating, validating).map_err(|e| match e {
        Parsed::Yaml(source) => RegisterError::Parse {
            path: path.to_path_buf(),
            source,
        },
        Parsed::Content(problem) => RegisterError::Content {
            path: path.to_path_buf(),
            problem,
        },
    })
}

enum Parsed {
    Yaml(serde_yaml_ng::Error),
    Content(String),
}

fn parse(text: &str, mutating: &str, validating: &str) -> Result<Desired, Parsed> {
    let (mut m, mut v) = (None, None);
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_yaml_ng::Value::deserialize(doc).map_err(Parsed::Yaml)?;
        if value.is_null() {
            continue;
        }
        let kind: Kind = serde_yaml_ng::from_value(value.clone()).map_err(Parsed::Yaml)?;
        match kind.kind.as_deref() {
            Some("MutatingWebhookConfiguration") if m.is_none() => {
                m = Some(serde_yaml_ng::from_value(value).map_err(Parsed::Yaml)?);
            }
            Some("ValidatingWebhookConfiguration") if v.is_none() => {
                v = Some(serde_yaml_ng::from_value(value).map_err(Parsed::Yaml)?);
            }
            Some(k) => {
                return Err(Parsed::Content(format!(
                    "a second {k} or another kind: only one MutatingWebhookConfiguration and one ValidatingWebhookConfiguration"
                )));
            }
            None => return Err(Parsed::Content("a document without kind".to_string())),
        }
    }
    let (Some(mutating_cfg), Some(validating_cfg)) = (m, v) else {
        return Err(Parsed::Content(
            "needs one MutatingWebhookConfiguration and one ValidatingWebhookConfiguration"
                .to_string(),
        ));
    };
    let desired = Desired {
        mutating: mutating_cfg,
        validating: validating_cfg,
    };
    for (kind, got, want, flag) in [
        (
            "MutatingWebhookConfiguration",
            desired.mutating.metadata.name.as_deref(),
            mutating,
            "--mutating-webhook",
        ),
        (
            "ValidatingWebhookConfiguration",
            desired.validating.metadata.name.as_deref(),
            validating,
            "--validating-webhook",
        ),
    ] {
        if got != Some(want) {
            return Err(Parsed::Content(format!(
                "its {kind} is named {got:?}, {flag} is {want:?}: they must be the same"
            )));
        }
    }
    Ok(desired)
}

/// The Services (namespace, name) the configurations call, each once.
pub fn services(d: &Desired) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = d
        .mutating
        .webhooks
        .iter()
        .flatten()
        .map(|w| &w.client_config)
        .chain(
            d.validating
                .webhooks
                .iter()
                .flatten()
                .map(|w| &w.client_config),
        )
        .filter_map(|c| c.service.as_ref())
        .map(|s| (s.namespace.clone(), s.name.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn set_bundle(c: &mut WebhookClientConfig, bundle: &[u8]) {
    c.ca_bundle = Some(ByteString(bundle.to_vec()));
}

/// What is applied: the file's configurations with `bundle` as every webhook's caBundle,
/// the managed-by label `trainplace`, and `owner` as their ownerReference.
pub fn finished(d: &Desired, bundle: &[u8], owner: Option<&OwnerReference>) -> Desired {
    let mut out = d.clone();
    for w in out.mutating.webhooks.iter_mut().flatten() {
        set_bundle(&mut w.client_config, bundle);
    }
    for w in out.validating.webhooks.iter_mut().flatten() {
        set_bundle(&mut w.client_config, bundle);
    }
    for meta in [&mut out.mutating.metadata, &mut out.validating.metadata] {
        meta.labels.get_or_insert_default().insert(
            "app.kubernetes.io/managed-by".to_string(),
            "trainplace".to_string(),
        );
        meta.owner_references = owner.map(|o| vec![o.clone()]);
        meta.resource_version = None;
        meta.managed_fields = None;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: tp
  labels: {app.kubernetes.io/instance: tp}
webhooks:
  - name: mutate.trainplace.io
    admissionReviewVersions: ["v1"]
    sideEffects: None
    clientConfig:
      service: {name: tp, namespace: ns, path: /mutate, port: 443}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: tp
webhooks:
  - name: validate.trainplace.io
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Fail
    clientConfig:
      service: {name: tp, namespace: ns, path: /validate, port: 443}
"#;

    fn problem(text: &str, m: &str, v: &str) -> String {
        match parse(text, m, v) {
            Err(Parsed::Content(p)) => p,
            Err(Parsed::Yaml(e)) => format!("yaml: {e}"),
            Ok(_) => "parsed".to_string(),
        }
    }

    #[test]
    fn both_configurations_get_the_bundle_the_label_and_the_owner() {
        let d = parse(FILE, "tp", "tp").ok().unwrap();
        assert_eq!(services(&d), vec![("ns".to_string(), "tp".to_string())]);
        let owner = OwnerReference {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "ClusterRole".into(),
            name: "tp-certificates".into(),
            uid: "u-1".into(),
            ..OwnerReference::default()
        };
        let f = finished(&d, b"PEM", Some(&owner));
        let w = &f.validating.webhooks.as_ref().unwrap()[0];
        assert_eq!(w.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
        let m = &f.mutating.metadata;
        assert_eq!(
            m.labels.as_ref().unwrap()["app.kubernetes.io/instance"],
            "tp"
        );
        assert_eq!(
            m.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
            "trainplace"
        );
        assert_eq!(m.owner_references.as_ref().unwrap()[0].uid, "u-1");
        assert!(
            f.validating.metadata.owner_references.as_ref().unwrap()[0].name == "tp-certificates"
        );
    }

    #[test]
    fn a_file_that_is_not_the_two_configurations_is_refused_with_the_reason() {
        assert!(problem(FILE, "tp", "other").contains("--validating-webhook is \"other\""));
        let only_one = FILE.split("---").next().unwrap();
        assert!(problem(only_one, "tp", "tp").contains("needs one"));
        let extra =
            format!("{FILE}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n");
        assert!(problem(&extra, "tp", "tp").contains("another kind"));
        assert!(problem("a: [", "tp", "tp").starts_with("yaml"));
    }
}
