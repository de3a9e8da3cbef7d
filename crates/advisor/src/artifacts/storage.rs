//! Checkpoint storage for long runs: an FSx for Lustre file system the job's pods share,
//! made by the FSx for Lustre CSI driver from a StorageClass and a PersistentVolumeClaim
//! (dynamic provisioning, <https://github.com/kubernetes-sigs/aws-fsx-csi-driver>), and
//! mounted at [`MOUNT_PATH`] in every pod of the job.
//!
//! - The driver is the EKS add-on `aws-fsx-csi-driver`, in `eksctl-cluster.yaml`; it
//!   authenticates with IAM roles for service accounts (the cluster has OIDC) or EKS Pod
//!   Identity (<https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html>);
//!   the role gets `AmazonFSxFullAccess`, as that page's role does.
//! - Size: one checkpoint (weights and optimizer state) is at most what the job holds in
//!   accelerator memory, so the file system holds [`CHECKPOINTS_KEPT`] of them (the last
//!   good one, the one before, the one being written): `3 x GPUs x memory per GPU`,
//!   rounded up to a size FSx accepts. PERSISTENT_2 SSD takes 1,200 GiB, 2,400 GiB and
//!   then multiples of 2,400 GiB (`StorageCapacity`,
//!   <https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html>).
//! - Throughput: PERSISTENT_2 offers 125, 250, 500 or 1,000 MB/s per TiB
//!   (<https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html>);
//!   we take 250.
//! - Network: the file system goes in a private subnet of the job's zone, in the
//!   cluster security group, which admits all traffic from the nodes of the cluster's
//!   managed nodegroups; `aws-cli.sh` fills both in after the cluster exists.
//! - Deadline: on a Capacity Block the pods get the plan's checkpoint deadline
//!   (`CHECKPOINT_BY`, the block's end less its end margin) beside the directory
//!   (`CHECKPOINT_DIR`), so the training script saves before its nodes go.
//!
//! Emitted for Capacity Blocks (the plan sets a deadline) and for runs of at least
//! [`LONG_RUN_HOURS`]; not for nodes that exist already (their cluster's storage is
//! its own).

use serde_json::{Value, json};

use crate::recommend::{CapacityPlan, Recommendation};

pub const STORAGE_FILE: &str = "checkpoint-storage.yaml";
/// The EKS add-on of the FSx for Lustre CSI driver.
pub const FSX_ADDON: &str = "aws-fsx-csi-driver";
pub const FSX_POLICY: &str = "arn:aws:iam::aws:policy/AmazonFSxFullAccess";
pub const FSX_PROVISIONER: &str = "fsx.csi.aws.com";
pub const MOUNT_PATH: &str = "/checkpoints";
pub const VOLUME: &str = "checkpoints";
pub const SUBNET_PLACEHOLDER: &str = "REPLACE-WITH-SUBNET-ID";
pub const SECURITY_GROUP_PLACEHOLDER: &str = "REPLACE-WITH-SECURITY-GROUP-ID";
/// Runs at least this long get checkpoint storage even on-demand.
pub const LONG_RUN_HOURS: u32 = 24;
pub const CHECKPOINTS_KEPT: u64 = 3;
/// PERSISTENT_2 SSD capacities: 1,200, 2,400, then multiples of 2,400 GiB.
pub const FSX_MIN_GIB: u64 = 1200;
pub const FSX_STEP_GIB: u64 = 2400;
pub const THROUGHPUT_MBPS_PER_TIB: u32 = 250;
/// Accelerator memory assumed when the catalog has none for the type.
const FALLBACK_GIB_PER_ACCELERATOR: u64 = 96;

/// Whether the plan gets checkpoint storage.
pub fn applies(rec: &Recommendation) -> bool {
    match rec.capacity {
        CapacityPlan::Existing { .. } => false,
        CapacityPlan::CapacityBlock { .. } => true,
        _ => rec.request.job_hours >= LONG_RUN_HOURS,
    }
}

/// The smallest PERSISTENT_2 SSD capacity holding `gib`.
pub fn fsx_capacity_gib(gib: u64) -> u64 {
    if gib <= FSX_MIN_GIB {
        FSX_MIN_GIB
    } else {
        gib.div_ceil(FSX_STEP_GIB) * FSX_STEP_GIB
    }
}

/// What the job's checkpoints need before rounding: [`CHECKPOINTS_KEPT`] times the
/// job's accelerator memory.
pub fn needed_gib(rec: &Recommendation) -> u64 {
    let per = rec
        .instance
        .accelerator_memory_gi_b
        .map_or(FALLBACK_GIB_PER_ACCELERATOR, u64::from);
    CHECKPOINTS_KEPT * u64::from(rec.shape.total_gpus) * per
}

pub fn claim_name(rec: &Recommendation) -> String {
    format!("{}-checkpoints", rec.request.names.job)
}

pub fn class_name(rec: &Recommendation) -> String {
    format!("{}-fsx", rec.request.names.job)
}

/// The checkpoint deadline of a Capacity Block plan.
pub fn deadline(rec: &Recommendation) -> Option<jiff::Timestamp> {
    match &rec.capacity {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } => Some(plan.checkpoint_by),
        _ => None,
    }
}

pub fn storage_class(rec: &Recommendation) -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": class_name(rec)},
        "provisioner": FSX_PROVISIONER,
        "reclaimPolicy": "Retain",
        "volumeBindingMode": "Immediate",
        "parameters": {
            "subnetId": SUBNET_PLACEHOLDER,
            "securityGroupIds": SECURITY_GROUP_PLACEHOLDER,
            "deploymentType": "PERSISTENT_2",
            "perUnitStorageThroughput": THROUGHPUT_MBPS_PER_TIB.to_string(),
            "fileSystemTypeVersion": "2.15",
        },
        "mountOptions": ["flock"],
    })
}

pub fn claim(rec: &Recommendation) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim_name(rec), "namespace": rec.request.names.namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": class_name(rec),
            "resources": {"requests": {"storage": format!("{}Gi", fsx_capacity_gib(needed_gib(rec)))}},
        },
    })
}

/// The eksctl add-on entry, when the plan gets storage.
pub fn addon(rec: &Recommendation) -> Option<Value> {
    applies(rec).then(|| json!({"name": FSX_ADDON, "attachPolicyARNs": [FSX_POLICY]}))
}

/// Mount the claim in every pod template of `job` (every object holding `containers`),
/// with the directory and, on a Capacity Block, the deadline in the containers' env.
pub fn mount(rec: &Recommendation, job: &mut Value) {
    if !applies(rec) {
        return;
    }
    let mut env = vec![
        json!({"name": "CHECKPOINT_DIR", "value": format!("{MOUNT_PATH}/{}", rec.request.names.job)}),
    ];
    if let Some(by) = deadline(rec) {
        env.push(json!({"name": "CHECKPOINT_BY", "value": by.to_string()}));
    }
    export_through_mpirun(job, &env);
    let volume = json!({"name": VOLUME, "persistentVolumeClaim": {"claimName": claim_name(rec)}});
    let mount = json!({"name": VOLUME, "mountPath": MOUNT_PATH});
    each_pod_spec(job, &mut |spec| {
        push(spec, "volumes", volume.clone());
        if let Some(containers) = spec["containers"].as_array_mut() {
            for c in containers {
                push(c, "volumeMounts", mount.clone());
                for e in &env {
                    push(c, "env", e.clone());
                }
            }
        }
    });
}

/// MPIJob ranks start through sshd without the worker container's env: the launcher's
/// `mpirun` passes the checkpoint env with `-x NAME=VALUE`, as it does NCCL's.
fn export_through_mpirun(job: &mut Value, env: &[Value]) {
    if job["kind"] != "MPIJob" {
        return;
    }
    let command = &mut job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        [0]["command"];
    let Some(args) = command.as_array_mut() else {
        return;
    };
    if args.first().and_then(Value::as_str) != Some("mpirun") {
        return;
    }
    for (i, e) in env.iter().enumerate() {
        let pair = format!(
            "{}={}",
            e["name"].as_str().unwrap_or_default(),
            e["value"].as_str().unwrap_or_default()
        );
        args.insert(1 + 2 * i, json!("-x"));
        args.insert(2 + 2 * i, json!(pair));
    }
}

fn push(obj: &mut Value, key: &str, item: Value) {
    match obj.get_mut(key).and_then(Value::as_array_mut) {
        Some(items) => items.push(item),
        None => obj[key] = json!([item]),
    }
}

fn each_pod_spec(v: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    match v {
        Value::Object(map) if map.get("containers").is_some_and(Value::is_array) => f(v),
        Value::Object(map) => map.values_mut().for_each(|c| each_pod_spec(c, f)),
        Value::Array(items) => items.iter_mut().for_each(|c| each_pod_spec(c, f)),
        _ => {}
    }
}

/// The file's header.
pub fn notes(rec: &Recommendation) -> Vec<String> {
    let mut notes = vec![
        format!(
            "Checkpoint storage: FSx for Lustre PERSISTENT_2 ({THROUGHPUT_MBPS_PER_TIB} MB/s/TiB) made by the {FSX_ADDON} add-on, mounted at {MOUNT_PATH} in every pod of the job"
        ),
        format!(
            "size: {CHECKPOINTS_KEPT} checkpoints x {} GPUs x {} GiB = {} GiB, rounded up to {} GiB (PERSISTENT_2 SSD: 1200, 2400, then multiples of 2400 GiB)",
            rec.shape.total_gpus,
            needed_gib(rec) / CHECKPOINTS_KEPT / u64::from(rec.shape.total_gpus.max(1)),
            needed_gib(rec),
            fsx_capacity_gib(needed_gib(rec))
        ),
        "aws-cli.sh fills in the subnet (private, the job's zone) and the cluster security group, then applies it; reclaimPolicy Retain keeps the file system (and its bill) after the claim goes: delete it in FSx when done".into(),
    ];
    if let Some(by) = deadline(rec) {
        notes.push(format!(
            "checkpoint by {by} (the block's end less its end margin): the pods get it as CHECKPOINT_BY"
        ));
    }
    notes
}

/// Shell lines (set-up stage, after the cluster): fill in the subnet and security
/// group, make the namespace, apply the class and claim, wait until FSx made the file
/// system. Every step is idempotent (`sed` finds nothing to replace on a rerun).
pub fn install_lines(rec: &Recommendation, out: &mut Vec<String>) {
    if !applies(rec) {
        return;
    }
    let req = &rec.request;
    let (cluster, ns) = (&req.names.cluster, &req.names.namespace);
    out.push(String::new());
    out.push(format!("# {{STEP}} Checkpoint storage ({STORAGE_FILE}): FSx for Lustre in a private subnet of {} and the cluster security group; FSx takes about 10-20 minutes to make it.", rec.availability_zone));
    out.push(format!(
        "if grep -q {SUBNET_PLACEHOLDER} {STORAGE_FILE}; then"
    ));
    out.push(format!("  SUBNET=$(aws ec2 describe-subnets --region \"$REGION\" --filters Name=tag:alpha.eksctl.io/cluster-name,Values={cluster} Name=availability-zone,Values={} Name=map-public-ip-on-launch,Values=false --query 'Subnets[0].SubnetId' --output text)", rec.availability_zone));
    out.push(format!("  SG=$(aws eks describe-cluster --region \"$REGION\" --name {cluster} --query cluster.resourcesVpcConfig.clusterSecurityGroupId --output text)"));
    out.push(format!("  sed -e \"s/{SUBNET_PLACEHOLDER}/$SUBNET/\" -e \"s/{SECURITY_GROUP_PLACEHOLDER}/$SG/\" {STORAGE_FILE} > {STORAGE_FILE}.new && mv {STORAGE_FILE}.new {STORAGE_FILE}"));
    out.push("fi".into());
    out.push(format!(
        "kubectl create namespace {ns} --dry-run=client -o yaml | kubectl apply -f -"
    ));
    out.push(format!("kubectl apply -f {STORAGE_FILE}"));
    out.push(format!(
        "kubectl -n {ns} wait --for=jsonpath='{{.status.phase}}'=Bound pvc/{} --timeout=30m",
        claim_name(rec)
    ));
}
