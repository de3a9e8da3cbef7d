//! The API calls of the self-managed mode, and nothing more (the chart's RBAC grants
//! exactly these): get, create and update of one Secret; get and patch of one
//! MutatingWebhookConfiguration and one ValidatingWebhookConfiguration; and when the
//! server registers them (`--register-webhooks`), their server-side apply, list of the
//! Service's EndpointSlices and get of the owner ClusterRole.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
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
    client: kube::Client,
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
            client: client.clone(),
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

    /// Both webhook configurations, mutating first; `None` while either is not there
    /// (not registered yet, or removed).
    pub async fn read_hooks(&self) -> Result<Option<[Hooks; 2]>, kube::Error> {
        let Some(m) = self.mutating.get_opt(&self.mutating_name).await? else {
            return Ok(None);
        };
        let Some(v) = self.validating.get_opt(&self.validating_name).await? else {
            return Ok(None);
        };
        Ok(Some([
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
        ]))
    }

    /// An ownerReference to the ClusterRole `name` (its uid as the API server has it).
    pub async fn owner(&self, name: &str) -> Result<OwnerReference, kube::Error> {
        let role = Api::<ClusterRole>::all(self.client.clone())
            .get(name)
            .await?;
        Ok(OwnerReference {
            api_version: "rbac.authorization.k8s.io/v1".to_string(),
            kind: "ClusterRole".to_string(),
            name: name.to_string(),
            uid: role.metadata.uid.unwrap_or_default(),
            ..OwnerReference::default()
        })
    }

    /// Whether the Service `namespace/name` has a ready endpoint (an EndpointSlice
    /// endpoint whose ready condition is true), i.e. whether the API server can call it.
    pub async fn service_ready(&self, namespace: &str, name: &str) -> Result<bool, kube::Error> {
        let slices = Api::<EndpointSlice>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
            .await?;
        Ok(slices.items.iter().any(|s| {
            s.endpoints
                .iter()
                .any(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false))
        }))
    }

    /// Server-side apply of both configurations (field manager `trainplace`, forced: the
    /// server owns every field it sets). Whether either changed.
    pub async fn apply_hooks(
        &self,
        mutating: &MutatingWebhookConfiguration,
        validating: &ValidatingWebhookConfiguration,
    ) -> Result<bool, (&'static str, String, kube::Error)> {
        let pp = PatchParams::apply("trainplace").force();
        let m_name = mutating.metadata.name.clone().unwrap_or_default();
        let v_name = validating.metadata.name.clone().unwrap_or_default();
        let before = (
            self.mutating.get_opt(&m_name).await.ok().flatten(),
            self.validating.get_opt(&v_name).await.ok().flatten(),
        );
        let m = self
            .mutating
            .patch(&m_name, &pp, &Patch::Apply(mutating))
            .await
            .map_err(|e| ("MutatingWebhookConfiguration", m_name.clone(), e))?;
        let v = self
            .validating
            .patch(&v_name, &pp, &Patch::Apply(validating))
            .await
            .map_err(|e| ("ValidatingWebhookConfiguration", v_name.clone(), e))?;
        let rv = |o: Option<&ObjectMeta>| o.and_then(|m| m.resource_version.clone());
        Ok(
            rv(before.0.as_ref().map(|o| &o.metadata)) != rv(Some(&m.metadata))
                || rv(before.1.as_ref().map(|o| &o.metadata)) != rv(Some(&v.metadata)),
        )
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
