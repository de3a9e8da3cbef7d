//! Run the advisor faces before they are wired into `trainplace`:
//! `cargo run -p trainplace-advisor --example advise -- advise --gpus 64 --family h100 --days 7`
//! `cargo run -p trainplace-advisor --example advise -- serve --addr 127.0.0.1:8090`

use clap::{Parser, Subcommand};
use trainplace_advisor::cli::{AdviseArgs, AdvisorServeArgs, run_advise, run_serve};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Advise(Box<AdviseArgs>),
    Serve(AdvisorServeArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Advise(args) => std::process::exit(run_advise(&args)?),
        Command::Serve(args) => tokio::runtime::Runtime::new()?.block_on(run_serve(&args)),
    }
}
