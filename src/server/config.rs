//! `trainplace serve` flags (each with an env equivalent), validated into a `Config`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use trainplace_engine::{DEFAULT_MAX_CONTAINERS, DEFAULT_MAX_PATCH_BYTES, Limits};

pub use super::listener::Deadlines;

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
    /// Capacity Blocks from `aws ec2 describe-capacity-reservations --output json` (a
    /// ConfigMap the platform team refreshes, mounted as a file; reloaded on change; a
    /// bad file keeps the last good blocks). For EKS managed node groups, whose nodes
    /// do not say which block they run on or when it ends.
    #[arg(long, env = "TRAINPLACE_RESERVATIONS", value_name = "FILE")]
    pub reservations: Option<PathBuf>,
    /// Largest AdmissionReview body accepted (bytes); larger gets HTTP 413.
    #[arg(long, env = "TRAINPLACE_MAX_BODY", default_value_t = 4 * 1024 * 1024)]
    pub max_body: usize,
    /// Containers one object may declare (all pod templates, init and ephemeral
    /// included); more is denied with the count. Bounds one review's memory.
    #[arg(long, env = "TRAINPLACE_MAX_CONTAINERS", default_value_t = DEFAULT_MAX_CONTAINERS)]
    pub max_containers: usize,
    /// Largest JSON Patch (bytes, before base64) /mutate returns; larger is denied.
    #[arg(long, env = "TRAINPLACE_MAX_PATCH_BYTES", default_value_t = DEFAULT_MAX_PATCH_BYTES)]
    pub max_patch_bytes: usize,
    /// Threads that accept connections and run TLS and HTTP; 0 = one per core. Reviews
    /// run on threads of their own (--review-concurrency). On a 2-core machine one
    /// thread took 6-14% less CPU per review than one per core, kept 1.6-2 MiB less
    /// memory after a burst, and its p99 latency was similar (docs/performance.md);
    /// each thread keeps some freed memory, so one per core grows with the node.
    #[arg(long, env = "TRAINPLACE_IO_THREADS", default_value_t = 1)]
    pub io_threads: usize,
    /// Reviews running at once (on blocking threads); 0 = one per core.
    #[arg(long, env = "TRAINPLACE_REVIEW_CONCURRENCY", default_value_t = 0)]
    pub review_concurrency: usize,
    /// Reviews that may wait for a slot; beyond that the answer is HTTP 503 at once.
    #[arg(long, env = "TRAINPLACE_REVIEW_QUEUE", default_value_t = 64)]
    pub review_queue: usize,
    /// Reviews with a larger body (bytes) run in a lane of their own (one thread, a
    /// quarter of --review-queue), so bursts of huge objects never delay ordinary
    /// training pods (~5-15 KB); 0 = one lane for all.
    #[arg(long, env = "TRAINPLACE_LARGE_REVIEW_BYTES", default_value_t = super::pool::DEFAULT_LARGE_REVIEW_BYTES)]
    pub large_review_bytes: usize,
    /// Open HTTPS connections at most; further ones wait in the listen backlog.
    #[arg(long, env = "TRAINPLACE_MAX_CONNECTIONS", default_value_t = super::listener::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Time from TCP accept to the client's first byte.
    #[arg(long, env = "TRAINPLACE_FIRST_BYTE_TIMEOUT", default_value = "3s", value_parser = parse_duration)]
    pub first_byte_timeout: Duration,
    /// Time for the whole TLS handshake.
    #[arg(long, env = "TRAINPLACE_TLS_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,
    /// Time to receive a request's headers (HTTP/1 and HTTP/2) and, separately, its body.
    #[arg(long, env = "TRAINPLACE_HEADER_READ_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight is closed after this long.
    #[arg(long, env = "TRAINPLACE_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// While draining, a connection with no request in flight is closed after this long.
    #[arg(long, env = "TRAINPLACE_DRAIN_IDLE_TIMEOUT", default_value = "1s", value_parser = parse_duration)]
    pub drain_idle_timeout: Duration,
    /// HTTP/2 keep-alive: ping an idle connection this often...
    #[arg(long, env = "TRAINPLACE_HTTP2_KEEPALIVE_INTERVAL", default_value = "20s", value_parser = parse_duration)]
    pub http2_keepalive_interval: Duration,
    /// ...and close it when the ping is not answered within this.
    #[arg(long, env = "TRAINPLACE_HTTP2_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub http2_keepalive_timeout: Duration,
    #[command(flatten)]
    pub self_managed: super::certs::SelfManagedArgs,
    #[command(flatten)]
    pub events: super::events::EventArgs,
    /// Count reviews by namespace for the first N namespaces seen (the rest as _other);
    /// 0 (default) leaves the namespace out of the metrics.
    #[arg(long, env = "TRAINPLACE_METRICS_NAMESPACES", default_value_t = 0)]
    pub metrics_namespaces: usize,
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
    /// `--self-managed-certs`: the serving certificate comes from a Secret this server
    /// keeps (src/server/certs).
    pub self_managed: Option<super::certs::Settings>,
    /// Events for denials and warnings (src/server/events.rs).
    pub events: super::events::EventSettings,
    /// `--metrics-namespaces`: the bound on namespaces in the metrics (0: none).
    pub metrics_namespaces: usize,
    pub policy_dir: Option<PathBuf>,
    pub mark_keys: Option<PathBuf>,
    pub reservations: Option<PathBuf>,
    pub reload_interval: Duration,
    pub shutdown_grace: Duration,
    pub max_body: usize,
    pub inventory: InventoryMode,
    /// Time allowed to send request headers / body before the connection is dropped.
    pub read_timeout: Duration,
    pub limits: Limits,
    pub review_concurrency: usize,
    pub review_queue: usize,
    pub large_review_bytes: usize,
    pub deadlines: Deadlines,
    /// Async worker threads (connections, TLS, HTTP); at least 1.
    pub io_threads: usize,
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
            reservations,
            max_body,
            inventory,
            max_containers,
            max_patch_bytes,
            io_threads,
            review_concurrency,
            review_queue,
            large_review_bytes,
            max_connections,
            first_byte_timeout,
            tls_handshake_timeout,
            header_read_timeout,
            idle_timeout,
            drain_idle_timeout,
            http2_keepalive_interval,
            http2_keepalive_timeout,
            self_managed,
            events,
            metrics_namespaces,
        } = self;
        if max_connections == 0 {
            anyhow::bail!("--max-connections must be at least 1");
        }
        if addr == probe_addr {
            anyhow::bail!("--addr and --probe-addr must differ (both {addr})");
        }
        Ok(Config {
            addr,
            probe_addr,
            tls: tls_cert.zip(tls_key),
            self_managed: self_managed.into_settings()?,
            events: events.into_settings()?,
            metrics_namespaces,
            policy_dir,
            mark_keys,
            reservations,
            reload_interval,
            shutdown_grace,
            max_body,
            inventory: match inventory.as_str() {
                "auto" => InventoryMode::Auto,
                "off" => InventoryMode::Off,
                dir => InventoryMode::Files(PathBuf::from(dir)),
            },
            read_timeout: header_read_timeout,
            limits: Limits {
                max_containers,
                max_patch_bytes,
                ..Limits::default()
            },
            review_concurrency,
            review_queue,
            large_review_bytes,
            deadlines: Deadlines {
                max_connections,
                first_byte: first_byte_timeout,
                tls_handshake: tls_handshake_timeout,
                header_read: header_read_timeout,
                idle: idle_timeout,
                drain_idle: drain_idle_timeout,
                h2_keepalive_interval: http2_keepalive_interval,
                h2_keepalive_timeout: http2_keepalive_timeout,
            },
            io_threads: if io_threads == 0 {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            } else {
                io_threads
            },
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    /// The flags' defaults are the ones `Deadlines::default()` (what the library and its
    /// tests start from) and docs/install.md give.
    #[test]
    fn serve_flag_defaults_are_the_documented_ones() {
        let config = Serve::try_parse_from(["serve"])
            .unwrap()
            .args
            .into_config()
            .unwrap();
        assert_eq!(config.deadlines, Deadlines::default());
        assert_eq!(config.deadlines.max_connections, 512);
        assert_eq!(config.io_threads, 1);
    }
}
