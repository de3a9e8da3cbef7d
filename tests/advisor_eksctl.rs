//! The advisor's cluster configs, checked by eksctl itself: the real eksctl (v0.215.0,
//! built from the Go module proxy by scripts/go-tool.sh) runs `create cluster --dry-run`
//! as `aws-cli.sh` runs `create cluster`, against AWS on loopback (moto's server and the
//! answerer, tests/aws_loopback). A dry run reads the account's zones and the instance
//! types offered in them, and checks the config and every nodegroup's type against them,
//! creating nothing.
//!
//! - GB200 (an UltraServer block in the Dallas Local Zone): the whole file is refused,
//!   as it is on AWS ("none of the provided AZs ... support instance type
//!   p6e-gb200.36xlarge": eksctl checks a nodegroup's type against the cluster's regional
//!   zones, not its `localZones`), and the script's form, `--without-nodegroup`, is
//!   accepted with the Local Zone in the VPC's zones.
//! - A two-block p5 plan: accepted as emitted, once its reservation ids are filled in as
//!   the script fills them; on the Karpenter route (`--route karpenter`), its cluster with
//!   only the system nodegroup, accepted as emitted.
//!
//! Not run here: `eksctl create nodegroup`, which needs the cluster's Kubernetes API.

#[path = "aws_loopback/mod.rs"]
mod aws_loopback;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aws_loopback::Aws;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn eksctl() -> PathBuf {
    let out = Command::new(repo().join("scripts/go-tool.sh"))
        .args(["eksctl", "path"])
        .output()
        .unwrap();
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        path.is_file(),
        "eksctl is not built ({path:?}): run scripts/test-deps.sh (scripts/go-tool.sh eksctl builds it once, about 10 minutes)"
    );
    path
}

/// `trainplace advise ARGS --emit DIR`.
fn emit(args: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .arg("advise")
        .args(args)
        .args(["--now", "2026-11-22T00:00:00Z", "--emit"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "advise: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn fixture(name: &str) -> String {
    repo()
        .join("crates/advisor/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// `eksctl ARGS` in `dir` against `aws`.
fn run_eksctl(aws: &Aws, dir: &Path, args: &[&str]) -> Output {
    Command::new(eksctl())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .envs(aws.env(dir))
        .output()
        .unwrap()
}

/// The `eksctl create cluster` line `aws-cli.sh` runs for a new cluster.
fn create_cluster_line(dir: &Path) -> Vec<String> {
    let script = std::fs::read_to_string(dir.join("aws-cli.sh")).unwrap();
    let line = script
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("eksctl create cluster"))
        .unwrap_or_else(|| panic!("no eksctl create cluster in\n{script}"));
    line.split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn eksctl_accepts_the_gb200_plan_as_the_script_creates_it() {
    let aws = Aws::start();
    let gb200 = fixture("gb200-offerings.json");
    let dir = emit(&[
        "--gpus",
        "72",
        "--family",
        "gb200",
        "--days",
        "7",
        "--capacity",
        "capacity-block",
        "--offerings",
        &gb200,
    ]);
    let path = dir.path().join("eksctl-cluster.yaml");
    let config = std::fs::read_to_string(&path).unwrap();
    assert!(config.contains("us-east-1-dfw-2a"), "{config}");
    // As aws-cli.sh fills in the block's id and the nodes' AMI before eksctl runs.
    let filled = config
        .replace(
            "REPLACE-WITH-cr-ID-OF-cb-0gb2000000000001",
            "cr-0123456789abcdef1",
        )
        .replace("REPLACE-WITH-AMI-ID", "ami-0f0e0d0c0b0a09080");
    assert!(!filled.contains("REPLACE-WITH"), "{filled}");
    std::fs::write(&path, filled).unwrap();
    // The whole file, as eksctl would take it in one step: refused for the reason the
    // script works around.
    let whole = run_eksctl(
        &aws,
        dir.path(),
        &[
            "create",
            "cluster",
            "-f",
            "eksctl-cluster.yaml",
            "--dry-run",
        ],
    );
    assert!(!whole.status.success(), "{}", text(&whole));
    assert!(
        text(&whole).contains("support instance type p6e-gb200.36xlarge"),
        "{}",
        text(&whole)
    );
    // The script's own line, dry run: accepted, the Local Zone kept for the VPC.
    let mut args = create_cluster_line(dir.path());
    assert!(args.iter().any(|a| a == "--without-nodegroup"), "{args:?}");
    args.push("--dry-run".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_eksctl(&aws, dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out));
    let printed: serde_json::Value = serde_yaml_ng::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["localZones"][0], "us-east-1-dfw-2a", "{printed}");
    // eksctl asked for the Local Zone by name (ValidateLocalZones), and the answerer, not
    // moto, answered that.
    assert!(
        aws.requests()
            .contains("answerer DescribeAvailabilityZones"),
        "{}",
        aws.requests()
    );
}

#[test]
fn eksctl_accepts_the_two_block_p5_plan() {
    let aws = Aws::start();
    let offerings = fixture("capacity-block-offerings.json");
    let dir = emit(&[
        "--gpus",
        "64",
        "--family",
        "h100",
        "--days",
        "7",
        "--capacity",
        "capacity-block",
        "--offerings",
        &offerings,
    ]);
    let path = dir.path().join("eksctl-cluster.yaml");
    let config = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        config.matches("REPLACE-WITH-cr-ID-OF-").count(),
        2,
        "two blocks: {config}"
    );
    // As aws-cli.sh fills in the ids purchase-capacity-block answered.
    let mut filled = config.clone();
    for (i, id) in ["cr-0123456789abcdef1", "cr-0123456789abcdef2"]
        .iter()
        .enumerate()
    {
        let at = filled.find("REPLACE-WITH-cr-ID-OF-").unwrap();
        let end = at + filled[at..].find(char::is_whitespace).unwrap();
        filled.replace_range(at..end, id);
        assert!(filled.contains(id), "block {i}");
    }
    std::fs::write(&path, filled).unwrap();
    let mut args = create_cluster_line(dir.path());
    assert_eq!(args, ["create", "cluster", "-f", "eksctl-cluster.yaml"]);
    args.push("--dry-run".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_eksctl(&aws, dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out));
    let printed: serde_json::Value = serde_yaml_ng::from_slice(&out.stdout).unwrap();
    let groups = printed["managedNodeGroups"].as_array().unwrap();
    let reserved: Vec<&str> = groups
        .iter()
        .filter_map(|g| {
            g["capacityReservation"]["capacityReservationTarget"]["capacityReservationID"].as_str()
        })
        .collect();
    assert_eq!(
        reserved,
        ["cr-0123456789abcdef1", "cr-0123456789abcdef2"],
        "{printed}"
    );
    // moto answered the zone check (DescribeInstanceTypeOfferings) itself.
    assert!(
        aws.requests()
            .contains("moto DescribeInstanceTypeOfferings"),
        "{}",
        aws.requests()
    );
}

/// The Karpenter route's config: only the system nodegroup, nothing to fill in.
#[test]
fn eksctl_accepts_the_karpenter_route_p5_plan() {
    let aws = Aws::start();
    let offerings = fixture("capacity-block-offerings.json");
    let dir = emit(&[
        "--gpus",
        "64",
        "--family",
        "h100",
        "--days",
        "7",
        "--capacity",
        "capacity-block",
        "--route",
        "karpenter",
        "--offerings",
        &offerings,
    ]);
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    assert!(!config.contains("REPLACE-WITH"), "{config}");
    let mut args = create_cluster_line(dir.path());
    assert_eq!(args, ["create", "cluster", "-f", "eksctl-cluster.yaml"]);
    args.push("--dry-run".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_eksctl(&aws, dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out));
    let printed: serde_json::Value = serde_yaml_ng::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = printed["managedNodeGroups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(names, ["system"], "{printed}");
    assert!(printed["nodeGroups"].as_array().is_none_or(Vec::is_empty));
}
