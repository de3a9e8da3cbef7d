//! The API calls of the self-managed mode, and nothing more (the chart's RBAC grants
//! exactly these): get, create and update of one Secret; get and patch of one
//! MutatingWebhookConfiguration and one ValidatingWebhookConfiguration.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use super::material::Material;

/// The Secret as read: its data and resourceVersion.
pub struct Stored {
    pub data: BTreeMap<String, Vec<u8>>,
    pub resource_version: String,
}

/// One webhook configuration as read: its resourceVersion and each webhook's name and
/// caBundle.
pub struct Hooks {
    pub kind: &'static str,
    pub name: String,
    pub resource_version: String,
    pub bundles: Vec<(String, Vec<u8>)>,
}

/// How a write ended.
pub enum Written {
    Done,
    /// Another replica wrote first (409): read again next time.
    LostRace,
}

pub struct Cluster {
    secrets: Api<Secret>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    secret: String,
    mutating_name: String,
    validating_name: String,
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn bundle_of(cc: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig) -> Vec<u8> {
    cc.ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

impl Cluster {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        secret: &str,
        mutating: &str,
        validating: &str,
    ) -> Self {
        Cluster {
            secrets: Api::namespaced(client.clone(), namespace),
            mutating: Api::all(client.clone()),
            validating: Api::all(client),
            secret: secret.to_string(),
            mutating_name: mutating.to_string(),
            validating_name: validating.to_string(),
        }
    }

    pub async fn read_secret(&self) -> Result<Option<Stored>, kube::Error> {
        Ok(self.secrets.get_opt(&self.secret).await?.map(|s| Stored {
            data: s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect(),
            resource_version: s.metadata.resource_version.unwrap_or_default(),
        }))
    }

    /// Create the Secret (`resource_version` `None`) or replace the version read.
    pub async fn write_secret(
        &self,
        material: &Material,
        resource_version: Option<String>,
    ) -> Result<Written, kube::Error> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.clone()),
                resource_version: resource_version.clone(),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "trainplace".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_string()),
            data: Some(
                material
                    .to_data()
                    .into_iter()
                    .map(|(k, v)| (k, ByteString(v)))
                    .collect(),
            ),
            ..Secret::default()
        };
        let pp = PostParams::default();
        let result = match resource_version {
            None => self.secrets.create(&pp, &secret).await.map(drop),
            Some(_) => self
                .secrets
                .replace(&self.secret, &pp, &secret)
                .await
                .map(drop),
        };
        match result {
            Ok(()) => Ok(Written::Done),
            Err(e) if conflict(&e) => Ok(Written::LostRace),
            Err(e) => Err(e),
        }
    }

    /// Both webhook configurations, mutating first.
    pub async fn read_hooks(&self) -> Result<[Hooks; 2], kube::Error> {
        let m = self.mutating.get(&self.mutating_name).await?;
        let v = self.validating.get(&self.validating_name).await?;
        Ok([
            Hooks {
                kind: "MutatingWebhookConfiguration",
                name: self.mutating_name.clone(),
                resource_version: m.metadata.resource_version.unwrap_or_default(),
                bundles: m
                    .webhooks
                    .unwrap_or_default()
                    .iter()
                    .map(|w| (w.name.clone(), bundle_of(&w.client_config)))
                    .collect(),
            },
            Hooks {
                kind: "ValidatingWebhookConfiguration",
                name: self.validating_name.clone(),
                resource_version: v.metadata.resource_version.unwrap_or_default(),
                bundles: v
                    .webhooks
                    .unwrap_or_default()
                    .iter()
                    .map(|w| (w.name.clone(), bundle_of(&w.client_config)))
                    .collect(),
            },
        ])
    }

    /// Set every webhook's caBundle of `hooks` to `bundle`, if the configuration is still
    /// the version read (a strategic merge patch by webhook name, with its
    /// resourceVersion as precondition).
    pub async fn patch_bundle(&self, hooks: &Hooks, bundle: &[u8]) -> Result<Written, kube::Error> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(bundle);
        let webhooks: Vec<_> = hooks
            .bundles
            .iter()
            .map(|(name, _)| json!({"name": name, "clientConfig": {"caBundle": b64}}))
            .collect();
        let patch = Patch::Strategic(json!({
            "metadata": {"resourceVersion": hooks.resource_version},
            "webhooks": webhooks,
        }));
        let pp = PatchParams::default();
        let result = if hooks.kind == "MutatingWebhookConfiguration" {
            self.mutating
                .patch(&hooks.name, &pp, &patch)
                .await
                .map(drop)
        } else {
            self.validating
                .patch(&hooks.name, &pp, &patch)
                .await
                .map(drop)
        };
        match result {
            Ok(()) => Ok(Written::Done),
            Err(e) if conflict(&e) => Ok(Written::LostRace),
            Err(e) => Err(e),
        }
    }
}
