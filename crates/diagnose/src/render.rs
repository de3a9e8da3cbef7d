//! The human rendering: per-host transport table, topology advice, nccl-tests table,
//! then findings, errors first. JSON comes straight from serde on [`Report`].

use std::fmt::Write;

use crate::finding::Severity;
use crate::nccl_log::{LogSummary, RankLocal};
use crate::nccl_tests::TestsSummary;
use crate::network_rules::{NetworkSpan, layer_counts, rank_ranges};
use crate::report::Report;
use crate::topo::TopoSummary;

pub fn render_text(report: &Report, source: &str) -> String {
    let mut out = String::new();
    let kinds: Vec<&str> = report.kinds.iter().map(|kind| kind.name()).collect();
    let _ = writeln!(out, "trainplace diagnose: {source} ({})", kinds.join(" + "));
    if let Some(log) = &report.nccl_log {
        render_log(&mut out, log);
    }
    for topo in report.topo.iter().chain(&report.more_topo) {
        render_topo(&mut out, topo);
    }
    if let Some(tests) = &report.nccl_tests {
        render_tests(&mut out, tests);
    }
    if let Some(network) = &report.network {
        render_network(&mut out, network);
    }
    render_findings(&mut out, report);
    out
}

fn render_log(out: &mut String, log: &LogSummary) {
    let mut context = Vec::new();
    let mut push = |label: &str, value: &Option<String>| {
        if let Some(value) = value {
            context.push(format!("{label} {value}"));
        }
    };
    push("NCCL", &log.nccl_version);
    push("aws-ofi-nccl", &log.aws_ofi_nccl_version);
    push("libfabric", &log.libfabric_version);
    push("platform", &log.platform);
    if !log.networks.is_empty() {
        context.push(format!("network {}", log.networks.join(",")));
    }
    let context = if context.is_empty() {
        String::new()
    } else {
        format!("; {}", context.join(" | "))
    };
    let _ = writeln!(out, "\nNCCL log: {} NCCL lines{context}", log.nccl_lines);
    let _ = writeln!(
        out,
        "  {:<28} {:>5}  {:<16} {:<20} {:<28} {:>5} {:>3}",
        "host", "procs", "rank[local]", "nRanks/nNodes/local", "transport", "pairs", "ch"
    );
    for host in &log.hosts {
        let ranks = compact_ranks(&host.ranks);
        let shape = host
            .comm
            .map(|c| format!("{}/{}/{}", c.n_ranks, c.n_nodes, c.local_ranks))
            .unwrap_or_else(|| "-".into());
        let mut first = true;
        let transports = host.transports.iter().map(Some);
        let transports: Vec<_> = if host.transports.is_empty() {
            vec![None]
        } else {
            transports.collect()
        };
        for transport in transports {
            let (label, pairs, channels) = transport
                .map(|t| {
                    (
                        t.label.as_str(),
                        t.pairs.to_string(),
                        t.channels.to_string(),
                    )
                })
                .unwrap_or(("-", String::new(), String::new()));
            if first {
                let _ = writeln!(
                    out,
                    "  {:<28} {:>5}  {:<16} {:<20} {:<28} {:>5} {:>3}",
                    clip(&host.host, 28),
                    host.processes,
                    clip(&ranks, 16),
                    shape,
                    label,
                    pairs,
                    channels
                );
                first = false;
            } else {
                let _ = writeln!(
                    out,
                    "  {:<73} {:<28} {:>5} {:>3}",
                    "", label, pairs, channels
                );
            }
        }
    }
}

fn render_topo(out: &mut String, topo: &TopoSummary) {
    let links: Vec<String> = topo
        .link_counts
        .iter()
        .map(|(link, count)| format!("{link} x{count}"))
        .collect();
    let source = topo
        .source
        .as_deref()
        .map(|source| format!(" ({source})"))
        .unwrap_or_default();
    let model = topo
        .gpu_model
        .as_deref()
        .map(|model| format!(" {model}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\nnvidia-smi topo{source}: {} GPUs{model}; GPU pairs: {}; NUMA nodes: {}",
        topo.gpus,
        if links.is_empty() {
            "-".into()
        } else {
            links.join(", ")
        },
        if topo.numa_nodes.is_empty() {
            "-".into()
        } else {
            topo.numa_nodes.join(",")
        }
    );
    let _ = writeln!(
        out,
        "  intra-node P2P: {}; NCCL_P2P_LEVEL: {}",
        match (topo.p2p_possible, topo.nvlink) {
            (true, true) => "possible over NVLink",
            (true, false) => "possible over PCIe",
            (false, true) => "NVLink on some pairs only",
            (false, false) => "not by default (through the CPU: SHM)",
        },
        topo.p2p_level
    );
    // GPUs sharing a CPU/NUMA affinity are listed as one range: 8 lines say less than 2.
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for affinity in &topo.affinity {
        match groups.last_mut() {
            Some((cpu, numa, gpus))
                if *cpu == affinity.cpu_affinity && *numa == affinity.numa_affinity =>
            {
                gpus.push(&affinity.gpu)
            }
            _ => groups.push((
                affinity.cpu_affinity.clone(),
                affinity.numa_affinity.clone(),
                vec![&affinity.gpu],
            )),
        }
    }
    for (cpu, numa, gpus) in groups {
        let names = match gpus.as_slice() {
            [only] => only.to_string(),
            [first, .., last] => format!("{first}..{last}"),
            [] => continue,
        };
        let _ = writeln!(out, "  {names:<12} CPU affinity {cpu:<18} NUMA {numa}");
    }
    for advice in &topo.advice {
        let _ = writeln!(out, "  - {advice}");
    }
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024 && value.is_multiple_of(1024) && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value} {}", UNITS[unit])
}

fn render_tests(out: &mut String, tests: &TestsSummary) {
    let _ = writeln!(
        out,
        "\nnccl-tests: {}; {} rank(s) on {} host(s); {}",
        tests
            .test
            .as_deref()
            .map(|t| format!("{t}_perf"))
            .unwrap_or_else(|| "test name not shown".into()),
        tests.ranks,
        tests.hosts.len(),
        tests.device.as_deref().unwrap_or("GPU not shown")
    );
    let _ = writeln!(out, "  {:>10} {:>9} {:>9}", "size", "algbw", "busbw");
    for row in &tests.rows {
        let algbw = row.algbw.max(row.in_place_algbw.unwrap_or(0.0));
        let _ = writeln!(
            out,
            "  {:>10} {:>9.2} {:>9.2}",
            human_bytes(row.size),
            algbw,
            row.best_busbw()
        );
    }
    let _ = writeln!(
        out,
        "  peak busbw {:.2} GB/s at {}{}",
        tests.peak_busbw,
        human_bytes(tests.peak_size),
        tests
            .avg_busbw
            .map(|avg| format!("; avg bus bandwidth {avg:.2} GB/s"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "  verdict: {}; {}", tests.verdict.label(), tests.basis);
}

/// Where the ranks' hosts sit in the EC2 network: a line per bottom-layer network node.
fn render_network(out: &mut String, span: &NetworkSpan) {
    let hosts: usize = span.groups.iter().map(|g| g.hosts.len()).sum();
    let shared = match span.shared_layer {
        0 => "no network node shared by all".to_string(),
        layer => format!("all share a layer-{layer} node"),
    };
    let _ = writeln!(
        out,
        "\nnetwork (EC2 topology): {hosts} host(s) under {} network node(s); {shared}",
        if span.layers.is_empty() {
            "no".to_string()
        } else {
            layer_counts(span)
        }
    );
    for g in &span.groups {
        let meets = g
            .meets_largest_at
            .map(|at| match at {
                0 => "  shares no node with the first".to_string(),
                at => format!("  meets the first at layer {at}"),
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<24} layer {}  ranks {:<12} {}{meets}",
            clip(&g.network_node, 24),
            g.layer,
            if g.ranks.is_empty() {
                "-".to_string()
            } else {
                rank_ranges(&g.ranks)
            },
            g.hosts.join(", ")
        );
    }
    if !span.unknown_hosts.is_empty() {
        let _ = writeln!(
            out,
            "  not in the topology: {}",
            span.unknown_hosts.join(", ")
        );
    }
}

fn render_findings(out: &mut String, report: &Report) {
    let count = |severity| {
        report
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    };
    let _ = writeln!(
        out,
        "\nfindings: {} error(s), {} warning(s), {} info",
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info)
    );
    for finding in &report.findings {
        let _ = writeln!(
            out,
            "{:<7} {}: {}",
            finding.severity.label().to_uppercase(),
            finding.rule,
            finding.message
        );
        let _ = writeln!(out, "        fix: {}", finding.fix);
        for evidence in &finding.evidence {
            let _ = writeln!(
                out,
                "        L{:<6} {}",
                evidence.line,
                evidence.text.trim()
            );
        }
        if finding.more_evidence > 0 {
            let _ = writeln!(
                out,
                "        ... and {} more line(s)",
                finding.more_evidence
            );
        }
    }
}

fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let kept: String = text.chars().take(width.saturating_sub(1)).collect();
        format!("{kept}~")
    }
}

/// `0[0],1[1]` for a few ranks, `0[0]..7[7] (8)` for a full node.
fn compact_ranks(ranks: &[RankLocal]) -> String {
    let one = |r: &RankLocal| format!("{}[{}]", r.rank, r.local_rank);
    match ranks {
        [] => "-".into(),
        [first, .., last] if ranks.len() > 2 => {
            format!("{}..{} ({})", one(first), one(last), ranks.len())
        }
        _ => ranks.iter().map(one).collect::<Vec<_>>().join(","),
    }
}
