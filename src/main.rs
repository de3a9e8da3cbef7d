#![forbid(unsafe_code)]

use clap::Parser;

// The webhook allocates per review (JSON trees); mimalloc halves the allocator time
// glibc malloc showed in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use trainplace::cli::{
    AdvisorSub, Cli, Command, ExitCode, advise, audit, diagnose, dryrun, out, policy_cmd, sandbox,
};

fn main() -> anyhow::Result<()> {
    match run(Cli::parse()) {
        Ok(code) => exit(code as i32),
        // The reader of stdout closed early (`| head -1`): end quietly with 0 (cli::out).
        Err(error) if out::stdout_closed(&error) => Ok(()),
        Err(error) => Err(error),
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    Ok(match cli.command {
        Command::Check(args) => dryrun::run(&args, false)?,
        Command::Mutate(args) => dryrun::run(&args, true)?,
        Command::Policy(cmd) => policy_cmd::run(&cmd)?,
        Command::Audit(args) => audit::run(&args)?,
        Command::Serve(args) => {
            trainplace::server::init_tracing();
            let config = (*args).into_config()?;
            server_runtime(config.io_threads)?.block_on(trainplace::server::serve(config))?;
            ExitCode::Ok
        }
        Command::Advise(mut args) => {
            if args.from_cluster {
                match trainplace::inventory::live::nodes_json() {
                    Ok(listed) => args.cluster_nodes = Some(listed),
                    Err(error) => {
                        out::stderr(format_args!(
                            "error: --from-cluster: cannot list nodes through the kubeconfig: {error}\n"
                        ));
                        return Ok(ExitCode::BadInput);
                    }
                }
            }
            advise::run_advise(&args)?
        }
        Command::Advisor(cmd) => match cmd.command {
            AdvisorSub::Serve(args) => {
                trainplace::server::init_tracing();
                runtime()?.block_on(advise::run_serve(&args))?;
                ExitCode::Ok
            }
        },
        Command::Diagnose(args) => diagnose::run(&args)?,
        Command::Sandbox(cmd) => sandbox::run(&cmd)?,
    })
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// The webhook's runtime: `io_threads` workers (`--io-threads`), named so an operator
/// (and `tests/io_threads.rs`) can tell them from the review threads in /proc or `top -H`.
fn server_runtime(io_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads.max(1))
        .thread_name("trainplace-io")
        .enable_all()
        .build()
}

fn exit(code: i32) -> anyhow::Result<()> {
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}
