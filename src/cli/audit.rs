//! `trainplace audit`: which existing workloads and pods violate policy, as a table or
//! a PolicyReport (wgpolicyk8s.io/v1alpha2), without changing anything. Reads the
//! cluster through the kubeconfig, or `kubectl get ... -o json` output with `--from`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde_json::json;
use trainplace_engine::Snapshot;
use trainplace_engine::{EndingJob, SpreadJob, Verdict};

use super::judge::{Submitter, judge};
use super::policy_reports::{self, Reports};
use super::{ExitCode, Inputs, PolicyArgs};
use crate::inventory::reservations_file;

mod live;
mod pages;

use live::{CLUSTER_SCOPED, client_config};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditOutput {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Audit `kubectl get ... -o json|yaml` output instead of the live cluster.
    #[arg(long, value_name = "FILE")]
    pub from: Option<String>,
    /// The kubeconfig file to read the cluster through (live mode); default: $KUBECONFIG,
    /// else ~/.kube/config, else the in-cluster service account.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (live mode); default: its current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Only this namespace (live mode); default: all namespaces.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Inventory files for `--from` (DIR/nodes.json, pods.json, namespaces.json,
    /// ec2nodeclasses.json).
    #[arg(long, value_name = "DIR")]
    pub cluster: Option<PathBuf>,
    /// Groups assumed for the objects' submitters (decides which opt-ins count).
    #[arg(long = "group", default_value = "system:authenticated")]
    pub groups: Vec<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: AuditOutput,
    /// Also list running jobs on Capacity Blocks that end within this long (e.g. 6h),
    /// in the table and as `capacity-block-ends` results of the PolicyReport.
    #[arg(long, value_name = "DURATION", value_parser = window, allow_hyphen_values = true)]
    pub ending_within: Option<jiff::SignedDuration>,
    /// Capacity Blocks from `aws ec2 describe-capacity-reservations --output json`
    /// (EKS managed node groups); Karpenter's come from EC2NodeClasses.
    #[arg(long, value_name = "FILE")]
    pub reservations: Option<PathBuf>,
    /// Also list running jobs whose pods span more layer-3 EC2 network nodes than they
    /// needed, by the nodes' `topology.k8s.aws/network-node-layer-N` labels and how many
    /// nodes of the job's type each layer-3 node holds; in the table and as
    /// `network-spread` results of the PolicyReport.
    #[arg(long)]
    pub network_spread: bool,
    /// Also write the results into the cluster as PolicyReports (wgpolicyk8s.io/v1alpha2):
    /// one named `trainplace` per namespace, updated in place on each run (live mode).
    #[arg(long, conflicts_with = "from")]
    pub write_reports: bool,
    /// Exit 0 when objects are denied (their results are in the output and the
    /// reports); unreadable input still exits 2. For a CronJob, whose Job would
    /// otherwise fail on every run that finds a denied object.
    #[arg(long)]
    pub exit_zero: bool,
    /// Audit as of this time (RFC 3339); default: now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<jiff::Timestamp>,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// What an audit found: the verdicts worth listing (workloads, and whatever is
/// denied), the cluster's inventory, the pods to look for on Capacity Blocks that end
/// soon, and notes on what could not be read.
struct Audited {
    verdicts: Vec<Verdict>,
    snapshot: Option<Snapshot>,
    pods: Vec<serde_json::Value>,
    notes: Vec<String>,
}

pub fn run(args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let now = args.now.unwrap_or_else(jiff::Timestamp::now);
    let Audited {
        verdicts,
        snapshot,
        pods,
        notes,
    } = match load(args, now)? {
        Ok(audited) => audited,
        Err(code) => return Ok(code),
    };
    let ending = match (args.ending_within, &snapshot) {
        (Some(within), Some(snap)) => Some((
            trainplace_engine::ending_within(&pods, snap, now, within),
            within,
        )),
        (Some(_), None) => {
            stderr!(
                "error: --ending-within needs the cluster's nodes: audit the live cluster, or give --cluster DIR with --from"
            );
            return Ok(ExitCode::BadInput);
        }
        _ => None,
    };
    let spread = match (args.network_spread, &snapshot) {
        (true, Some(snap)) => Some(trainplace_engine::spread_jobs(&pods, snap)),
        (true, None) => {
            stderr!(
                "error: --network-spread needs the cluster's nodes: audit the live cluster, or give --cluster DIR with --from"
            );
            return Ok(ExitCode::BadInput);
        }
        (false, _) => None,
    };
    print(
        args.output,
        &verdicts,
        ending.as_ref(),
        spread.as_deref(),
        now,
    )?;
    if args.write_reports {
        let mut extra = ending
            .as_ref()
            .map(|(jobs, _)| super::ending::results(jobs, now))
            .unwrap_or_default();
        extra.extend(
            spread
                .as_deref()
                .map(super::network_spread::results)
                .unwrap_or_default(),
        );
        let reports = Reports::build(&verdicts, &CLUSTER_SCOPED, extra, now);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let done = rt
            .block_on(async {
                let client = kube::Client::try_from(client_config(args).await?)?;
                policy_reports::write(client, &reports, args.namespace.as_deref()).await
            })
            .map_err(|e| e.context("cannot write the PolicyReports"))?;
        for r in &done.written {
            stderr!("policyreport {r}: written");
        }
        for r in &done.removed {
            stderr!("policyreport {r}: deleted (no audited object left)");
        }
    }
    for n in notes {
        stderr!("note: {n}");
    }
    Ok(if !args.exit_zero && verdicts.iter().any(|v| !v.allowed) {
        ExitCode::Denied
    } else {
        ExitCode::Ok
    })
}

/// Judge the objects of `--from`, or the live cluster page by page; the exit code when
/// something cannot be read (its message printed).
fn load(args: &AuditArgs, now: jiff::Timestamp) -> anyhow::Result<Result<Audited, ExitCode>> {
    match &args.from {
        Some(file) => Ok(from_file(args, file, now)),
        None => {
            let policy = match args.policy.load() {
                Ok(p) => p,
                Err(e) => {
                    stderr!("error: {e}");
                    return Ok(Err(ExitCode::BadInput));
                }
            };
            let blocks = match args.reservations.as_deref().map(reservations_file::load) {
                None => None,
                Some(Ok(blocks)) => Some(blocks),
                Some(Err(error)) => {
                    stderr!("error: {error}");
                    return Ok(Err(ExitCode::BadInput));
                }
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            match rt.block_on(live::audit(args, &policy, now, blocks)) {
                Ok(j) => Ok(Ok(Audited {
                    verdicts: j.verdicts,
                    snapshot: Some(j.snapshot),
                    pods: j.block_pods,
                    notes: j.notes,
                })),
                Err(e) => {
                    stderr!(
                        "error: cannot read the cluster through the kubeconfig: {e:#}\n(use --from FILE with `kubectl get pods,jobs,... -A -o json` output to audit offline)"
                    );
                    Ok(Err(ExitCode::BadInput))
                }
            }
        }
    }
}

/// Judge the objects of `--from FILE`, with the inventory of `--cluster` and the
/// Capacity Blocks of `--reservations`.
fn from_file(args: &AuditArgs, file: &str, now: jiff::Timestamp) -> Result<Audited, ExitCode> {
    let inputs = Inputs::load(
        &args.policy,
        std::slice::from_ref(&file.to_string()),
        false,
        args.cluster.as_deref(),
    )?;
    let snapshot = super::dryrun::with_reservations(inputs.inventory, args.reservations.as_deref())
        .map_err(|error| {
            stderr!("error: {error}");
            ExitCode::BadInput
        })?;
    let submitter = Submitter {
        default_namespace: "default",
        namespace_labels: None,
        groups: &args.groups,
        inventory: snapshot.as_ref(),
        now: Some(now),
    };
    // Objects that are no workload (Services, ConfigMaps) are not listed; an object
    // that could not be read is, as a failure.
    let verdicts = judge(&inputs.docs, &inputs.policy, &submitter)
        .into_iter()
        .filter(|v| v.kind_class != trainplace_engine::Kind::Other || !v.allowed)
        .collect();
    let pods = inputs
        .docs
        .into_iter()
        .map(|d| d.object)
        .filter(|o| o["kind"] == "Pod")
        .collect();
    Ok(Audited {
        verdicts,
        snapshot,
        pods,
        notes: Vec::new(),
    })
}

/// The verdicts (and the jobs on Capacity Blocks that end soon, and the jobs spread
/// over the network) as a table or a PolicyReport.
fn print(
    output: AuditOutput,
    verdicts: &[Verdict],
    ending: Option<&(Vec<EndingJob>, jiff::SignedDuration)>,
    spread: Option<&[SpreadJob]>,
    now: jiff::Timestamp,
) -> anyhow::Result<()> {
    match output {
        AuditOutput::Table => {
            let mut out = table(verdicts);
            if let Some((jobs, within)) = ending {
                out.push_str(&super::ending::table(jobs, *within, now));
            }
            if let Some(jobs) = spread {
                out.push_str(&super::network_spread::table(jobs));
            }
            super::out::print(&out)
        }
        AuditOutput::Json => {
            let mut report = super::policy_reports::report(verdicts);
            let mut results = ending
                .map(|(jobs, _)| super::ending::results(jobs, now))
                .unwrap_or_default();
            results.extend(
                spread
                    .map(super::network_spread::results)
                    .unwrap_or_default(),
            );
            if !results.is_empty() {
                let warn = report["summary"]["warn"].as_u64().unwrap_or(0);
                report["summary"]["warn"] = json!(warn + results.len() as u64);
                if let Some(all) = report["results"].as_array_mut() {
                    all.extend(results);
                }
            }
            super::out::print(&(serde_json::to_string_pretty(&report)? + "\n"))
        }
    }
}

pub fn table(verdicts: &[Verdict]) -> String {
    let mut out = format!(
        "{:<16} {:<16} {:<36} {:<6} {:<8} {}\n",
        "NAMESPACE", "KIND", "NAME", "RESULT", "MISSING", "FINDINGS"
    );
    for v in verdicts {
        let findings: Vec<String> = v
            .findings
            .iter()
            .map(|f| format!("{}:{}", f.mode.as_str(), f.rule.as_str()))
            .collect();
        out.push_str(&format!(
            "{:<16} {:<16} {:<36} {:<6} {:<8} {}\n",
            v.namespace,
            v.kind,
            v.name,
            super::policy_reports::result_of(v),
            v.changes.len(),
            if findings.is_empty() {
                "-".to_string()
            } else {
                findings.join(",")
            }
        ));
    }
    out
}

/// `--ending-within`: a duration of at least 0 (`-6h` would list nothing, silently).
fn window(text: &str) -> Result<jiff::SignedDuration, String> {
    let d: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration (write e.g. 6h or 90m): {e}"))?;
    if d.is_negative() {
        return Err(format!("{text:?} is negative; write a window such as 6h"));
    }
    Ok(d)
}
