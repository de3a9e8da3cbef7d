//! `trainplace policy check DIR` and `trainplace policy instances`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ExitCode;

#[derive(Debug, Args)]
pub struct PolicyCommand {
    #[command(subcommand)]
    pub command: PolicySub,
}

#[derive(Debug, Subcommand)]
pub enum PolicySub {
    /// Validate a policy directory; unknown keys and bad values are errors with file:line.
    Check { dir: PathBuf },
    /// List the instance catalog (embedded, or with a policy directory's additions).
    Instances {
        #[arg(long, env = "TRAINPLACE_POLICY_DIR")]
        policy_dir: Option<PathBuf>,
    },
}

pub fn run(cmd: &PolicyCommand) -> ExitCode {
    match &cmd.command {
        PolicySub::Check { dir } => match crate::policy_dir::load(dir) {
            Ok(p) => {
                for warning in p.warnings() {
                    eprintln!("warning: {warning}");
                }
                println!(
                    "{}: ok ({} instance types, {} namespace overrides)",
                    dir.display(),
                    p.catalog.instances().count(),
                    p.namespace_overrides().len()
                );
                ExitCode::Ok
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::BadInput
            }
        },
        PolicySub::Instances { policy_dir } => {
            let policy = match crate::policy_dir::load_or_embedded(policy_dir.as_deref()) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::BadInput;
                }
            };
            println!(
                "{:<18} {:>4} {:<10} {:>4} {:>6}  source",
                "TYPE", "GPUS", "ACCEL", "EFA", "$/H"
            );
            for p in policy.catalog.instances() {
                let price = p
                    .price_per_hour_usd
                    .map_or("?".to_string(), |x| format!("{x:.2}"));
                println!(
                    "{:<18} {:>4} {:<10} {:>4} {:>6}  {}",
                    p.name, p.accelerators, p.accelerator, p.max_efa, price, p.source
                );
            }
            ExitCode::Ok
        }
    }
}
