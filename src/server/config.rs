//! `trainplace serve` flags (each with an env equivalent), validated into a `Config`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// HTTPS address for /mutate and /validate.
    #[arg(long, env = "TRAINPLACE_ADDR", default_value = "0.0.0.0:8443")]
    pub addr: SocketAddr,
    /// Plain-HTTP address for /healthz, /readyz and /metrics.
    #[arg(long, env = "TRAINPLACE_PROBE_ADDR", default_value = "0.0.0.0:8080")]
    pub probe_addr: SocketAddr,
    /// PEM certificate chain; without it a self-signed certificate is generated in memory.
    #[arg(long, env = "TRAINPLACE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, env = "TRAINPLACE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Policy directory, reloaded on change; default: the embedded policy.
    #[arg(long, env = "TRAINPLACE_POLICY_DIR")]
    pub policy_dir: Option<PathBuf>,
    /// How often certificate files and the policy directory are checked for changes.
    #[arg(long, env = "TRAINPLACE_RELOAD_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    pub reload_interval: Duration,
    /// On SIGTERM, how long in-flight reviews may take to finish.
    #[arg(long, env = "TRAINPLACE_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Cluster inventory: `auto` (in-cluster or kubeconfig when present), `off`, or a
    /// directory of `kubectl get -o json` files (nodes.json, pods.json, namespaces.json).
    #[arg(long, env = "TRAINPLACE_INVENTORY", default_value = "auto")]
    pub inventory: String,
    /// Directory of admission-mark keys (a mounted Secret; file name = key id, the
    /// name that sorts last signs, all verify; reloaded on change). Default: a random
    /// key per process (pods of admitted workloads are then re-judged on other replicas).
    #[arg(long, env = "TRAINPLACE_MARK_KEYS")]
    pub mark_keys: Option<PathBuf>,
    /// Largest AdmissionReview body accepted (bytes); larger gets HTTP 413.
    #[arg(long, env = "TRAINPLACE_MAX_BODY", default_value_t = 4 * 1024 * 1024)]
    pub max_body: usize,
}

/// Where the cluster inventory comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryMode {
    Auto,
    Off,
    Files(PathBuf),
}

/// Validated server configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub probe_addr: SocketAddr,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub policy_dir: Option<PathBuf>,
    pub mark_keys: Option<PathBuf>,
    pub reload_interval: Duration,
    pub shutdown_grace: Duration,
    pub max_body: usize,
    pub inventory: InventoryMode,
    /// Time allowed to send request headers / body before the connection is dropped.
    pub read_timeout: Duration,
}

impl ServeArgs {
    pub fn into_config(self) -> anyhow::Result<Config> {
        let ServeArgs {
            addr,
            probe_addr,
            tls_cert,
            tls_key,
            policy_dir,
            reload_interval,
            shutdown_grace,
            mark_keys,
            max_body,
            inventory,
        } = self;
        if addr == probe_addr {
            anyhow::bail!("--addr and --probe-addr must differ (both {addr})");
        }
        Ok(Config {
            addr,
            probe_addr,
            tls: tls_cert.zip(tls_key),
            policy_dir,
            mark_keys,
            reload_interval,
            shutdown_grace,
            max_body,
            inventory: match inventory.as_str() {
                "auto" => InventoryMode::Auto,
                "off" => InventoryMode::Off,
                dir => InventoryMode::Files(PathBuf::from(dir)),
            },
            read_timeout: Duration::from_secs(5),
        })
    }
}

/// `500ms`, `2s`, `1m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t
        .find(|c: char| !c.is_ascii_digit())
        .map_or((t, "s"), |i| t.split_at(i));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 2s or 500ms"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("{text:?}: unit must be ms, s or m")),
    }
}
