//! The advisor's CLI face: `trainplace advise ...` and `trainplace advisor serve`. Reads
//! files, calls [`trainplace_advisor::advise`], prints or writes. Bad input exits 2
//! ([`ExitCode::BadInput`]) with the field path.

use std::path::{Path, PathBuf};

use anyhow::Context;
use trainplace_engine::Policy;

use super::PolicyArgs;
use trainplace_advisor::advice::{Advice, RawFacts, advise, request_from_value};
use trainplace_advisor::error::{InputError, InputSource};
use trainplace_advisor::request::AdviceRequest;

use crate::exit::ExitCode;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
    Yaml,
}

/// `trainplace advise`: what to buy and how to set it up for N GPUs over D days.
#[derive(clap::Args, Debug, Default)]
pub struct AdviseArgs {
    /// Total GPUs (or accelerators) the job needs.
    #[arg(long, allow_negative_numbers = true)]
    pub gpus: Option<i64>,
    /// Number of nodes, instead of --gpus.
    #[arg(long, allow_negative_numbers = true)]
    pub nodes: Option<i64>,
    /// a100, h100, h200, b200, a10g, l4, l40s, t4, trainium or any.
    #[arg(long)]
    pub family: Option<String>,
    /// Pin an instance type from the catalog (e.g. p5.48xlarge).
    #[arg(long)]
    pub instance_type: Option<String>,
    /// AWS region (default us-east-1).
    #[arg(long)]
    pub region: Option<String>,
    /// Allowed availability zones, comma separated (e.g. us-east-1a,us-east-1b).
    #[arg(long = "az", value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Job duration in hours.
    #[arg(long, allow_negative_numbers = true)]
    pub hours: Option<f64>,
    /// Job duration in days.
    #[arg(long, allow_negative_numbers = true)]
    pub days: Option<f64>,
    /// Earliest start (RFC 3339 or YYYY-MM-DD).
    #[arg(long)]
    pub start: Option<String>,
    /// Latest end (RFC 3339 or YYYY-MM-DD).
    #[arg(long)]
    pub end: Option<String>,
    /// Budget cap in USD: a plan that costs more is refused (exit 2) with what it costs
    /// and which listed capacity would fit.
    #[arg(long, allow_negative_numbers = true)]
    pub budget: Option<f64>,
    /// auto, on-demand, odcr or capacity-block.
    #[arg(long)]
    pub capacity: Option<String>,
    /// ODCR id (cr-...) with --capacity odcr.
    #[arg(long)]
    pub reservation_id: Option<String>,
    /// pytorchjob, trainjob, jobset or mpijob.
    #[arg(long)]
    pub framework: Option<String>,
    /// What makes the job's nodes, one route per plan: eksctl (default: GPU nodegroups
    /// aws-cli.sh creates) or karpenter (only the system nodegroup, then
    /// karpenter-prerequisites.sh and karpenter.yaml). Refused where Karpenter cannot
    /// serve the plan: EFA or GB200's ComputeDomain through DRA, or existing nodes.
    #[arg(long, value_name = "ROUTE")]
    pub route: Option<String>,
    /// The cluster gives EFA through the EFA DRA driver (Kubernetes >= 1.34): pods
    /// claim EFA with a ResourceClaimTemplate instead of vpc.amazonaws.com/efa (also
    /// chosen when --from-cluster nodes of the type advertise no EFA).
    #[arg(long)]
    pub efa_dra: bool,
    /// The model's size in billions of parameters: sizes the checkpoint storage
    /// (params x 16 bytes a checkpoint, 3 kept); without it, the job's GPU memory bounds it.
    #[arg(long, value_name = "BILLIONS")]
    pub model_params_billions: Option<f64>,
    #[arg(long)]
    pub cluster_name: Option<String>,
    #[arg(long)]
    pub job_name: Option<String>,
    #[arg(long)]
    pub namespace: Option<String>,
    /// Container image of the training job (default: the AWS Deep Learning Container
    /// with EFA and aws-ofi-nccl, or the Neuron one for Trainium, pinned).
    #[arg(long)]
    pub image: Option<String>,
    /// Kubernetes version of a new EKS cluster (default: the newest eksctl supports).
    #[arg(long)]
    pub eks_version: Option<String>,
    /// Plan as of this instant (RFC 3339; default: now), for reproducible plans.
    #[arg(long)]
    pub now: Option<String>,
    /// Request as YAML or JSON; flags override its fields.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// JSON of `aws ec2 describe-capacity-block-offerings`.
    #[arg(long)]
    pub offerings: Option<PathBuf>,
    /// JSON of `aws ec2 describe-capacity-reservations`: Capacity Blocks the account
    /// already holds, used (matching type, zone, count and window) before buying.
    #[arg(long, value_name = "FILE")]
    pub existing_reservations: Option<PathBuf>,
    /// JSON of `aws ec2 describe-instance-types`.
    #[arg(long)]
    pub instance_types: Option<PathBuf>,
    /// JSON of `kubectl get nodes -o json` (the cluster inventory).
    #[arg(long)]
    pub nodes_json: Option<PathBuf>,
    /// Read the cluster's nodes through the kubeconfig instead of --nodes-json.
    #[arg(long, conflicts_with = "nodes_json")]
    pub from_cluster: bool,
    /// Nodes the caller listed for `--from-cluster`, shaped like `kubectl get nodes -o json`.
    #[arg(skip)]
    pub cluster_nodes: Option<String>,
    /// Output format of the recommendation.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Write the artifacts (eksctl or Karpenter, aws CLI, job, nccl-tests) into DIR.
    #[arg(long)]
    pub emit: Option<PathBuf>,
    /// The policy directory's InstanceCatalog adds (or replaces) instance types.
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// `trainplace advisor serve`.
#[derive(clap::Args, Debug)]
pub struct AdvisorServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "TRAINPLACE_ADVISOR_ADDR",
        default_value = "127.0.0.1:8090"
    )]
    pub addr: std::net::SocketAddr,
    /// The policy directory's InstanceCatalog adds (or replaces) instance types.
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// Run `advise`; [`ExitCode::BadInput`] on bad input (message on stderr).
pub fn run_advise(args: &AdviseArgs) -> anyhow::Result<ExitCode> {
    let policy = match args.policy.load() {
        Ok(p) => p,
        Err(e) => {
            stderr!("error: --policy-dir: {e}");
            return Ok(ExitCode::BadInput);
        }
    };
    let advice = match inputs(args)
        .and_then(|(req, facts)| advise(&req, &facts, &policy, jiff::Timestamp::now()))
    {
        Ok(a) => a,
        Err(e) => {
            stderr!("error: {e}");
            return Ok(ExitCode::BadInput);
        }
    };
    let out = match args.output {
        OutputFormat::Text => trainplace_advisor::render::text(&advice),
        OutputFormat::Json => serde_json::to_string_pretty(&advice)? + "\n",
        OutputFormat::Yaml => serde_yaml_ng::to_string(&advice)?,
    };
    super::out::print(&out)?;
    if let Some(dir) = &args.emit {
        emit(&advice, dir)?;
        stderr!(
            "wrote {} files to {}",
            advice.artifacts.len(),
            dir.display()
        );
    }
    Ok(ExitCode::Ok)
}

fn emit(advice: &Advice, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    for a in &advice.artifacts {
        let path = dir.join(&a.name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("create {}", parent.display()))?;
        }
        std::fs::write(&path, &a.content).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

fn read(path: &Path, input: InputSource, flag: &str) -> Result<String, InputError> {
    std::fs::read_to_string(path)
        .map_err(|e| InputError::new(input, flag, format!("cannot read {}: {e}", path.display())))
}

/// The request (file, then flags on top) and the raw documents.
pub fn inputs(args: &AdviseArgs) -> Result<(AdviceRequest, RawFacts), InputError> {
    let mut req = match &args.file {
        Some(path) => {
            let text = read(path, InputSource::Request, "--file")?;
            let value: serde_json::Value = serde_yaml_ng::from_str(&text).map_err(|e| {
                InputError::request("$", format!("{} is not YAML/JSON: {e}", path.display()))
            })?;
            request_from_value(value)?
        }
        None => AdviceRequest::default(),
    };
    overlay(&mut req, args);
    let doc =
        |p: &Option<PathBuf>, input, flag| p.as_ref().map(|p| read(p, input, flag)).transpose();
    let facts = RawFacts {
        offerings: doc(&args.offerings, InputSource::Offerings, "--offerings")?,
        reservations: doc(
            &args.existing_reservations,
            InputSource::Reservations,
            "--existing-reservations",
        )?,
        instance_types: doc(
            &args.instance_types,
            InputSource::InstanceTypes,
            "--instance-types",
        )?,
        nodes: match &args.cluster_nodes {
            Some(listed) => Some(listed.clone()),
            None => doc(&args.nodes_json, InputSource::Nodes, "--nodes-json")?,
        },
    };
    Ok((req, facts))
}

fn overlay(req: &mut AdviceRequest, a: &AdviseArgs) {
    fn set<T: Clone>(dst: &mut Option<T>, src: &Option<T>) {
        if src.is_some() {
            dst.clone_from(src);
        }
    }
    set(&mut req.gpus, &a.gpus);
    set(&mut req.nodes, &a.nodes);
    set(&mut req.family, &a.family);
    set(&mut req.instance_type, &a.instance_type);
    set(&mut req.region, &a.region);
    set(&mut req.duration_hours, &a.hours);
    set(&mut req.duration_days, &a.days);
    set(&mut req.earliest_start, &a.start);
    set(&mut req.latest_end, &a.end);
    set(&mut req.budget_usd, &a.budget);
    set(&mut req.capacity, &a.capacity);
    set(&mut req.reservation_id, &a.reservation_id);
    set(&mut req.framework, &a.framework);
    set(&mut req.route, &a.route);
    set(&mut req.cluster_name, &a.cluster_name);
    set(&mut req.job_name, &a.job_name);
    set(&mut req.namespace, &a.namespace);
    set(&mut req.image, &a.image);
    set(&mut req.eks_version, &a.eks_version);
    set(&mut req.now, &a.now);
    set(&mut req.model_params_billions, &a.model_params_billions);
    if a.efa_dra {
        req.efa_dra = Some(true);
    }
    if !a.zones.is_empty() {
        req.availability_zones.clone_from(&a.zones);
    }
}

/// Serve the advisor's HTTP face until ctrl-c.
pub async fn run_serve(args: &AdvisorServeArgs) -> anyhow::Result<()> {
    let policy: Policy = args.policy.load().context("--policy-dir")?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("bind {}", args.addr))?;
    tracing::info!(addr = %args.addr, "advisor listening");
    axum::serve(
        listener,
        crate::advisor_server::router(crate::advisor_server::AppState::with_policy(policy)),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .context("advisor server")
}
