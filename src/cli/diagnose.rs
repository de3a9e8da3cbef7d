//! `trainplace diagnose FILE|-`: reads the input, runs [`trainplace_diagnose::diagnose`],
//! prints text or JSON, and maps the outcome to the exit code CI gates on.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use trainplace_diagnose::{
    Expectations, InputKind, NetworkMap, Options, Version, diagnose, render_text,
};

use crate::exit::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// `--kind`: the library's [`InputKind`], spelled for clap (the library carries no CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// NCCL_DEBUG=INFO output (`kubectl logs`), any number of ranks and hosts.
    NcclLog,
    /// `nvidia-smi topo -m`.
    Topo,
    /// nccl-tests (`all_reduce_perf` and friends).
    NcclTests,
}

impl From<KindArg> for InputKind {
    fn from(kind: KindArg) -> Self {
        match kind {
            KindArg::NcclLog => Self::NcclLog,
            KindArg::Topo => Self::Topo,
            KindArg::NcclTests => Self::NcclTests,
        }
    }
}

/// Diagnose the NCCL layout from an NCCL INFO log, `nvidia-smi topo -m` or nccl-tests
/// output. Exit code: 0 ok or warnings, 1 error-level layout fault, 2 unreadable input.
#[derive(clap::Args, Debug)]
pub struct DiagnoseArgs {
    /// File to read, or `-` for stdin (e.g. `kubectl logs POD | trainplace diagnose -`).
    #[arg(value_name = "FILE|-")]
    pub input: String,

    /// What the input is; detected from its content when not given.
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,

    /// Instance type the job ran on, e.g. p5.48xlarge (else from the log or the GPU name).
    #[arg(long, env = "TRAINPLACE_INSTANCE_TYPE")]
    pub instance_type: Option<String>,

    /// Number of nodes of an nccl-tests run (else the distinct hosts it prints).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,

    /// aws-ofi-nccl version in use (else the log's `NET/OFI Initializing` line).
    #[arg(long)]
    pub aws_ofi_nccl_version: Option<Version>,

    /// A YAML expectation table replacing the embedded one (same shape as
    /// crates/catalog/data/expected-busbw.yaml), e.g. with your own measurements.
    #[arg(long, value_name = "FILE")]
    pub expectations: Option<PathBuf>,

    /// Where each node sits in the EC2 network, to say how far apart the ranks ran: the
    /// JSON of `aws ec2 describe-instance-topology` (aws-cli.sh saves it as
    /// instance-topology.json), of `kubectl get nodes -o json`, or the table of `kubectl get
    /// nodes -L topology.k8s.aws/network-node-layer-1,...-2,...-3`. A host matches a node
    /// by name, instance id or first DNS label.
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,

    /// Which node each pod ran on, when the log names pods (their hostnames) rather than
    /// nodes: `kubectl get pods -o wide` or `-o json`.
    #[arg(long, value_name = "FILE", requires = "topology")]
    pub pods: Option<PathBuf>,
}

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let source = if args.input == "-" {
        "stdin"
    } else {
        args.input.as_str()
    };
    let bytes = match read_input(&args.input) {
        Ok(bytes) => bytes,
        Err(error) => {
            stderr!("trainplace diagnose: cannot read {source}: {error:#}");
            return Ok(ExitCode::BadInput);
        }
    };
    let expectations = match &args.expectations {
        Some(path) => match load_expectations(path) {
            Ok(table) => table,
            Err(error) => {
                stderr!("trainplace diagnose: {error:#}");
                return Ok(ExitCode::BadInput);
            }
        },
        None => Expectations::embedded(),
    };
    let network = match load_network(args) {
        Ok(network) => network,
        Err(error) => {
            stderr!("trainplace diagnose: {error:#}");
            return Ok(ExitCode::BadInput);
        }
    };
    let opts = Options {
        instance_type: args.instance_type.clone(),
        nodes: args.nodes,
        aws_ofi_nccl_version: args.aws_ofi_nccl_version,
        expectations,
        network,
    };
    let text = String::from_utf8_lossy(&bytes);
    let report = match diagnose(&text, args.kind.map(InputKind::from), &opts) {
        Ok(report) => report,
        Err(error) => {
            stderr!("trainplace diagnose: {source}: {error}");
            return Ok(ExitCode::BadInput);
        }
    };
    match args.output {
        OutputFormat::Text => super::out::print(&render_text(&report, source))?,
        OutputFormat::Json => super::out::print(
            &(serde_json::to_string_pretty(&report).context("serialising the report")? + "\n"),
        )?,
    }
    // The report owns the CI contract (1 = an error-level layout fault).
    Ok(match report.exit_code() {
        0 => ExitCode::Ok,
        _ => ExitCode::Denied,
    })
}

fn read_input(input: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if input == "-" {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading stdin")?;
    } else {
        bytes = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    }
    Ok(bytes)
}

/// `--topology` and `--pods`, read into one map.
fn load_network(args: &DiagnoseArgs) -> anyhow::Result<Option<NetworkMap>> {
    let Some(path) = &args.topology else {
        return Ok(None);
    };
    let read = |path: &Path, flag: &str| {
        std::fs::read_to_string(path)
            .with_context(|| format!("{flag}: cannot read {}", path.display()))
    };
    let what = format!("--topology {}", path.display());
    let mut map = NetworkMap::parse_topology(&read(path, "--topology")?, &what)?;
    if let Some(pods) = &args.pods {
        map.add_pods(
            &read(pods, "--pods")?,
            &format!("--pods {}", pods.display()),
        )?;
    }
    Ok(Some(map))
}

fn load_expectations(path: &Path) -> anyhow::Result<Expectations> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read expectation table {}", path.display()))?;
    Ok(Expectations::from_yaml(&text, &path.display().to_string())?)
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    /// The clap spelling of every kind is the library's name for it.
    #[test]
    fn kind_arg_spells_every_input_kind() {
        for arg in KindArg::value_variants() {
            let name = arg
                .to_possible_value()
                .expect("visible")
                .get_name()
                .to_string();
            assert_eq!(name, InputKind::from(*arg).name());
        }
        assert_eq!(KindArg::value_variants().len(), 3);
    }
}
