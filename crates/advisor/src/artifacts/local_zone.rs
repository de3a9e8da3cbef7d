//! Plans whose nodes live in a Local Zone (P6e-GB200 UltraServer Capacity Blocks are
//! sold in the Dallas Local Zone, `us-east-1-dfw-2a`:
//! <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html>).
//!
//! - EKS does not place its control-plane interfaces in Local Zone subnets, and eksctl
//!   launches only self-managed nodegroups there: the cluster lists the zone under
//!   `localZones` (eksctl's `ClusterConfig.localZones`: "Only self-managed nodegroups can
//!   be launched in local zones", schemas/schema.json), the GPU nodes are a `nodeGroups`
//!   entry with `localZones: [zone]`, and the cluster's own zones and the system
//!   nodegroup stay in the region's Availability Zones
//!   (<https://docs.aws.amazon.com/eks/latest/userguide/local-zones.html>).
//! - eksctl (v0.215.0) checks a new cluster's nodegroup instance types against the
//!   cluster's regional zones, never a nodegroup's `localZones`: `eksctl create cluster`
//!   of the whole file answers "none of the provided AZs ... support instance type
//!   p6e-gb200.36xlarge" (`CheckInstanceAvailability`,
//!   <https://github.com/eksctl-io/eksctl/blob/v0.215.0/pkg/eks/api.go>, run from
//!   `createOrImportVPC` in pkg/ctl/create/cluster.go on the nodegroups left after
//!   `--without-nodegroup`). So the script creates the cluster `--without-nodegroup`
//!   (its VPC still gets the Local Zone's subnets, from `localZones`), then its
//!   nodegroups with `eksctl create nodegroup`, which runs no such check
//!   (pkg/actions/nodegroup/create.go). tests/advisor_eksctl.rs runs both `create cluster`
//!   forms with the real eksctl.
//! - A Local Zone is used only once the account opted in to its zone group
//!   (`aws ec2 modify-availability-zone-group`,
//!   <https://docs.aws.amazon.com/cli/latest/reference/ec2/modify-availability-zone-group.html>);
//!   the script looks the group and its status up first
//!   (`describe-availability-zones --all-availability-zones`) and opts in only when it
//!   is not yet, so a rerun changes nothing.

use serde_json::{Value, json};

use super::node_labels::{LABEL_EKS_CAPACITY_TYPE, LABEL_EKS_NODEGROUP};
use crate::recommend::{CapacityPlan, Recommendation};
use crate::regions::companion_zone;

/// The plan's Local Zone, when its nodes are in one (not `region` + one letter).
pub fn local_zone(rec: &Recommendation) -> Option<&str> {
    let zone = rec.availability_zone.as_str();
    let region = rec.request.region.as_str();
    let rest = zone.strip_prefix(region)?;
    (rest.len() > 1 && crate::regions::is_zone_of(zone, region)).then_some(zone)
}

/// The cluster's two Availability Zones beside a Local Zone: the request's when it
/// names regular zones, else the region's `a` and `b`.
pub fn cluster_zones(rec: &Recommendation) -> [String; 2] {
    let region = &rec.request.region;
    let allowed: Vec<String> = rec
        .request
        .zones
        .iter()
        .filter(|z| z.len() == region.len() + 1)
        .cloned()
        .collect();
    let first = allowed
        .first()
        .cloned()
        .unwrap_or_else(|| format!("{region}a"));
    let second = companion_zone(&first, region, &allowed);
    [first, second]
}

/// A managed-nodegroup entry made the self-managed `nodeGroups` entry eksctl launches in
/// `zone`: `localZones` instead of `availabilityZones`, no EKS node repair (a managed
/// nodegroup feature: the node monitoring agent still reports), and the two labels EKS
/// puts on managed Capacity Block nodes, so the job's selector and affinity
/// (`pod.rs`) and `trainplace check`'s Capacity Block tie treat these nodes as they
/// treat a managed nodegroup's.
pub fn self_managed(mut ng: Value, zone: &str, rec: &Recommendation) -> Value {
    let Some(map) = ng.as_object_mut() else {
        return ng;
    };
    map.remove("availabilityZones");
    map.remove("nodeRepairConfig");
    map.insert("localZones".into(), json!([zone]));
    if matches!(rec.capacity, CapacityPlan::CapacityBlock { .. }) {
        // Empty until the block is active: `eksctl create nodegroup` waits for a
        // self-managed group's desired nodes, and its Auto Scaling group would retry
        // launches a block not yet active refuses. The scheduled scale-out at the block's
        // start, or the set-up run after it (`schedule.rs`), sets the job's size.
        map.insert("desiredCapacity".into(), json!(0));
    }
    if needs_ami(rec) {
        map.insert("ami".into(), json!(AMI_PLACEHOLDER));
    }
    let name = map.get("name").cloned().unwrap_or(Value::Null);
    if let Some(labels) = map.get_mut("labels").and_then(Value::as_object_mut) {
        labels.insert(LABEL_EKS_NODEGROUP.into(), name);
        if matches!(rec.capacity, CapacityPlan::CapacityBlock { .. }) {
            labels.insert(LABEL_EKS_CAPACITY_TYPE.into(), json!("CAPACITY_BLOCK"));
        }
    }
    ng
}

/// The ClusterConfig of a Local Zone plan: the zone listed, the job's nodegroups moved
/// from `managedNodeGroups` to self-managed `nodeGroups`. Other plans are left alone.
pub fn place(config: &mut Value, rec: &Recommendation, job_groups: &[String]) {
    let Some(zone) = local_zone(rec) else {
        return;
    };
    let Some(managed) = config["managedNodeGroups"].as_array().cloned() else {
        return;
    };
    let (job, rest): (Vec<Value>, Vec<Value>) = managed.into_iter().partition(|ng| {
        ng["name"]
            .as_str()
            .is_some_and(|n| job_groups.iter().any(|g| g == n))
    });
    config["localZones"] = json!([zone]);
    config["managedNodeGroups"] = json!(rest);
    config["nodeGroups"] = json!(
        job.into_iter()
            .map(|ng| self_managed(ng, zone, rec))
            .collect::<Vec<_>>()
    );
}

/// `aws-cli.sh` lines that opt the account in to the plan's Local Zone group, only when
/// it is not opted in yet.
pub fn opt_in_lines(rec: &Recommendation, out: &mut Vec<String>) {
    let Some(zone) = local_zone(rec) else {
        return;
    };
    out.push(format!(
        "# {{STEP}} Opt in to the Local Zone {zone} (its nodes launch only there); nothing to do when already opted in."
    ));
    out.push(format!(
        "LZ_GROUP=$(aws ec2 describe-availability-zones --region \"$REGION\" --all-availability-zones --filters Name=zone-name,Values={zone} --query 'AvailabilityZones[0].GroupName' --output text)"
    ));
    out.push(format!(
        "if [ -z \"$LZ_GROUP\" ] || [ \"$LZ_GROUP\" = None ]; then echo 'Local Zone {zone} not found in '\"$REGION\" >&2; exit 1; fi"
    ));
    out.push(format!(
        "if [ \"$(aws ec2 describe-availability-zones --region \"$REGION\" --all-availability-zones --filters Name=zone-name,Values={zone} --query 'AvailabilityZones[0].OptInStatus' --output text)\" = opted-in ]; then echo \"Local Zone group $LZ_GROUP: opted in\"; else aws ec2 modify-availability-zone-group --region \"$REGION\" --group-name \"$LZ_GROUP\" --opt-in-status opted-in; fi"
    ));
    out.push(String::new());
}

/// The `else` branch of the script's cluster step for a Local Zone plan (the cluster does
/// not exist yet): the cluster without nodegroups, then its nodegroups; `None` for other
/// plans.
pub fn create_cluster_lines(rec: &Recommendation) -> Option<Vec<String>> {
    local_zone(rec)?;
    Some(vec![
        "  # eksctl checks a new cluster's nodegroup types against its regional zones, not localZones: the nodegroups come after the cluster.".into(),
        "  eksctl create cluster -f eksctl-cluster.yaml --without-nodegroup".into(),
        "  eksctl create nodegroup -f eksctl-cluster.yaml".into(),
    ])
}

/// Stands in for the GB200 nodes' AMI id until `aws-cli.sh` reads it ([`ami_lines`]).
pub const AMI_PLACEHOLDER: &str = "REPLACE-WITH-AMI-ID";

/// Whether the nodegroup needs its AMI named: eksctl v0.215.0's instance table has no
/// p6e-gb200.36xlarge (<https://github.com/eksctl-io/eksctl/blob/v0.215.0/pkg/utils/instance/instance_types.go>),
/// so it takes the type for neither ARM nor NVIDIA and resolves the AL2023 x86_64
/// standard AMI for it (`MakeSSMParameterName`, pkg/ami/ssm_resolver.go), on which a
/// Grace (arm64) GB200 node does not run. The EKS guide recommends the AL2023 ARM NVIDIA
/// variant of the EKS-optimized accelerated AMI
/// (<https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html>).
pub fn needs_ami(rec: &Recommendation) -> bool {
    rec.instance.name.starts_with("p6e-gb200")
}

/// The AL2023 ARM64 NVIDIA AMI's public SSM parameter for the plan's Kubernetes version
/// (<https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html>).
pub fn ami_parameter(rec: &Recommendation) -> String {
    format!(
        "/aws/service/eks/optimized-ami/{}/amazon-linux-2023/arm64/nvidia/recommended/image_id",
        rec.request.eks_version
    )
}

/// `aws-cli.sh` lines that read that AMI's id and write it into eksctl-cluster.yaml,
/// before anything is bought: a region or Kubernetes version without the AMI stops the
/// script there.
pub fn ami_lines(rec: &Recommendation, out: &mut Vec<String>) {
    if !needs_ami(rec) || local_zone(rec).is_none() {
        return;
    }
    let parameter = ami_parameter(rec);
    let version = &rec.request.eks_version;
    out.push(format!(
        "# {{STEP}} The {} nodes' AMI: the EKS-optimized AL2023 ARM64 NVIDIA AMI for Kubernetes {version} (eksctl would pick an x86_64 one for this type); read before anything is bought.",
        rec.instance.name
    ));
    out.push(format!(
        "if grep -q {AMI_PLACEHOLDER} eksctl-cluster.yaml; then AMI=$(aws ssm get-parameter --region \"$REGION\" --name {parameter} --query Parameter.Value --output text); case \"$AMI\" in ami-*) ;; *) echo \"no AL2023 ARM64 NVIDIA AMI for Kubernetes {version} in $REGION ({parameter}: $AMI)\" >&2; exit 1;; esac; sed \"s/{AMI_PLACEHOLDER}/$AMI/\" eksctl-cluster.yaml > eksctl-cluster.yaml.new && mv eksctl-cluster.yaml.new eksctl-cluster.yaml; fi"
    ));
    out.push(String::new());
}
