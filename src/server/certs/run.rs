//! The loop every replica runs: read the webhook configurations and the Secret, write
//! the Secret when the plan says so (one replica wins each write), serve what the Secret
//! holds, and keep both caBundles equal to its trust bundle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use thiserror::Error;

use super::cluster::{Cluster, Hooks, Written};
use super::material::{CA_BUNDLE, Material, TLS_CRT, TLS_KEY, normalised};
use super::plan::{Inputs, Step, plan};
use super::register::{self, RegisterError, Registration};
use super::settings::Settings;
use crate::server::state::AppState;
use crate::server::tls::{self, CertStore};

#[derive(Debug, Error)]
pub enum TickError {
    #[error("no Kubernetes client: {0}")]
    Client(String),
    #[error("reading Secret {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("writing Secret {namespace}/{name}: {source}")]
    Write {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("making a certificate: {0}")]
    Issue(#[from] super::issue::CertError),
    #[error("the Secret's serving certificate cannot be served: {0}")]
    Serve(#[from] tls::TlsError),
    #[error("another replica is writing the Secret; reading it again")]
    Raced,
}

/// One replica's loop state.
pub struct Manager {
    pub settings: Settings,
    pub namespace: String,
    pub names: Vec<String>,
    pub cluster: Cluster,
    pub store: Arc<CertStore>,
    pub state: AppState,
    /// The tls.crt now served (to reload only on change).
    served: Option<Vec<u8>>,
    /// `--register-webhooks`: applied at least once by this replica.
    registered: bool,
    /// What the last registration round came to (logged and put on /readyz when it
    /// changes).
    said: String,
}

/// How a registration round ended.
enum Registered {
    Applied { changed: bool },
    Waiting(&'static str),
}

/// The serving certificate's names: the Service's four forms, then the extra names.
pub fn serving_names(service: &str, namespace: &str, extra: &[String]) -> Vec<String> {
    let mut names = vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    for n in extra {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

/// Whether every webhook of both configurations has `ca` in its caBundle.
fn hooks_trust(hooks: &[Hooks], ca: &str) -> bool {
    let Ok(ca) = normalised("next-ca.crt", ca) else {
        return false;
    };
    hooks.iter().all(|h| {
        h.bundles.iter().all(|(_, b)| {
            let text = String::from_utf8_lossy(b);
            super::issue::certs("caBundle", &text).is_ok_and(|certs| {
                certs
                    .iter()
                    .any(|d| normalised("caBundle", &pem(d.as_ref())).is_ok_and(|c| c == ca))
            })
        })
    })
}

fn pem(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n")
}

impl Manager {
    pub fn new(
        settings: Settings,
        namespace: String,
        cluster: Cluster,
        store: Arc<CertStore>,
        state: AppState,
    ) -> Self {
        let names = serving_names(&settings.service, &namespace, &settings.extra_names);
        Manager {
            settings,
            namespace,
            names,
            cluster,
            store,
            state,
            served: None,
            registered: false,
            said: String::new(),
        }
    }

    fn read_err(&self, source: kube::Error) -> TickError {
        TickError::Read {
            namespace: self.namespace.clone(),
            name: self.settings.secret.clone(),
            source,
        }
    }

    /// One round; returns the Secret's content as served.
    pub async fn tick(&mut self, now: i64) -> Result<Material, TickError> {
        // The configurations first, then the Secret: a replica that sees a newer caBundle
        // also sees the Secret it came from.
        let hooks = match self.cluster.read_hooks().await {
            Ok(h) => h,
            Err(error) => {
                tracing::warn!(%error, "cannot read the webhook configurations; their caBundle is not kept current");
                None
            }
        };
        let stored = self
            .cluster
            .read_secret()
            .await
            .map_err(|e| self.read_err(e))?;
        let current = stored.as_ref().and_then(|s| match Material::from_data(&s.data) {
            Ok(m) => Some(m),
            Err(error) => {
                tracing::warn!(%error, secret = %self.settings.secret, "the Secret's certificates are unreadable: making new ones");
                None
            }
        });
        let trust_next = match (&hooks, current.as_ref().and_then(|m| m.next.as_ref())) {
            (Some(h), Some(next)) => hooks_trust(h, &next.cert),
            _ => false,
        };
        let inputs = Inputs {
            now,
            names: &self.names,
            lifetimes: self.settings.lifetimes,
            webhooks_trust_next: trust_next,
        };
        let material = match plan(current.as_ref(), &inputs)? {
            Step::Keep => current.ok_or(TickError::Raced)?,
            Step::Write { material, why } => {
                let rv = stored.map(|s| s.resource_version);
                match self.cluster.write_secret(&material, rv).await {
                    Ok(Written::Done) => {
                        tracing::info!(secret = %self.settings.secret, namespace = %self.namespace, why = why.as_str(), "self-managed certificates written");
                        material
                    }
                    Ok(Written::LostRace) => return Err(TickError::Raced),
                    Err(source) => {
                        return Err(TickError::Write {
                            namespace: self.namespace.clone(),
                            name: self.settings.secret.clone(),
                            source,
                        });
                    }
                }
            }
        };
        self.serve(&material)?;
        if let Some(registration) = self.settings.register.clone() {
            self.register(&registration, material.bundle().as_bytes())
                .await;
        } else if let Some(hooks) = hooks {
            self.inject(&hooks, material.bundle().as_bytes()).await;
        }
        Ok(material)
    }

    /// `--register-webhooks`: apply both configurations once this replica is ready and
    /// every Service they call has a ready endpoint (before that, the API server would
    /// find no one to call and the validating webhook's failurePolicy would refuse).
    async fn register(&mut self, registration: &Registration, bundle: &[u8]) {
        let said = match self.try_register(registration, bundle).await {
            Ok(Registered::Applied { changed }) => {
                if changed || !self.registered {
                    tracing::info!(
                        mutating = %self.settings.mutating_webhook,
                        validating = %self.settings.validating_webhook,
                        changed,
                        "webhook configurations registered"
                    );
                }
                self.registered = true;
                format!(
                    "registered: MutatingWebhookConfiguration {}, ValidatingWebhookConfiguration {}",
                    self.settings.mutating_webhook, self.settings.validating_webhook
                )
            }
            Ok(Registered::Waiting(why)) => {
                let text = waiting_text(why, self.registered);
                if self.said != text {
                    tracing::info!(why, "webhook configurations not registered yet");
                }
                text
            }
            Err(error) => {
                let text = format!("cannot register: {error}");
                // Once per distinct error: a missing file or RBAC is retried every second.
                if self.said != text {
                    tracing::warn!(%error, "cannot register the webhook configurations");
                }
                text
            }
        };
        if self.said != said {
            self.state.detail.rcu(|d| {
                let mut d = (**d).clone();
                d.webhooks.clone_from(&said);
                d
            });
            self.said = said;
        }
        self.state
            .metrics
            .webhooks_registered
            .set(i64::from(self.registered));
    }

    async fn try_register(
        &self,
        registration: &Registration,
        bundle: &[u8],
    ) -> Result<Registered, RegisterError> {
        if !self.state.ready.load(Ordering::Acquire) {
            return Ok(Registered::Waiting("this replica is not ready"));
        }
        let desired = register::read(
            &registration.file,
            &self.settings.mutating_webhook,
            &self.settings.validating_webhook,
        )?;
        for (namespace, name) in register::services(&desired) {
            let ready = self
                .cluster
                .service_ready(&namespace, &name)
                .await
                .map_err(|source| RegisterError::Endpoints {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    source,
                })?;
            if !ready {
                return Ok(Registered::Waiting("the Service has no ready endpoint yet"));
            }
        }
        let owner = match &registration.owner {
            Some(name) => {
                Some(
                    self.cluster
                        .owner(name)
                        .await
                        .map_err(|source| RegisterError::Owner {
                            name: name.clone(),
                            source,
                        })?,
                )
            }
            None => None,
        };
        let done = register::finished(&desired, bundle, owner.as_ref());
        let changed = self
            .cluster
            .apply_hooks(&done.mutating, &done.validating)
            .await
            .map_err(|(kind, name, source)| RegisterError::Apply { kind, name, source })?;
        Ok(Registered::Applied { changed })
    }

    /// Serve the Secret's certificate if it is not the one served already.
    fn serve(&mut self, material: &Material) -> Result<(), TickError> {
        let cert = material.serving.cert.as_bytes();
        if self.served.as_deref() == Some(cert) {
            return Ok(());
        }
        let what = format!(
            "Secret {}/{} {TLS_CRT}, {TLS_KEY}",
            self.namespace, self.settings.secret
        );
        let loaded = tls::load_pem_bytes(&what, cert, material.serving.key.as_bytes());
        let ok = loaded.is_ok();
        self.state
            .metrics
            .cert_reloads
            .get_or_create(&crate::server::metrics::OutcomeLabels {
                outcome: if ok { "success" } else { "failure" },
            })
            .inc();
        self.store.replace(loaded?);
        self.served = Some(cert.to_vec());
        tracing::info!(secret = %self.settings.secret, "serving the self-managed certificate");
        Ok(())
    }

    async fn inject(&self, hooks: &[Hooks], bundle: &[u8]) {
        for h in hooks {
            if h.bundles.iter().all(|(_, b)| b == bundle) {
                continue;
            }
            match self.cluster.patch_bundle(h, bundle).await {
                Ok(Written::Done) => {
                    tracing::info!(kind = h.kind, name = %h.name, key = CA_BUNDLE, "caBundle updated")
                }
                Ok(Written::LostRace) => {}
                Err(error) => {
                    tracing::warn!(%error, kind = h.kind, name = %h.name, "cannot update the caBundle")
                }
            }
        }
    }
}

/// Start the loop on the server's runtime. Readiness stays off until a certificate from
/// the Secret is served, and turns off again if the one served ends. Until then it tries
/// every second (or sooner with short lifetimes).
pub fn start(settings: Settings, store: Arc<CertStore>, state: AppState) {
    state.certificate_ready.store(false, Ordering::Release);
    tokio::spawn(async move {
        let every = settings.lifetimes.check_every();
        let mut manager = None;
        loop {
            if manager.is_none() {
                manager = match connect(&settings, &store, &state).await {
                    Ok(m) => Some(m),
                    Err(error) => {
                        tracing::warn!(%error, "self-managed certificates");
                        report(&state, &settings, None, Some(&error));
                        tokio::time::sleep(every.min(Duration::from_secs(1))).await;
                        continue;
                    }
                };
            }
            let Some(m) = manager.as_mut() else { continue };
            let mut result = m.tick(tls::unix_now()).await;
            // Lost a write to another replica: read its Secret at once (bounded).
            for _ in 0..3 {
                if !matches!(result, Err(TickError::Raced)) {
                    break;
                }
                result = m.tick(tls::unix_now()).await;
            }
            report(&state, &settings, Some(&m.namespace), result.as_ref().err());
            if let Err(error) = &result {
                tracing::warn!(%error, "self-managed certificates");
            }
            let serving = m.served.is_some() && store_valid(&store);
            state.certificate_ready.store(serving, Ordering::Release);
            // Until registered, look again every second (as until serving).
            let waiting = m.settings.register.is_some() && !m.registered;
            let pause = if serving && !waiting {
                every
            } else {
                every.min(Duration::from_secs(1))
            };
            tokio::time::sleep(pause).await;
        }
    });
}

fn store_valid(store: &CertStore) -> bool {
    store.not_after() > tls::unix_now()
}

async fn connect(
    settings: &Settings,
    store: &Arc<CertStore>,
    state: &AppState,
) -> Result<Manager, TickError> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| TickError::Client(e.to_string()))?;
    let namespace = settings
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let cluster = Cluster::new(
        client,
        &namespace,
        &settings.secret,
        &settings.mutating_webhook,
        &settings.validating_webhook,
    );
    Ok(Manager::new(
        settings.clone(),
        namespace,
        cluster,
        store.clone(),
        state.clone(),
    ))
}

/// What /readyz says about the certificate.
fn report(
    state: &AppState,
    settings: &Settings,
    namespace: Option<&str>,
    error: Option<&TickError>,
) {
    let ns = namespace.unwrap_or("<client namespace>");
    let text = match error {
        None | Some(TickError::Raced) => format!("self-managed in Secret {ns}/{}", settings.secret),
        Some(e) => format!("self-managed in Secret {ns}/{}: {e}", settings.secret),
    };
    if state.detail.load().certificate != text {
        state.detail.rcu(|d| {
            let mut d = (**d).clone();
            d.certificate.clone_from(&text);
            d
        });
    }
}

/// What `/readyz` says while a replica does not apply the configurations: not yet, or
/// (once it did, and they stay registered) not again for now.
fn waiting_text(why: &str, registered: bool) -> String {
    if registered {
        format!("registered earlier; not applied again now: {why}")
    } else {
        format!("not registered yet: {why}")
    }
}

#[cfg(test)]
mod tests;
