#![forbid(unsafe_code)]

use clap::Parser;
use trainplace::cli::{Cli, Command, ExitCode, dryrun, policy_cmd};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Check(args) => dryrun::run(&args, false)?,
        Command::Mutate(args) => dryrun::run(&args, true)?,
        Command::Policy(cmd) => policy_cmd::run(&cmd),
        Command::Serve(args) => {
            trainplace::server::init_tracing();
            let config = args.into_config()?;
            runtime()?.block_on(trainplace::server::serve(config))?;
            ExitCode::Ok
        }
    };
    exit(code as i32)
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

fn exit(code: i32) -> anyhow::Result<()> {
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}
