//! `trainplace sandbox nodes -f FLEET`: the Node objects of a simulated EKS fleet, for
//! `scripts/sandbox.sh` (kwok runs them) or `kubectl apply -f -`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{ExitCode, PolicyArgs};

#[derive(Debug, Args)]
pub struct SandboxCommand {
    #[command(subcommand)]
    pub command: SandboxSub,
}

#[derive(Debug, Subcommand)]
pub enum SandboxSub {
    /// Print a fleet file's Node objects (a v1 List, JSON) with the labels, taints and
    /// device capacity EKS nodes carry; device counts come from the instance catalog.
    Nodes {
        /// A SandboxFleet file (sandbox/fleet.yaml is the default fleet).
        #[arg(short = 'f', long)]
        file: PathBuf,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

pub fn run(cmd: &SandboxCommand) -> anyhow::Result<ExitCode> {
    match &cmd.command {
        SandboxSub::Nodes { file, policy } => {
            let policy = match policy.load() {
                Ok(p) => p,
                Err(e) => {
                    stderr!("error: {e}");
                    return Ok(ExitCode::BadInput);
                }
            };
            let origin = file.display().to_string();
            let text = match std::fs::read_to_string(file) {
                Ok(t) => t,
                Err(e) => {
                    stderr!("error: {origin}: {e}");
                    return Ok(ExitCode::BadInput);
                }
            };
            match crate::sandbox_fleet::nodes(&text, &origin, &policy.catalog) {
                Ok(list) => {
                    super::out::print(&format!("{list}\n"))?;
                    Ok(ExitCode::Ok)
                }
                Err(e) => {
                    stderr!("error: {e}");
                    Ok(ExitCode::BadInput)
                }
            }
        }
    }
}
