//! `trainplace check` and `trainplace mutate`: the engine over manifest files.

use std::collections::BTreeMap;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;
use trainplace_engine::{Finding, Verdict};

use super::annotation_names;
use super::judge::{Submitter, judge};
use super::out;
use super::render::{self, ObjectReport};
use super::{ExitCode, Inputs, PolicyArgs, input};

/// `-o`: what is printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The report for people: each object's verdict, findings, fixes and changes.
    Text,
    /// mutate: the objects that may be applied, as a YAML stream (the default);
    /// check: the report as YAML (as report-yaml).
    Yaml,
    /// mutate: the objects that may be applied, as a `kind: List`; check: the report
    /// as JSON (as report-json).
    Json,
    /// `resource.group/name` of each object (mutate: each object that may be applied),
    /// as `kubectl -o name` prints them.
    Name,
    /// The report as JSON: one entry per object (kind, name, namespace, allowed,
    /// warnings, reasons, patch, object, findings, changes).
    ReportJson,
    /// The report as YAML.
    ReportYaml,
}

#[derive(Debug, Args)]
pub struct DryRunArgs {
    /// Manifest file or directory (YAML, multi-document YAML, JSON, or a List); `-`
    /// reads stdin. Repeat for more; a directory is read as kubectl reads it.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<String>,
    /// Read directories given with -f into their subdirectories too (as kubectl -R).
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Output format (check: text; mutate: yaml).
    #[arg(short = 'o', long)]
    pub output: Option<Output>,
    /// A unified diff of each object against what the webhook would make of it, on
    /// stdout (the report on stderr). Exits 1 when any object would change, as
    /// `kubectl diff` does (or when one is denied), 0 when none would.
    #[arg(long, conflicts_with = "output")]
    pub diff: bool,
    /// Exit 1 when any object gets a warning (a finding in warn mode, or an unknown
    /// trainplace.io/ annotation), for CI.
    #[arg(long)]
    pub warnings_as_errors: bool,
    /// Namespace for objects that do not name one.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Groups of the submitting user (decides who may use opt-in annotations).
    #[arg(long = "group", default_value = "system:authenticated")]
    pub groups: Vec<String>,
    /// Labels of the namespace (key=value,...), for label-selected policy overrides.
    #[arg(long, value_parser = parse_labels)]
    pub namespace_labels: Option<BTreeMap<String, String>>,
    /// Cluster inventory from `kubectl get -o json` files: DIR/nodes.json (and optional
    /// pods.json, namespaces.json, pytorchjobs.json, paddlejobs.json, ec2nodeclasses.json,
    /// trainingruntimes.json, clustertrainingruntimes.json, resourceclaimtemplates.json,
    /// resourceclaims.json, computedomains.json) for instance types, sibling zones,
    /// namespace labels, Capacity Blocks, the Trainer runtimes TrainJobs inherit their
    /// pod template from, and DRA claims.
    #[arg(long, value_name = "DIR")]
    pub cluster: Option<std::path::PathBuf>,
    /// Capacity Blocks from `aws ec2 describe-capacity-reservations --output json`.
    #[arg(long, value_name = "FILE")]
    pub reservations: Option<std::path::PathBuf>,
    /// Judge as of this time (RFC 3339, e.g. 2026-11-23T09:00:00Z: "what if I submit
    /// then"); default: now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<jiff::Timestamp>,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// Add the blocks of a describe-capacity-reservations file to the inventory (one of
/// blocks only when no cluster directory was given).
pub fn with_reservations(
    inventory: Option<trainplace_engine::Snapshot>,
    file: Option<&std::path::Path>,
) -> Result<
    Option<trainplace_engine::Snapshot>,
    crate::inventory::reservations_file::ReservationsFileError,
> {
    let Some(file) = file else {
        return Ok(inventory);
    };
    let blocks = crate::inventory::reservations_file::load(file)?;
    Ok(Some(match inventory {
        Some(mut snap) => {
            snap.reservations_mut().extend(&blocks);
            snap
        }
        None => trainplace_engine::Snapshot::blocks_only(blocks),
    }))
}

fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("{pair:?} is not key=value"))
        })
        .collect()
}

/// One entry of `-o report-json`.
#[derive(Debug, Serialize)]
pub struct JsonEntry<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    /// Absent for cluster-scoped objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<&'a str>,
    pub allowed: bool,
    pub warnings: Vec<String>,
    pub reasons: Vec<String>,
    pub patch: json_patch::Patch,
    pub object: &'a Value,
    pub findings: &'a [Finding],
    pub changes: &'a [trainplace_engine::Change],
}

pub fn run(args: &DryRunArgs, mutate: bool) -> anyhow::Result<ExitCode> {
    let (
        Inputs {
            policy,
            docs,
            unreadable,
            ..
        },
        inventory,
    ) = match inputs(args) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let code = run_judged(args, mutate, &policy, &docs, inventory.as_ref())?;
    // Files of a directory that could not be read: the rest was judged, the exit says so.
    Ok(if unreadable > 0 {
        ExitCode::BadInput
    } else {
        code
    })
}

fn run_judged(
    args: &DryRunArgs,
    mutate: bool,
    policy: &trainplace_engine::Policy,
    docs: &[input::Document],
    inventory: Option<&trainplace_engine::Snapshot>,
) -> anyhow::Result<ExitCode> {
    let submitter = Submitter {
        default_namespace: &args.namespace,
        namespace_labels: args.namespace_labels.as_ref(),
        groups: &args.groups,
        inventory,
        now: Some(args.now.unwrap_or_else(jiff::Timestamp::now)),
    };
    let verdicts = judge(docs, policy, &submitter);
    let mut annotation_warnings = 0;
    for (d, v) in docs.iter().zip(&verdicts) {
        for w in annotation_names::warnings(&d.object) {
            stderr!("warning: {}: {w}", render::title(v));
            annotation_warnings += 1;
        }
    }
    let reports: Vec<ObjectReport<'_>> = docs
        .iter()
        .zip(&verdicts)
        .map(|(d, v)| ObjectReport {
            original: &d.object,
            verdict: v,
        })
        .collect();
    if args.diff {
        out::print(&render::diffs(&reports))?;
        out::stderr(format_args!("{}", render::text(&reports, false)));
        let changed = verdicts.iter().any(|v| !v.patch.is_empty());
        return Ok(if changed || verdicts.iter().any(|v| !v.allowed) {
            ExitCode::Denied
        } else {
            ExitCode::Ok
        });
    }
    let output = args
        .output
        .unwrap_or(if mutate { Output::Yaml } else { Output::Text });
    print(output, mutate, &reports, &verdicts)?;
    let warned = annotation_warnings > 0 || verdicts.iter().any(|v| !v.warnings().is_empty());
    Ok(
        if verdicts.iter().all(|v| v.allowed) && !(args.warnings_as_errors && warned) {
            ExitCode::Ok
        } else {
            ExitCode::Denied
        },
    )
}

/// The policy, the documents and the inventory with its reservations, or the exit code
/// after saying what is wrong.
fn inputs(args: &DryRunArgs) -> Result<(Inputs, Option<trainplace_engine::Snapshot>), ExitCode> {
    let mut inputs = Inputs::load(
        &args.policy,
        &args.files,
        args.recursive,
        args.cluster.as_deref(),
    )?;
    match with_reservations(inputs.inventory.take(), args.reservations.as_deref()) {
        Ok(inventory) => Ok((inputs, inventory)),
        Err(error) => {
            stderr!("error: {error}");
            Err(ExitCode::BadInput)
        }
    }
}

/// Print in the asked format: `check` prints the report; `mutate` prints the objects
/// that may be applied, and the report and what was held back on stderr, unless a
/// report format is asked for.
fn print(
    output: Output,
    mutate: bool,
    reports: &[ObjectReport<'_>],
    verdicts: &[Verdict],
) -> anyhow::Result<()> {
    let report = || -> Vec<JsonEntry<'_>> { verdicts.iter().map(json_entry).collect() };
    match output {
        Output::ReportJson | Output::Json if !mutate || output == Output::ReportJson => {
            out::print(&(serde_json::to_string_pretty(&report())? + "\n"))?;
        }
        Output::ReportYaml | Output::Yaml if !mutate || output == Output::ReportYaml => {
            out::print(&render::yaml(&serde_json::to_value(report())?))?;
        }
        Output::Text => out::print(&render::text(reports, true))?,
        Output::Name if !mutate => out::print(&render::names(verdicts.iter()))?,
        Output::Yaml | Output::Json | Output::Name => {
            let allowed = verdicts.iter().filter(|v| v.allowed);
            out::print(&match output {
                Output::Json => render::objects_list_json(allowed),
                Output::Name => render::names(allowed),
                _ => render::objects_yaml(verdicts),
            })?;
            out::stderr(format_args!("{}", render::text(reports, false)));
            out::stderr(format_args!("{}", render::withheld(verdicts)));
        }
        Output::ReportJson | Output::ReportYaml => unreachable!("matched above"),
    }
    Ok(())
}

pub fn json_entry(v: &Verdict) -> JsonEntry<'_> {
    JsonEntry {
        kind: &v.kind,
        name: &v.name,
        namespace: (!render::cluster_scoped(&v.object)).then_some(v.namespace.as_str()),
        allowed: v.allowed,
        warnings: v.warnings(),
        reasons: v.reasons(),
        patch: v.json_patch(),
        object: &v.object,
        findings: &v.findings,
        changes: &v.changes,
    }
}
