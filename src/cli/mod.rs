//! Command-line faces: offline dry-run, policy tools, the webhook server, the advisor
//! (`advise`, `advisor serve`) and diagnose.

/// `eprintln!` that cannot panic: a closed stderr drops the line ([`out::stderr`]).
macro_rules! stderr {
    ($($arg:tt)*) => {
        $crate::cli::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub mod advise;
mod annotation_names;
pub mod audit;
pub mod diagnose;
pub mod dryrun;
mod ending;
pub mod input;
pub mod judge;
mod network_spread;
pub mod out;
pub mod policy_cmd;
mod policy_reports;
pub mod render;
pub mod sandbox;
pub(crate) mod yaml;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use trainplace_engine::{Policy, PolicyError};

pub use crate::exit::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "trainplace",
    version,
    about = "Keep distributed GPU training in the layout that makes NCCL fast: admission webhook, offline dry-run, placement advisor",
    after_help = "As a kubectl plugin: put this binary (or a symlink) on PATH as kubectl-trainplace, then `kubectl trainplace check -f job.yaml`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Dry-run policy on manifests: allowed or denied, every finding and its fix.
    Check(dryrun::DryRunArgs),
    /// Like check, and print the mutated objects (YAML, for `kubectl apply -f -`).
    Mutate(dryrun::DryRunArgs),
    /// Serve the mutating and validating admission webhook over HTTPS.
    Serve(Box<crate::server::config::ServeArgs>),
    /// Validate a policy directory, or list the instance catalog.
    Policy(policy_cmd::PolicyCommand),
    /// List existing workloads and pods that violate policy (changes nothing).
    Audit(audit::AuditArgs),
    /// Recommend instance type, node count, AZ and capacity, and write the config for it.
    Advise(Box<advise::AdviseArgs>),
    /// The placement advisor's HTTP API and web page.
    Advisor(AdvisorCommand),
    /// Read NCCL logs, `nvidia-smi topo -m` or nccl-tests output and judge the layout.
    Diagnose(diagnose::DiagnoseArgs),
    /// The local sandbox's simulated fleet (scripts/sandbox.sh).
    Sandbox(sandbox::SandboxCommand),
}

#[derive(Debug, Args)]
pub struct AdvisorCommand {
    #[command(subcommand)]
    pub command: AdvisorSub,
}

#[derive(Debug, Subcommand)]
pub enum AdvisorSub {
    /// Serve POST /v1/recommendations, GET /v1/instance-types and the web page.
    Serve(advise::AdvisorServeArgs),
}

/// What a dry-run or an offline audit reads: policy, documents, optional inventory.
pub struct Inputs {
    pub policy: Policy,
    pub docs: Vec<input::Document>,
    /// Files of a directory that could not be read (each said on stderr): the command
    /// judges the rest and exits 2.
    pub unreadable: usize,
    pub inventory: Option<trainplace_engine::Snapshot>,
}

impl Inputs {
    /// Load everything, printing the first problem; `Err` carries the exit code.
    pub fn load(
        policy: &PolicyArgs,
        files: &[String],
        recursive: bool,
        cluster: Option<&std::path::Path>,
    ) -> Result<Self, ExitCode> {
        fn usable<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, ExitCode> {
            r.map_err(|e| {
                stderr!("error: {e}");
                ExitCode::BadInput
            })
        }
        let policy = usable(policy.load())?;
        let read = usable(input::read_all(files, recursive))?;
        for dir in &read.not_read {
            stderr!("note: {dir}: a subdirectory, not read (-R reads subdirectories)");
        }
        for note in &read.not_workloads {
            stderr!("note: {note}");
        }
        for error in &read.unreadable {
            stderr!("error: {error} (the other files are judged)");
        }
        Ok(Inputs {
            policy,
            unreadable: read.unreadable.len(),
            docs: read.docs,
            inventory: cluster
                .map(|d| usable(crate::inventory::files::load_dir(d)))
                .transpose()?,
        })
    }
}

/// Where the policy comes from: a directory, or the embedded default.
#[derive(Debug, Clone, Default, Args)]
pub struct PolicyArgs {
    /// Policy directory (Policy and InstanceCatalog YAML files); default: embedded.
    #[arg(long, env = "TRAINPLACE_POLICY_DIR")]
    pub policy_dir: Option<PathBuf>,
}

impl PolicyArgs {
    pub fn load(&self) -> Result<Policy, PolicyError> {
        let policy = crate::policy_dir::load_or_embedded(self.policy_dir.as_deref())?;
        for warning in policy.warnings() {
            stderr!("warning: {warning}");
        }
        Ok(policy)
    }
}
