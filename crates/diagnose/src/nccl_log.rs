//! Parses NCCL INFO logs (NCCL 2.18-2.27, several ranks and hosts interleaved) into a
//! per-host picture of which transport each peer pair uses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::env::{self, EnvSetting};
use crate::finding::Evidence;
use crate::line::{Level, NcclLine};
use crate::transport::{self, Connection, TransportClass};
use crate::version::Version;

static COMM_SHAPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"comm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) localRanks (?P<lranks>\d+) localRank (?P<lrank>\d+)")
        .expect("static regex")
});
static GDR_FLAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bGDR (?P<on>[01])\b").expect("static regex"));

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CommShape {
    pub n_ranks: u32,
    pub n_nodes: u32,
    pub local_ranks: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct TransportUse {
    pub label: String,
    pub class: TransportClass,
    /// Distinct (src, dst) rank pairs connected this way.
    pub pairs: usize,
    pub channels: usize,
    /// A few pairs as `src->dst`, for the reader to recognise the ring.
    pub sample_pairs: Vec<String>,
}

/// One peer pair and the transport NCCL picked for it, with the channels that use it.
#[derive(Debug, Clone, Serialize)]
pub struct PairTransport {
    pub src: u32,
    pub dst: u32,
    pub transport: String,
    pub class: TransportClass,
    pub channels: Vec<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RankLocal {
    pub rank: u32,
    pub local_rank: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostSummary {
    pub host: String,
    pub processes: usize,
    pub ranks: Vec<RankLocal>,
    /// The largest communicator this host's ranks joined (the world, usually).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<CommShape>,
    pub transports: Vec<TransportUse>,
    /// Per peer pair, as printed by this host's ranks.
    pub pairs: Vec<PairTransport>,
}

/// A connection line with where it came from; rules need the line and the host.
#[derive(Debug, Clone)]
pub(crate) struct ConnRecord {
    pub line: usize,
    pub raw: String,
    pub host: String,
    pub conn: Connection,
}

#[derive(Debug, Clone, Serialize)]
pub struct LogSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws_ofi_nccl_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub libfabric_version: Option<String>,
    /// The instance type aws-ofi-nccl says it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    pub networks: Vec<String>,
    pub hosts: Vec<HostSummary>,
    pub env: Vec<EnvSetting>,
    pub nccl_lines: usize,
    #[serde(skip)]
    pub(crate) connections: Vec<ConnRecord>,
    #[serde(skip)]
    pub(crate) rank_host: BTreeMap<u32, String>,
    #[serde(skip)]
    pub(crate) rank_local: BTreeMap<(String, u32), u32>,
    #[serde(skip)]
    pub(crate) gdr_flags: Vec<(Evidence, bool)>,
    #[serde(skip)]
    pub(crate) warnings: Vec<Evidence>,
    #[serde(skip)]
    pub(crate) shapes: Vec<(Evidence, CommShape)>,
    #[serde(skip)]
    pub(crate) ofi_lines: Vec<Evidence>,
    #[serde(skip)]
    pub(crate) network_lines: Vec<Evidence>,
    /// NCCL looked for an external net plugin (`libnccl-net*.so`, aws-ofi-nccl on EFA) and
    /// found none: why it fell back to its internal IB/Socket transports.
    #[serde(skip)]
    pub(crate) plugin_missing: Vec<Evidence>,
}

impl LogSummary {
    pub(crate) fn ofi_version(&self) -> Option<Version> {
        self.aws_ofi_nccl_version
            .as_deref()
            .and_then(Version::parse_lenient)
    }

    /// Whether `rank` (with device index `local`, when printed) was seen on `host` and
    /// nowhere else. Sub-communicators renumber ranks, so the device index must agree too.
    pub(crate) fn rank_is_on(&self, rank: u32, local: Option<u32>, host: &str) -> bool {
        if self.rank_host.get(&rank).map(String::as_str) != Some(host) {
            return false;
        }
        let known = self.rank_local.get(&(host.to_string(), rank));
        match (local, known) {
            (Some(local), Some(known)) => local == *known,
            _ => true,
        }
    }

    pub(crate) fn world(&self) -> Option<CommShape> {
        self.shapes
            .iter()
            .map(|(_, shape)| *shape)
            .max_by_key(|shape| shape.n_ranks)
    }
}

/// Counts NCCL records; detection uses it without parsing everything.
pub(crate) fn count_nccl_lines(text: &str) -> usize {
    text.lines()
        .enumerate()
        .filter(|(index, raw)| NcclLine::parse(index + 1, raw).is_some())
        .count()
}

pub(crate) fn parse(text: &str) -> LogSummary {
    let mut state = State::default();
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        match NcclLine::parse(line_no, raw) {
            Some(line) => state.record(&line),
            None => state.env.extend(env::from_plain_line(line_no, raw)),
        }
    }
    state.finish()
}

#[derive(Default)]
struct State {
    summary_lines: usize,
    nccl_version: Option<String>,
    ofi_version: Option<String>,
    libfabric: Option<String>,
    platform: Option<String>,
    networks: BTreeSet<String>,
    network_lines: Vec<Evidence>,
    plugin_missing: Vec<Evidence>,
    ofi_lines: Vec<Evidence>,
    env: Vec<env::Observed>,
    connections: Vec<ConnRecord>,
    shapes: Vec<(Evidence, CommShape)>,
    /// rank -> hosts it was seen on; more than one means sub-communicators renumbered it.
    rank_hosts: BTreeMap<u32, BTreeSet<String>>,
    rank_local: BTreeMap<(String, u32), u32>,
    processes: BTreeMap<String, BTreeSet<u32>>,
    host_shape: BTreeMap<String, CommShape>,
    gdr_flags: Vec<(Evidence, bool)>,
    warnings: Vec<Evidence>,
}

impl State {
    fn record(&mut self, line: &NcclLine<'_>) {
        self.summary_lines += 1;
        let host = line.host.to_string();
        self.processes
            .entry(host.clone())
            .or_default()
            .insert(line.pid);
        let msg = line.msg;
        let evidence = || Evidence::new(line.line_no, line.raw);
        if line.level == Level::Warn {
            self.warnings.push(evidence());
        }
        if let Some(conn) = Connection::parse(msg) {
            let me = conn.printing_rank();
            self.rank_hosts.entry(me).or_default().insert(host.clone());
            let local = if me == conn.src {
                conn.src_local
            } else {
                conn.dst_local
            };
            // NCCL 2.18 prints bus ids in the brackets; the record's `[dev]` is then the
            // only local index there is.
            self.rank_local
                .insert((host.clone(), me), local.unwrap_or(line.dev));
            self.connections.push(ConnRecord {
                line: line.line_no,
                raw: line.raw.to_string(),
                host,
                conn,
            });
            return;
        }
        if let Some(caps) = COMM_SHAPE.captures(msg) {
            let number = |name: &str| caps[name].parse::<u32>().unwrap_or(0);
            let shape = CommShape {
                n_ranks: number("nranks"),
                n_nodes: number("nnodes"),
                local_ranks: number("lranks"),
            };
            let rank = number("rank");
            self.rank_hosts
                .entry(rank)
                .or_default()
                .insert(host.clone());
            self.rank_local
                .insert((host.clone(), rank), number("lrank"));
            let known = self.host_shape.entry(host).or_insert(shape);
            if shape.n_ranks > known.n_ranks {
                *known = shape;
            }
            self.shapes.push((evidence(), shape));
            return;
        }
        if let Some(observed) = env::from_nccl_msg(line.line_no, line.raw, msg) {
            self.env.push(observed);
            return;
        }
        self.record_identity(msg, evidence);
    }

    /// Versions, platform and network choice: the context the rules judge against.
    fn record_identity(&mut self, msg: &str, evidence: impl Fn() -> Evidence) {
        if let Some(rest) = msg.strip_prefix("NCCL version ") {
            self.nccl_version
                .get_or_insert_with(|| rest.split_whitespace().next().unwrap_or(rest).to_string());
        } else if let Some(rest) = msg.strip_prefix("NET/OFI Initializing aws-ofi-nccl ") {
            self.ofi_version
                .get_or_insert_with(|| rest.trim().to_string());
            self.ofi_lines.push(evidence());
        } else if let Some(rest) = msg.strip_prefix("NET/OFI Using Libfabric version ") {
            self.libfabric
                .get_or_insert_with(|| rest.trim().to_string());
        } else if let Some(rest) = msg.strip_prefix("NET/OFI Running on ") {
            if let Some(platform) = rest.split_whitespace().next() {
                self.platform
                    .get_or_insert_with(|| platform.trim_end_matches(',').to_string());
            }
        } else if let Some(rest) = msg.strip_prefix("Using network ") {
            self.networks.insert(rest.trim().to_string());
            self.network_lines.push(evidence());
        } else if msg.starts_with("NET/OFI") {
            self.ofi_lines.push(evidence());
        } else if transport::net_plugin_missing(msg) {
            self.plugin_missing.push(evidence());
        }
        if let Some(caps) = GDR_FLAG.captures(msg) {
            self.gdr_flags.push((evidence(), &caps["on"] == "1"));
        } else if msg.contains("GPU Direct RDMA Disabled") {
            self.gdr_flags.push((evidence(), false));
        }
    }

    fn finish(self) -> LogSummary {
        let rank_host: BTreeMap<u32, String> = self
            .rank_hosts
            .iter()
            .filter(|(_, hosts)| hosts.len() == 1)
            .filter_map(|(rank, hosts)| Some((*rank, hosts.first()?.clone())))
            .collect();
        let hosts = self
            .processes
            .iter()
            .map(|(host, pids)| HostSummary {
                host: host.clone(),
                processes: pids.len(),
                ranks: self
                    .rank_local
                    .iter()
                    .filter(|((h, _), _)| h == host)
                    .map(|((_, rank), local)| RankLocal {
                        rank: *rank,
                        local_rank: *local,
                    })
                    .collect(),
                comm: self.host_shape.get(host).copied(),
                transports: transport_use(self.connections.iter().filter(|c| &c.host == host)),
                pairs: pair_transports(self.connections.iter().filter(|c| &c.host == host)),
            })
            .collect();
        LogSummary {
            nccl_version: self.nccl_version,
            aws_ofi_nccl_version: self.ofi_version,
            libfabric_version: self.libfabric,
            platform: self.platform,
            networks: self.networks.into_iter().collect(),
            hosts,
            env: env::settle(self.env),
            nccl_lines: self.summary_lines,
            connections: self.connections,
            rank_host,
            rank_local: self.rank_local,
            gdr_flags: self.gdr_flags,
            warnings: self.warnings,
            shapes: self.shapes,
            ofi_lines: self.ofi_lines,
            network_lines: self.network_lines,
            plugin_missing: self.plugin_missing,
        }
    }
}

/// Rank pairs and channel ids seen for one transport label.
type PairsAndChannels = (BTreeSet<(u32, u32)>, BTreeSet<u32>);

fn transport_use<'a>(records: impl Iterator<Item = &'a ConnRecord>) -> Vec<TransportUse> {
    let mut by_label: BTreeMap<(TransportClass, String), PairsAndChannels> = BTreeMap::new();
    for record in records {
        let transport = &record.conn.transport;
        let entry = by_label
            .entry((transport.class, transport.label.clone()))
            .or_default();
        entry.0.insert((record.conn.src, record.conn.dst));
        entry.1.insert(record.conn.channel);
    }
    by_label
        .into_iter()
        .map(|((class, label), (pairs, channels))| TransportUse {
            label,
            class,
            pairs: pairs.len(),
            channels: channels.len(),
            sample_pairs: pairs
                .iter()
                .take(4)
                .map(|(src, dst)| format!("{src}->{dst}"))
                .collect(),
        })
        .collect()
}

fn pair_transports<'a>(records: impl Iterator<Item = &'a ConnRecord>) -> Vec<PairTransport> {
    let mut by_pair: BTreeMap<(u32, u32, String), (TransportClass, BTreeSet<u32>)> =
        BTreeMap::new();
    for record in records {
        let transport = &record.conn.transport;
        by_pair
            .entry((record.conn.src, record.conn.dst, transport.label.clone()))
            .or_insert_with(|| (transport.class, BTreeSet::new()))
            .1
            .insert(record.conn.channel);
    }
    by_pair
        .into_iter()
        .map(|((src, dst, transport), (class, channels))| PairTransport {
            src,
            dst,
            transport,
            class,
            channels: channels.into_iter().collect(),
        })
        .collect()
}
