//! `trainplace check` and `trainplace mutate`: the engine over manifest files.

use std::collections::BTreeMap;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;
use trainplace_engine::{Finding, Verdict};

use super::judge::{Submitter, judge};
use super::out;
use super::render::{self, ObjectReport};
use super::{ExitCode, Inputs, PolicyArgs};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct DryRunArgs {
    /// Manifest file (YAML, multi-document YAML, JSON, or a List); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: String,
    /// Output format (check: text; mutate: yaml).
    #[arg(short = 'o', long)]
    pub output: Option<Output>,
    /// mutate: show a unified diff of each object instead of the objects.
    #[arg(long)]
    pub diff: bool,
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

/// One entry of `-o json`.
#[derive(Debug, Serialize)]
pub struct JsonEntry<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    pub allowed: bool,
    pub warnings: Vec<String>,
    pub reasons: Vec<String>,
    pub patch: &'a json_patch::Patch,
    pub object: &'a Value,
    pub findings: &'a [Finding],
    pub changes: &'a [trainplace_engine::Change],
}

pub fn run(args: &DryRunArgs, mutate: bool) -> anyhow::Result<ExitCode> {
    let Inputs {
        policy,
        docs,
        inventory,
    } = match Inputs::load(&args.policy, &args.file, args.cluster.as_deref()) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let inventory = match with_reservations(inventory, args.reservations.as_deref()) {
        Ok(i) => i,
        Err(error) => {
            stderr!("error: {error}");
            return Ok(ExitCode::BadInput);
        }
    };
    let submitter = Submitter {
        default_namespace: &args.namespace,
        namespace_labels: args.namespace_labels.as_ref(),
        groups: &args.groups,
        inventory: inventory.as_ref(),
        now: Some(args.now.unwrap_or_else(jiff::Timestamp::now)),
    };
    let verdicts = judge(&docs, &policy, &submitter);
    let output = args
        .output
        .unwrap_or(if mutate { Output::Yaml } else { Output::Text });
    let reports: Vec<ObjectReport<'_>> = docs
        .iter()
        .zip(&verdicts)
        .map(|(d, v)| ObjectReport {
            original: &d.object,
            verdict: v,
        })
        .collect();
    match (output, mutate && args.diff) {
        (_, true) => {
            out::print(&render::diffs(&reports))?;
            out::stderr(format_args!("{}", render::text(&reports, false)));
        }
        (Output::Json, _) => {
            let entries: Vec<JsonEntry<'_>> = verdicts.iter().map(json_entry).collect();
            out::print(&(serde_json::to_string_pretty(&entries)? + "\n"))?;
        }
        (Output::Yaml, _) if mutate => {
            out::print(&render::objects_yaml(&verdicts))?;
            out::stderr(format_args!("{}", render::text(&reports, false)));
            out::stderr(format_args!("{}", render::withheld(&verdicts)));
        }
        (Output::Yaml, _) => {
            let entries: Vec<JsonEntry<'_>> = verdicts.iter().map(json_entry).collect();
            out::print(&render::yaml(&serde_json::to_value(&entries)?))?;
        }
        (Output::Text, _) => out::print(&render::text(&reports, true))?,
    }
    Ok(if verdicts.iter().all(|v| v.allowed) {
        ExitCode::Ok
    } else {
        ExitCode::Denied
    })
}

pub fn json_entry(v: &Verdict) -> JsonEntry<'_> {
    JsonEntry {
        kind: &v.kind,
        name: &v.name,
        namespace: &v.namespace,
        allowed: v.allowed,
        warnings: v.warnings(),
        reasons: v.reasons(),
        patch: &v.patch,
        object: &v.object,
        findings: &v.findings,
        changes: &v.changes,
    }
}
