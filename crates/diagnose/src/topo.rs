//! `nvidia-smi topo -m`: the link between every GPU pair and each GPU's CPU/NUMA affinity,
//! turned into advice on P2P, NCCL_P2P_LEVEL and what one pod per node buys.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::finding::Evidence;
use crate::gpu_names;
use crate::line::{pod_prefix, strip_ansi, strip_log_prefix};

/// Link kinds, best first; `Nv(n)` is a bond of n NVLinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Link {
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl Link {
    pub(crate) fn parse(token: &str) -> Option<Self> {
        match token {
            "PIX" => Some(Self::Pix),
            "PXB" => Some(Self::Pxb),
            "PHB" => Some(Self::Phb),
            "NODE" => Some(Self::Node),
            // SOC is what older drivers called SYS.
            "SYS" | "SOC" => Some(Self::Sys),
            _ => token.strip_prefix("NV")?.parse().ok().map(Self::Nv),
        }
    }

    pub(crate) fn label(self) -> String {
        match self {
            Self::Nv(n) => format!("NV{n}"),
            Self::Pix => "PIX".into(),
            Self::Pxb => "PXB".into(),
            Self::Phb => "PHB".into(),
            Self::Node => "NODE".into(),
            Self::Sys => "SYS".into(),
        }
    }

    fn rank(self) -> (u8, std::cmp::Reverse<u32>) {
        match self {
            Self::Nv(n) => (0, std::cmp::Reverse(n)),
            Self::Pix => (1, std::cmp::Reverse(0)),
            Self::Pxb => (2, std::cmp::Reverse(0)),
            Self::Phb => (3, std::cmp::Reverse(0)),
            Self::Node => (4, std::cmp::Reverse(0)),
            Self::Sys => (5, std::cmp::Reverse(0)),
        }
    }

    /// NCCL's default P2P level stops at PXB: links through the CPU get SHM instead.
    pub(crate) fn p2p_by_default(self) -> bool {
        matches!(self, Self::Nv(_) | Self::Pix | Self::Pxb)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuAffinity {
    pub gpu: String,
    pub cpu_affinity: String,
    pub numa_affinity: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairLink {
    pub a: String,
    pub b: String,
    pub link: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TopoSummary {
    /// `pod/NAME/container` when the matrix came through `kubectl logs --prefix`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The model of GPU 0, from `nvidia-smi -L` lines next to the matrix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    pub gpus: usize,
    pub nics: Vec<String>,
    /// Count of GPU pairs per link kind, e.g. {"NV12": 28}.
    pub link_counts: BTreeMap<String, usize>,
    pub best_link: Option<String>,
    pub worst_link: Option<String>,
    pub pairs: Vec<PairLink>,
    pub affinity: Vec<GpuAffinity>,
    pub numa_nodes: Vec<String>,
    pub p2p_possible: bool,
    pub nvlink: bool,
    pub p2p_level: String,
    pub advice: Vec<String>,
    #[serde(skip)]
    pub(crate) header_line: Option<Evidence>,
    #[serde(skip)]
    pub(crate) links: Vec<Link>,
}

struct Matrix {
    header_line: Evidence,
    /// 0-based index of the header line, and of the first line after the last row.
    start: usize,
    end: usize,
    /// `pod/NAME/container` when `kubectl logs --prefix` printed the matrix.
    prefix: Option<String>,
    columns: Vec<String>,
    rows: Vec<(String, Vec<String>, Vec<String>)>,
}

fn clean(raw: &str) -> String {
    strip_log_prefix(&strip_ansi(raw)).to_string()
}

fn is_header(raw: &str) -> bool {
    raw.contains("GPU0") && {
        let line = clean(raw);
        line.split_whitespace().next() == Some("GPU0") && !line.contains(" X ")
    }
}

/// Every matrix in the input: one per node or pod when several printed theirs.
fn find_matrices(lines: &[&str]) -> Vec<Matrix> {
    let mut matrices = Vec::new();
    let mut from = 0;
    // Logs can be large: only lines that could be the header are cleaned and inspected.
    while let Some(offset) = lines[from..].iter().position(|raw| is_header(raw)) {
        let start = from + offset;
        match read_matrix(lines, start) {
            Some(matrix) => {
                from = matrix.end;
                matrices.push(matrix);
            }
            None => from = start + 1,
        }
    }
    matrices
}

fn read_matrix(lines: &[&str], start: usize) -> Option<Matrix> {
    let header = clean(lines[start]);
    let columns: Vec<String> = header
        .split_whitespace()
        .take_while(|token| *token != "CPU")
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for raw in lines.iter().skip(start + 1).take(2047) {
        let line = clean(raw);
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = tokens.first() else { break };
        if !columns.iter().any(|column| column == first) {
            break;
        }
        let links: Vec<String> = tokens
            .iter()
            .skip(1)
            .take(columns.len())
            .map(|t| t.to_string())
            .collect();
        let rest: Vec<String> = tokens
            .iter()
            .skip(1 + columns.len())
            .map(|t| t.to_string())
            .collect();
        rows.push((first.to_string(), links, rest));
    }
    let has_self = rows
        .first()
        .is_some_and(|(_, links, _)| links.first().is_some_and(|link| link == "X"));
    let prefix = pod_prefix(lines[start]).map(str::to_string);
    let quoted = match &prefix {
        Some(prefix) => format!("[{prefix}] {header}"),
        None => header.clone(),
    };
    has_self.then(|| Matrix {
        header_line: Evidence::new(start + 1, &quoted),
        start,
        end: start + 1 + rows.len(),
        prefix,
        columns,
        rows,
    })
}

pub(crate) fn looks_like(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    !find_matrices(&lines).is_empty()
}

/// One summary per matrix, in input order. NIC and GPU-name lines are matched to the
/// matrix printed next to them (and by pod, when the lines carry a `kubectl logs --prefix`).
pub(crate) fn parse(text: &str) -> Vec<TopoSummary> {
    let lines: Vec<&str> = text.lines().collect();
    let matrices = find_matrices(&lines);
    if matrices.is_empty() {
        let nics = nic_lines(&lines, 0..lines.len(), None);
        return vec![summarise(Vec::new(), Vec::new(), nics, None)];
    }
    let several = matrices.len() > 1;
    let gpu_names = gpu_names::read(&lines);
    let mut summaries = Vec::new();
    for (index, matrix) in matrices.iter().enumerate() {
        let prefix = several.then_some(matrix.prefix.as_deref());
        let previous_end = index.checked_sub(1).map_or(0, |i| matrices[i].end);
        let next_start = matrices
            .get(index + 1)
            .map_or(lines.len(), |next| next.start);
        // The NIC legend follows its matrix; the first matrix also owns what precedes it.
        let legend_from = if index == 0 { 0 } else { matrix.start };
        let nics = nic_lines(&lines, legend_from..next_start, prefix);
        // `nvidia-smi -L` printed before the matrix, else after it.
        let model = gpu_names::model(&gpu_names, previous_end..matrix.start, prefix)
            .or_else(|| gpu_names::model(&gpu_names, matrix.end..next_start, prefix));
        let mut summary = summarise_matrix(matrix, nics);
        summary.source = matrix.prefix.clone();
        summary.gpu_model = model;
        summaries.push(summary);
    }
    summaries
}

fn nic_lines(
    lines: &[&str],
    range: std::ops::Range<usize>,
    prefix: Option<Option<&str>>,
) -> Vec<String> {
    lines[range]
        .iter()
        .filter(|raw| raw.contains("NIC"))
        .filter(|raw| prefix.is_none_or(|prefix| pod_prefix(raw) == prefix))
        .map(|raw| clean(raw))
        .filter_map(|line| {
            let (name, device) = line.trim().split_once(": ")?;
            (name.starts_with("NIC") && name[3..].parse::<u32>().is_ok())
                .then(|| format!("{name}: {}", device.trim()))
        })
        .collect()
}

fn summarise_matrix(matrix: &Matrix, nics: Vec<String>) -> TopoSummary {
    let gpu_rows: Vec<_> = matrix
        .rows
        .iter()
        .filter(|(name, ..)| name.starts_with("GPU"))
        .collect();
    let mut pairs = Vec::new();
    for (i, (a, links, _)) in gpu_rows.iter().enumerate() {
        for (b, ..) in gpu_rows.iter().skip(i + 1) {
            let column = matrix.columns.iter().position(|column| column == b);
            let link = column
                .and_then(|c| links.get(c))
                .and_then(|t| Link::parse(t));
            if let Some(link) = link {
                pairs.push((a.clone(), b.clone(), link));
            }
        }
    }
    let affinity = gpu_rows
        .iter()
        .map(|(gpu, _, rest)| GpuAffinity {
            gpu: gpu.clone(),
            cpu_affinity: rest.first().cloned().unwrap_or_else(|| "N/A".into()),
            numa_affinity: rest.get(1).cloned().unwrap_or_else(|| "N/A".into()),
        })
        .collect();
    summarise(pairs, affinity, nics, Some(matrix.header_line.clone()))
}

fn summarise(
    pairs: Vec<(String, String, Link)>,
    affinity: Vec<GpuAffinity>,
    nics: Vec<String>,
    header_line: Option<Evidence>,
) -> TopoSummary {
    let links: Vec<Link> = pairs.iter().map(|(.., link)| *link).collect();
    let mut link_counts = BTreeMap::new();
    for link in &links {
        *link_counts.entry(link.label()).or_insert(0) += 1;
    }
    let best = links.iter().copied().min_by_key(|l| l.rank());
    let worst = links.iter().copied().max_by_key(|l| l.rank());
    let mut numa_nodes: Vec<String> = affinity
        .iter()
        .map(|a| a.numa_affinity.clone())
        .filter(|n| n != "N/A")
        .collect();
    numa_nodes.sort();
    numa_nodes.dedup();
    let nvlink = best.is_some_and(|l| matches!(l, Link::Nv(_)));
    let p2p_possible = worst.is_some_and(Link::p2p_by_default);
    let (p2p_level, advice) = advise(best, worst, numa_nodes.len());
    TopoSummary {
        source: None,
        gpu_model: None,
        gpus: affinity.len(),
        nics,
        link_counts,
        best_link: best.map(Link::label),
        worst_link: worst.map(Link::label),
        pairs: pairs
            .into_iter()
            .map(|(a, b, link)| PairLink {
                a,
                b,
                link: link.label(),
            })
            .collect(),
        affinity,
        numa_nodes,
        p2p_possible,
        nvlink,
        p2p_level,
        advice,
        header_line,
        links,
    }
}

fn advise(best: Option<Link>, worst: Option<Link>, numa_nodes: usize) -> (String, Vec<String>) {
    let (Some(best), Some(worst)) = (best, worst) else {
        return (
            "n/a".into(),
            vec!["one GPU only: there is no GPU pair to connect".into()],
        );
    };
    let mut advice = Vec::new();
    let level = match (best, worst) {
        (Link::Nv(_), Link::Nv(_)) => {
            advice.push("every GPU pair has NVLink: P2P is possible over NVLink".into());
            advice.push("one pod per node with all GPUs buys NVLink on this type (pods that split a node talk over the network)".into());
            "NVL"
        }
        (Link::Nv(_), _) => {
            advice.push(format!(
                "some GPU pairs have NVLink, the worst pair goes over {}: NCCL uses P2P where the link allows",
                worst.label()
            ));
            advice
                .push("one pod per node with all GPUs buys NVLink between the linked pairs".into());
            if worst.p2p_by_default() { "PXB" } else { "NVL" }
        }
        (_, w) if w.p2p_by_default() => {
            advice.push(
                "no NVLink; every GPU pair shares a PCIe switch: P2P over PCIe is possible".into(),
            );
            advice.push("one pod per node buys PCIe P2P, not NVLink (none on this type)".into());
            "PXB"
        }
        _ => {
            advice.push(format!(
                "no NVLink; the worst GPU pair goes through the CPU ({}): NCCL uses SHM there by default",
                worst.label()
            ));
            advice.push("one pod per node buys no NVLink on this type, but keeps GPU traffic off the network: SHM measured 25.4 GB/s vs 3.9 GB/s over TCP (docs/measurements.md)".into());
            advice.push("NCCL_P2P_LEVEL=SYS would force P2P through the CPU; measure with nccl-tests before keeping it".into());
            "unset (NCCL default)"
        }
    };
    if numa_nodes > 1 {
        advice.push(format!(
            "GPUs sit on {numa_nodes} NUMA nodes: pin each rank's CPU threads to its GPU's CPU affinity"
        ));
    }
    (level.into(), advice)
}
