//! Checkpoint storage for long runs: an FSx for Lustre file system the job's pods share,
//! made by the FSx for Lustre CSI driver from a StorageClass and a PersistentVolumeClaim
//! (dynamic provisioning, <https://github.com/kubernetes-sigs/aws-fsx-csi-driver>), and
//! mounted at [`MOUNT_PATH`] in every pod of the job.
//!
//! - The driver is the EKS add-on `aws-fsx-csi-driver`, in `eksctl-cluster.yaml`; it
//!   authenticates with IAM roles for service accounts (the cluster has OIDC) or EKS Pod
//!   Identity (<https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html>);
//!   the role gets `AmazonFSxFullAccess`, as that page's role does.
//! - Size and price: `checkpoint.rs` (from the model's size when given, the formula in
//!   the file's header and the plan's notes).
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
//! - When: the file system is made in the `run` stage, when the nodes are there (for a
//!   Capacity Block, once the block has started), not at set-up days or weeks before; the
//!   account's FSx for Lustre storage quota is checked before anything is bought
//!   ([`quota_lines`]).
//!
//! Emitted for Capacity Blocks (the plan sets a deadline) and for runs of at least
//! [`LONG_RUN_HOURS`]; not for nodes that exist already (their cluster's storage is
//! its own).

use serde_json::{Value, json};

use crate::checkpoint::Sizing;
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
pub use crate::checkpoint::{
    CHECKPOINTS_KEPT, FSX_MIN_GIB, FSX_STEP_GIB, LONG_RUN_HOURS, THROUGHPUT_MBPS_PER_TIB,
    fsx_capacity_gib,
};

/// Whether the plan gets checkpoint storage (`checkpoint::applies`).
pub fn applies(rec: &Recommendation) -> bool {
    crate::checkpoint::applies(&rec.request, &rec.capacity)
}

/// The plan's checkpoint storage size.
pub fn sizing(rec: &Recommendation) -> Sizing {
    crate::checkpoint::sizing(&rec.request, &rec.instance, &rec.shape)
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
            "resources": {"requests": {"storage": format!("{}Gi", sizing(rec).fsx_gib)}},
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
    let size = sizing(rec);
    let mut notes = vec![
        format!(
            "Checkpoint storage: FSx for Lustre PERSISTENT_2 ({THROUGHPUT_MBPS_PER_TIB} MB/s/TiB) made by the {FSX_ADDON} add-on, mounted at {MOUNT_PATH} in every pod of the job"
        ),
        format!("size: {}", size.formula),
        format!(
            "cost: ${:.2} a month (${} per GB-month, us-east-1 list price: https://aws.amazon.com/fsx/lustre/pricing/), ${:.2} for the run's {} hours",
            crate::checkpoint::usd_per_month(size.fsx_gib),
            crate::checkpoint::USD_PER_GB_MONTH,
            crate::checkpoint::usd_for_hours(size.fsx_gib, rec.request.job_hours),
            rec.request.job_hours
        ),
        "aws-cli.sh makes it in its run stage, once the nodes are up: it fills in the subnet (private, the job's zone) and the cluster security group, then applies it; reclaimPolicy Retain keeps the file system (and its bill) after the claim goes: delete it in FSx when done".into(),
    ];
    if let Some(by) = deadline(rec) {
        notes.push(format!(
            "checkpoint by {by} (the block's end less its end margin): the pods get it as CHECKPOINT_BY"
        ));
    }
    notes
}

/// FSx for Lustre storage the account may still make, checked before anything is bought:
/// the applied quotas of FSx for Lustre SSD storage (`service-quotas list-service-quotas
/// --service-code fsx`, matched by name: <https://docs.aws.amazon.com/fsx/latest/LustreGuide/limits.html>)
/// less what the account's Lustre file systems already hold (`fsx describe-file-systems`).
/// No such quota found by name: the script stops and says to check it by hand
/// (`FSX_QUOTA_CHECKED=1` once done).
pub fn quota_lines(rec: &Recommendation, out: &mut Vec<String>) {
    if !applies(rec) {
        return;
    }
    let need = sizing(rec).fsx_gib;
    out.push(format!(
        "# {{STEP}} FSx for Lustre quota: the checkpoint storage needs {need} GiB of SSD storage ({STORAGE_FILE})."
    ));
    out.push(format!(
        "if [ \"${{FSX_QUOTA_CHECKED:-}}\" != 1 ]; then FSX_QUOTA=$(aws service-quotas list-service-quotas --region \"$REGION\" --service-code fsx --query \"min(Quotas[?contains(QuotaName, 'Lustre') && contains(QuotaName, 'SSD') && contains(QuotaName, 'storage')].Value)\" --output text); if [ -z \"$FSX_QUOTA\" ] || [ \"$FSX_QUOTA\" = None ]; then echo 'no FSx for Lustre SSD storage quota found in service-quotas: check it by hand (it must allow {need} GiB more), then run again with FSX_QUOTA_CHECKED=1' >&2; exit 1; fi; FSX_USED=$(aws fsx describe-file-systems --region \"$REGION\" --query \"sum(FileSystems[?FileSystemType=='LUSTRE'].StorageCapacity)\" --output text); if [ $(( ${{FSX_QUOTA%.*}} - ${{FSX_USED%.*}} )) -lt {need} ]; then echo \"FSx for Lustre SSD storage quota is $FSX_QUOTA GiB with $FSX_USED GiB in use; the checkpoint storage needs {need} GiB: request an increase (or pass --model-params-billions for a smaller size) first\" >&2; exit 1; fi; fi"
    ));
}

/// Shell lines (the `run` stage, once the nodes are up): fill in the subnet and security
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
