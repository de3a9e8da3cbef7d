//! `cargo run -p trainplace-diagnose --example diagnose -- FILE|-`: the same command the
//! trainplace binary exposes as `trainplace diagnose`, for trying it on its own.

use clap::Parser;
use trainplace_diagnose::cli::{self, DiagnoseArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: DiagnoseArgs,
}

fn main() -> anyhow::Result<()> {
    let code = cli::run(&Cli::parse().args)?;
    std::process::exit(code);
}
