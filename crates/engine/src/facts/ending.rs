//! Running jobs on Capacity Blocks that end soon (`trainplace audit --ending-within`):
//! the pods bound to block nodes, grouped by the job they belong to, for blocks that
//! end within a window. What the admission rule tells a submitter, told again to
//! whoever runs the cluster while there is still time to checkpoint.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::Value;

use crate::facts::block_nodes::Provisioner;
use crate::facts::inventory::Snapshot;
use crate::facts::reservations::Reservation;
use crate::read::annotations::JOB_IDENTITY_LABELS;
use crate::read::json::{items, str_at};

/// One job with pods on a block that ends within the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndingJob {
    pub namespace: String,
    /// The job's name: its identity label's value, else its owner's, else the pod's.
    pub job: String,
    /// What names it (`batch Job`, `JobSet`, `ReplicaSet`, `Pod`).
    pub kind: String,
    /// The job's pods on the block, by name.
    pub pods: Vec<String>,
    /// The `uid` of each pod (for PolicyReport resources), in the order of `pods`.
    #[serde(skip)]
    pub pod_uids: Vec<Option<String>>,
    pub reservation: String,
    pub instance_type: String,
    pub ends: Timestamp,
    /// When the job's pods stop: EC2's reclaim, or the managed node group's scale-down.
    pub stops: Timestamp,
    pub stopped_by: &'static str,
}

impl EndingJob {
    /// Time left until the pods stop (negative once they are stopping).
    pub fn left(&self, now: Timestamp) -> SignedDuration {
        self.stops.duration_since(now)
    }

    /// One sentence for a PolicyReport result or a log line.
    pub fn message(&self, now: Timestamp) -> String {
        format!(
            "{} {}/{} has {} pod(s) on Capacity Block {} ({}), which ends {}; {} at {} ({:.1}h from {now}): checkpoint now and resume on a later block or other capacity.",
            self.kind,
            self.namespace,
            self.job,
            self.pods.len(),
            self.reservation,
            self.instance_type,
            self.ends,
            self.stopped_by,
            self.stops,
            self.left(now).as_secs_f64() / 3600.0,
        )
    }
}

/// The job a pod belongs to: (kind, name).
pub(crate) fn job_of(pod: &Value) -> (String, String) {
    for (key, what) in JOB_IDENTITY_LABELS {
        if let Some(v) = str_at(pod, &["metadata", "labels", key]) {
            return (what.to_string(), v.to_string());
        }
    }
    if let Some(owner) = items(pod, &["metadata", "ownerReferences"]).first() {
        return (
            str_at(owner, &["kind"]).unwrap_or("owner").to_string(),
            str_at(owner, &["name"]).unwrap_or("").to_string(),
        );
    }
    (
        "Pod".into(),
        str_at(pod, &["metadata", "name"]).unwrap_or("").to_string(),
    )
}

/// A pod that holds its node: bound, and neither Succeeded nor Failed.
pub(crate) fn running(pod: &Value) -> Option<&str> {
    let phase = str_at(pod, &["status", "phase"]);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    str_at(pod, &["spec", "nodeName"])
}

/// Jobs whose pods run on blocks ending within `within` of `now`, the first to stop
/// first. Blocks come from `snapshot`'s reservations; nodes from its block nodes.
pub fn ending_within<'v>(
    pods: impl IntoIterator<Item = &'v Value>,
    snapshot: &Snapshot,
    now: Timestamp,
    within: SignedDuration,
) -> Vec<EndingJob> {
    let mut jobs: BTreeMap<(String, String, String, String), EndingJob> = BTreeMap::new();
    for pod in pods {
        let Some(node) = running(pod).and_then(|n| snapshot.block_nodes().node(n)) else {
            continue;
        };
        let Some(block) = node.block(snapshot.reservations()) else {
            continue;
        };
        if block.end.duration_since(now) > within {
            continue;
        }
        let namespace = str_at(pod, &["metadata", "namespace"])
            .unwrap_or("default")
            .to_string();
        let (kind, job) = job_of(pod);
        let key = (
            namespace.clone(),
            kind.clone(),
            job.clone(),
            block.id.clone(),
        );
        let entry = jobs
            .entry(key)
            .or_insert_with(|| new_job(namespace, kind, job, block, node.provisioner));
        entry
            .pods
            .push(str_at(pod, &["metadata", "name"]).unwrap_or("").to_string());
        entry
            .pod_uids
            .push(str_at(pod, &["metadata", "uid"]).map(String::from));
    }
    let mut out: Vec<EndingJob> = jobs.into_values().collect();
    out.sort_by(|a, b| a.stops.cmp(&b.stops).then(a.job.cmp(&b.job)));
    out
}

fn new_job(
    namespace: String,
    kind: String,
    job: String,
    block: &Reservation,
    provisioner: Provisioner,
) -> EndingJob {
    EndingJob {
        namespace,
        job,
        kind,
        pods: Vec::new(),
        pod_uids: Vec::new(),
        reservation: block.id.clone(),
        instance_type: block.instance_type.clone(),
        ends: block.end,
        stops: block.before_end(provisioner.stop_before_end()),
        stopped_by: provisioner.stopper(),
    }
}
