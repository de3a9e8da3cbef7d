//! `trainplace serve`: the HTTPS admission webhook and its probe port.

pub mod certs;
pub mod config;
pub mod events;
mod guard;
pub mod listener;
pub mod mark_refresh;
pub mod metrics;
mod metrics_namespaces;
pub mod pool;
pub mod probes;
pub mod reload;
pub mod routes;
pub mod state;
mod subject;
pub mod tls;

use std::sync::Arc;

use anyhow::Context;

use crate::inventory::files::StaticInventory;
use crate::inventory::live::LiveInventory;
use crate::inventory::{InventorySource, NoCluster};
pub use config::Config;
pub use listener::Handle;
pub use state::AppState;

/// Names in the in-memory self-signed certificate.
const SELF_SIGNED_NAMES: [&str; 5] = [
    "localhost",
    "127.0.0.1",
    "trainplace",
    "trainplace.trainplace.svc",
    "trainplace.trainplace.svc.cluster.local",
];

pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("TRAINPLACE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .json()
        .with_writer(std::io::stderr)
        .try_init();
}

/// A running server: its bound addresses and a handle to stop it.
pub struct Running {
    pub addr: std::net::SocketAddr,
    pub probe_addr: std::net::SocketAddr,
    pub state: AppState,
    pub handle: Handle,
    pub store: Arc<tls::CertStore>,
    pub done: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn inventory(mode: &config::InventoryMode) -> anyhow::Result<Arc<dyn InventorySource>> {
    Ok(match mode {
        config::InventoryMode::Off => Arc::new(NoCluster),
        config::InventoryMode::Files(dir) => {
            let snap = crate::inventory::files::load_dir(dir)?;
            Arc::new(StaticInventory::new(snap))
        }
        config::InventoryMode::Auto => match kube::Client::try_default().await {
            Ok(client) => LiveInventory::start(client),
            Err(error) => {
                tracing::info!(%error, "no Kubernetes client config: inventory off, decisions use the embedded catalog");
                Arc::new(NoCluster)
            }
        },
    })
}

/// The Event writer: started when Events are on and a cluster client can be made.
async fn events(config: &Config, metrics: Arc<metrics::Metrics>) -> events::Events {
    if !config.events.enabled {
        return events::Events::off(metrics);
    }
    match kube::Client::try_default().await {
        Ok(client) => events::Events::start(client, config.events.clone(), metrics),
        Err(error) => {
            tracing::info!(%error, "no Kubernetes client config: no Events for denials");
            events::Events::off(metrics)
        }
    }
}

/// Bind both ports and start serving; returns once listening.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let policy = crate::policy_dir::load_or_embedded(config.policy_dir.as_deref())
        .with_context(|| format!("loading the policy from {:?}", config.policy_dir))?;
    let mut state = AppState::new(policy);
    state.limits = config.limits;
    state.pool = Arc::new(pool::Lanes::new(
        config.review_concurrency,
        config.review_queue,
        config.large_review_bytes,
    ));
    state.inventory = inventory(&config.inventory).await?;
    state
        .metrics
        .namespaces
        .set_limit(config.metrics_namespaces);
    state.events = events(&config, state.metrics.clone()).await;
    let (initial, cert_detail) = initial_certificate(&config, &state)?;
    let store = tls::CertStore::new(initial);
    state.cert = Some(store.clone());
    warn_before_expiry(store.clone());
    describe(&config, &state, cert_detail);
    watch_files(&config, &state, &store);
    mark_keys(&config, &state)?;
    let handle = Handle::default();
    let probe_addr = probes::serve_on_own_thread(config.probe_addr, state.clone())
        .with_context(|| format!("binding probe address {}", config.probe_addr))?;
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("binding {}", config.addr))?;
    let addr = listener.local_addr()?;
    let tls = tokio_rustls::TlsAcceptor::from(Arc::new(tls::server_config(store.clone())?));
    let app = routes::router(state.clone(), config.max_body, config.read_timeout);
    let done = tokio::spawn(listener::serve(
        listener,
        tls,
        app,
        state.clone(),
        config.deadlines,
        handle.clone(),
    ));
    state.set_ready(true);
    tracing::info!(%addr, %probe_addr, "trainplace webhook listening");
    Ok(Running {
        addr,
        probe_addr,
        state,
        handle,
        store,
        done,
    })
}

/// The certificate served first, and how /readyz describes where certificates come from.
fn initial_certificate(config: &Config, state: &AppState) -> anyhow::Result<(tls::Loaded, String)> {
    Ok(match &config.tls {
        Some((cert, key)) => (
            tls::load_pem(cert, key)?,
            format!("{} (reloaded on change)", cert.display()),
        ),
        None if config.self_managed.is_some() => (
            // Never served to the API server: not ready until the Secret's certificate is.
            tls::self_signed(&SELF_SIGNED_NAMES)?,
            "self-managed: waiting for the Secret".to_string(),
        ),
        None => {
            tracing::warn!(
                "no --tls-cert given: serving a self-signed certificate generated in memory"
            );
            state.metrics.self_signed.set(1);
            (
                tls::self_signed(&SELF_SIGNED_NAMES)?,
                "self-signed, generated in memory".to_string(),
            )
        }
    })
}

/// The days a certificate has left shrink without any reload: re-checked hourly.
fn warn_before_expiry(store: Arc<tls::CertStore>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
        tick.tick().await;
        loop {
            tick.tick().await;
            store.warn_if_expiring();
        }
    });
}

/// What /readyz says about the certificate's and the policy's source.
fn describe(config: &Config, state: &AppState, cert_detail: String) {
    state.detail.rcu(|d| {
        let mut d = (**d).clone();
        d.certificate = cert_detail.clone();
        d.policy = config
            .policy_dir
            .as_ref()
            .map_or("embedded default".to_string(), |p| {
                format!("{} (reloaded on change)", p.display())
            });
        d
    });
}

/// Reload the certificate, the policy and the reservations file when they change, and
/// keep the self-managed certificate.
fn watch_files(config: &Config, state: &AppState, store: &Arc<tls::CertStore>) {
    if let Some((cert, key)) = &config.tls {
        reload::watch_certs(
            state.clone(),
            store.clone(),
            cert.clone(),
            key.clone(),
            config.reload_interval,
        );
    }
    if let Some(settings) = &config.self_managed {
        certs::start(settings.clone(), store.clone(), state.clone());
    }
    if let Some(dir) = &config.policy_dir {
        reload::watch_policy(state.clone(), dir.clone(), config.reload_interval);
    }
    if let Some(file) = &config.reservations {
        reload::watch_reservations(state.clone(), file.clone(), config.reload_interval);
    }
}

/// The admission-mark keys: from the mounted directory (reloaded on change), else a
/// random key of this process, said loudly.
fn mark_keys(config: &Config, state: &AppState) -> anyhow::Result<()> {
    match &config.mark_keys {
        Some(dir) => {
            let keys = crate::mark_keys::load(dir)?
                .counting_failures_in(state.metrics.mark_failures.0.clone());
            tracing::info!(dir = %dir.display(), signing = keys.current_id(), "admission-mark keys loaded");
            state.marks.store(Some(Arc::new(keys)));
            state.mark_refresh.set_dir(dir.clone());
            reload::watch_mark_keys(state.clone(), dir.clone(), config.reload_interval);
        }
        None => {
            tracing::warn!(
                "no --mark-keys: admission marks use a random key of this process; pods of admitted workloads are judged again on other replicas"
            );
            state.marks.store(Some(Arc::new(
                crate::mark_keys::ephemeral()
                    .counting_failures_in(state.metrics.mark_failures.0.clone()),
            )));
        }
    }
    Ok(())
}

/// Serve until SIGTERM/SIGINT, then stop taking new connections and let in-flight
/// reviews finish within the grace period.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let grace = config.shutdown_grace;
    let running = start(config).await?;
    shutdown_signal().await;
    tracing::info!(
        grace_seconds = grace.as_secs(),
        "shutting down: draining in-flight reviews"
    );
    running.state.set_ready(false);
    running.handle.graceful_shutdown(Some(grace));
    running.done.await??;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
