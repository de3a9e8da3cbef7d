//! nccl-tests output (`all_reduce_perf` and friends, single and multi node): the result
//! table, the peak bus bandwidth and a verdict against the expectation table.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use trainplace_catalog::bandwidth::Expectation;

use crate::catalog;
use crate::finding::{Evidence, Finding, Severity};
use crate::line::strip_log_prefix;
use crate::options::Options;

static RANK_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(?P<device>.+?)\s*$")
        .expect("static regex")
});
static TEST_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?P<name>[a-z_]+)_perf\b").expect("static regex"));

/// Below this the peak is not a bandwidth measurement yet: latency dominates.
const MIN_JUDGED_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub line: usize,
    pub size: u64,
    pub count: u64,
    pub data_type: String,
    pub algbw: f64,
    pub busbw: f64,
    pub in_place_algbw: Option<f64>,
    pub in_place_busbw: Option<f64>,
    pub wrong: u64,
    /// The table line as printed, for evidence.
    #[serde(skip)]
    pub raw: String,
}

impl Row {
    pub(crate) fn best_busbw(&self) -> f64 {
        self.busbw.max(self.in_place_busbw.unwrap_or(0.0))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Within,
    Above,
    Below,
    FarBelow,
    NotJudged,
}

impl Verdict {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Within => "within the expected range",
            Self::Above => "above the expected range",
            Self::Below => "below the expected range",
            Self::FarBelow => "far below the expected range",
            Self::NotJudged => "not judged",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TestsSummary {
    /// `all_reduce`, when the output names the binary.
    pub test: Option<String>,
    pub rows: Vec<Row>,
    pub peak_busbw: f64,
    pub peak_size: u64,
    pub avg_busbw: Option<f64>,
    pub ranks: usize,
    pub hosts: Vec<String>,
    pub device: Option<String>,
    pub instance_type: Option<String>,
    /// Where the instance type came from: `--instance-type` or the GPU name in `# Rank`.
    pub instance_type_from: Option<String>,
    pub nodes: Option<u32>,
    pub gpus_per_node: Option<u32>,
    /// Whether NCCL used NVLink SHARP, from its log in the same output (`NVLS multicast
    /// support is [not] available`, `NCCL_NVLS_ENABLE set by environment to 0`); `None`
    /// when the output does not say.
    pub nvls: Option<bool>,
    pub expectation: Option<Expectation>,
    pub verdict: Verdict,
    /// Why there is no verdict, or what the verdict rests on.
    pub basis: String,
    #[serde(skip)]
    peak_line: Option<Evidence>,
    /// Each `# Rank N ... on HOST` line's rank and host.
    #[serde(skip)]
    pub(crate) rank_host: std::collections::BTreeMap<u32, String>,
}

/// A result row: `size count type [redop root] time algbw busbw #wrong time algbw busbw #wrong`.
fn parse_row(line: usize, text: &str) -> Option<Row> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    if tokens.len() < 6 || tokens[0].starts_with('#') {
        return None;
    }
    let size: u64 = tokens[0].parse().ok()?;
    let count: u64 = tokens[1].parse().ok()?;
    let data_type = tokens[2];
    if data_type.parse::<f64>().is_ok() {
        return None;
    }
    let number = |token: &str| token.parse::<f64>().ok();
    let wrong = |token: &str| token.parse::<f64>().map(|w| w as u64).unwrap_or(0);
    let tail = &tokens[3..];
    let (out, inp) = if tail.len() >= 8 {
        let n = tail.len();
        (&tail[n - 8..n - 4], Some(&tail[n - 4..]))
    } else if tail.len() >= 4 {
        (&tail[tail.len() - 4..], None)
    } else {
        return None;
    };
    let algbw = number(out[1])?;
    let busbw = number(out[2])?;
    number(out[0])?;
    Some(Row {
        line,
        size,
        count,
        data_type: data_type.to_string(),
        algbw,
        busbw,
        in_place_algbw: inp.and_then(|i| number(i[1])),
        in_place_busbw: inp.and_then(|i| number(i[2])),
        wrong: wrong(out[3]) + inp.map(|i| wrong(i[3])).unwrap_or(0),
        raw: text.to_string(),
    })
}

fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .enumerate()
        .filter_map(|(index, raw)| parse_row(index + 1, strip_log_prefix(raw)))
        .collect()
}

pub(crate) fn looks_like(text: &str) -> bool {
    text.contains("busbw") && !rows(text).is_empty()
}

pub(crate) fn analyse(text: &str, opts: &Options) -> TestsSummary {
    let rows = rows(text);
    let mut hosts = BTreeSet::new();
    let mut ranks = 0usize;
    let mut per_host: std::collections::BTreeMap<String, u32> = Default::default();
    let mut rank_host = std::collections::BTreeMap::new();
    let mut device = None;
    let mut avg_busbw = None;
    let mut test = None;
    let mut nvls = None;
    for raw in text.lines() {
        let line = strip_log_prefix(raw).trim();
        if let Some(state) = nvls_state(line) {
            // Off anywhere wins: one rank without NVLS keeps the communicator off it.
            nvls = Some(nvls.unwrap_or(true) && state);
        }
        if let Some(caps) = RANK_LINE.captures(line) {
            ranks += 1;
            if let Ok(rank) = caps["rank"].parse::<u32>() {
                rank_host.insert(rank, caps["host"].to_string());
            }
            hosts.insert(caps["host"].to_string());
            *per_host.entry(caps["host"].to_string()).or_default() += 1;
            device.get_or_insert_with(|| caps["device"].to_string());
        } else if let Some(rest) = line.strip_prefix("# Avg bus bandwidth") {
            avg_busbw = rest.trim_start_matches([' ', ':']).trim().parse().ok();
        } else if test.is_none() {
            test = TEST_NAME
                .captures(line)
                .map(|caps| caps["name"].to_string());
        }
    }
    let peak = rows
        .iter()
        .max_by(|a, b| a.best_busbw().total_cmp(&b.best_busbw()));
    let peak_busbw = peak.map(Row::best_busbw).unwrap_or(0.0);
    let peak_size = peak.map(|row| row.size).unwrap_or(0);
    let peak_line = peak.map(|row| Evidence::new(row.line, &row.raw));
    let gpus_per_node = per_host.values().copied().max();
    let nodes = opts
        .nodes
        .or((!hosts.is_empty()).then_some(hosts.len() as u32));
    let mut summary = TestsSummary {
        test,
        peak_busbw,
        peak_size,
        avg_busbw,
        ranks,
        hosts: hosts.into_iter().collect(),
        device,
        instance_type: None,
        instance_type_from: None,
        nodes,
        gpus_per_node,
        nvls,
        expectation: None,
        verdict: Verdict::NotJudged,
        basis: String::new(),
        peak_line,
        rank_host,
        rows,
    };
    judge(&mut summary, opts);
    summary
}

/// The instance types the run may have used: the `--instance-type` given, else those
/// with its GPU model and count; where that came from goes in the summary.
fn candidate_types(summary: &mut TestsSummary, opts: &Options) -> Vec<String> {
    match (&opts.instance_type, &summary.device) {
        (Some(name), _) => {
            summary.instance_type_from = Some("--instance-type".into());
            vec![name.clone()]
        }
        (None, Some(device)) => {
            summary.instance_type_from = Some(format!("GPU name `{device}` in the # Rank lines"));
            catalog::by_device(device, summary.gpus_per_node)
                .into_iter()
                .map(|instance| instance.name.clone())
                .collect()
        }
        (None, None) => Vec::new(),
    }
}

/// What one line of NCCL's INFO log says of NVLink SHARP. NCCL logs the multicast
/// support of each device at init (`src/transport/nvls.cc`,
/// <https://github.com/NVIDIA/nccl/blob/master/src/transport/nvls.cc>), and the variable
/// when set (`NCCL_NVLS_ENABLE`, <https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-nvls-enable>).
fn nvls_state(line: &str) -> Option<bool> {
    if line.contains("NVLS multicast support is not available") {
        Some(false)
    } else if line.contains("NVLS multicast support is available") {
        Some(true)
    } else if line.contains("NCCL_NVLS_ENABLE set by environment to 0") {
        Some(false)
    } else {
        None
    }
}

/// The verdict of the peak bus bandwidth against the expectation's range.
fn verdict(peak: f64, expectation: &Expectation) -> Verdict {
    if peak < expectation.low / 4.0 {
        Verdict::FarBelow
    } else if peak < expectation.low {
        Verdict::Below
    } else if peak > expectation.high {
        Verdict::Above
    } else {
        Verdict::Within
    }
}

/// Judge the peak against the expectation for the instance type and node count, or
/// say in `basis` why there is no verdict.
fn judge(summary: &mut TestsSummary, opts: &Options) {
    let candidates = candidate_types(summary, opts);
    if let [only] = candidates.as_slice() {
        summary.instance_type = Some(only.clone());
    }
    if !summary
        .test
        .as_deref()
        .is_none_or(|t| matches!(t, "all_reduce" | "reduce_scatter" | "all_gather"))
    {
        summary.basis = "the expectation table covers all_reduce_perf (and ring-bound all_gather / reduce_scatter) only".into();
        return;
    }
    let Some(nodes) = summary.nodes else {
        summary.basis = "node count unknown: no `# Rank ... on HOST` lines; pass --nodes".into();
        return;
    };
    if candidates.is_empty() {
        summary.basis = "instance type unknown: pass --instance-type".into();
        return;
    }
    let found: Vec<Option<&Expectation>> = candidates
        .iter()
        .map(|name| {
            opts.expectations
                .lookup_nvls(name, nodes, summary.gpus_per_node, summary.nvls)
        })
        .collect();
    let Some(Some(expectation)) = found.first() else {
        summary.basis = format!(
            "no expectation for {} on {nodes} node(s) in the table",
            candidates.join(" / ")
        );
        return;
    };
    if found
        .iter()
        .any(|other| other.map(|o| (o.low, o.high)) != Some((expectation.low, expectation.high)))
    {
        summary.basis = format!(
            "instance type is one of {}; their expectations differ: pass --instance-type",
            candidates.join(", ")
        );
        return;
    }
    if summary.peak_size < MIN_JUDGED_BYTES {
        summary.basis = format!(
            "largest message is {} B; run up to at least 256 MiB (-e 1G) for a bandwidth verdict",
            summary.peak_size
        );
        return;
    }
    summary.verdict = verdict(summary.peak_busbw, expectation);
    let nvls = nvls_note(summary.nvls, expectation);
    summary.basis = format!(
        "{} on {nodes} node(s){}{nvls}: {:.1}..{:.1} GB/s from {}; instance type from {}",
        candidates.join(" / "),
        summary
            .gpus_per_node
            .map(|g| format!(", {g} GPU(s) per node"))
            .unwrap_or_default(),
        expectation.low,
        expectation.high,
        expectation.source,
        summary.instance_type_from.as_deref().unwrap_or("?")
    );
    summary.expectation = Some((*expectation).clone());
}

/// Which NVLS state the range is for, when the table has one per state.
fn nvls_note(nvls: Option<bool>, expectation: &Expectation) -> String {
    let Some(row) = expectation.nvls else {
        return String::new();
    };
    let word = |on: bool| if on { "on" } else { "off" };
    match nvls {
        Some(state) if state == row => format!(", NVLS {} (NCCL's log)", word(state)),
        Some(state) => format!(
            ", NVLS {} (NCCL's log) but the table has no NVLS-{} row: judged by the NVLS-{} range, which a slow node may pass",
            word(state),
            word(state),
            word(row)
        ),
        None => format!(
            ", NVLS state unknown (no NCCL INFO log in the input; run with NCCL_DEBUG=INFO): judged by the NVLS-{} range",
            word(row)
        ),
    }
}

pub(crate) fn check(summary: &TestsSummary) -> Vec<Finding> {
    let mut findings = Vec::new();
    let wrong: Vec<Evidence> = summary
        .rows
        .iter()
        .filter(|row| row.wrong > 0)
        .map(|row| Evidence::new(row.line, &row.raw))
        .collect();
    if !wrong.is_empty() {
        findings.push(
            Finding::new(
                Severity::Error,
                "nccl-tests-wrong-results",
                format!("{} size(s) returned wrong values: the data path corrupts data", wrong.len()),
                "Rerun with -c 1; check EFA/driver versions and GPU health (dcgmi diag) before trusting any bandwidth.".into(),
            )
            .with_evidence(wrong),
        );
    }
    let peak = summary.peak_busbw;
    let (severity, rule, message) = match summary.verdict {
        Verdict::Within => (
            Severity::Info,
            "busbw-within-expected",
            format!("peak busbw {peak:.1} GB/s is within the expected range"),
        ),
        Verdict::Above => (
            Severity::Info,
            "busbw-above-expected",
            format!(
                "peak busbw {peak:.1} GB/s is above the expected range: the table is conservative here, tell us the number"
            ),
        ),
        Verdict::Below => (
            Severity::Warning,
            "busbw-below-expected",
            format!("peak busbw {peak:.1} GB/s is below the expected range"),
        ),
        Verdict::FarBelow => (
            Severity::Error,
            "busbw-far-below-expected",
            format!(
                "peak busbw {peak:.1} GB/s is under a quarter of the expected low end: a transport fallback (docs/measurements.md, one host: SHM 13x and TCP 88x slower than NVLink)"
            ),
        ),
        Verdict::NotJudged => (
            Severity::Info,
            "busbw-not-judged",
            format!("peak busbw {peak:.1} GB/s was not judged"),
        ),
    };
    let fix = match summary.verdict {
        Verdict::Within | Verdict::Above => "Nothing to fix.".to_string(),
        Verdict::NotJudged => "Pass --instance-type and --nodes when the output does not show them.".to_string(),
        _ if summary.nodes > Some(1) => "Run with NCCL_DEBUG=INFO and diagnose that log: NET/Socket means EFA is not used (request vpc.amazonaws.com/efa, EFA security group self rule); check the nodes share a cluster placement group or Capacity Block in one AZ.".to_string(),
        _ => "Run with NCCL_DEBUG=INFO and diagnose that log: SHM between local GPUs means P2P is blocked (hostIPC, Fabric Manager, NCCL_P2P_DISABLE); `nvidia-smi topo -m` shows whether NVLink is visible.".to_string(),
    };
    findings.push(
        Finding::new(severity, rule, format!("{message}; {}", summary.basis), fix)
            .with_evidence(summary.peak_line.clone()),
    );
    findings
}
