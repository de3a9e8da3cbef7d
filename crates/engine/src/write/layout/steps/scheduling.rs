//! Scheduling: tolerations, the instance type pinned, the job held in one zone, and one
//! pod per node.

use serde_json::{Value, json};

use super::spec::push_required;
use crate::judge::classify::{InstanceSource, Shape};
use crate::read::annotations::{LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_ZONE, RES_EFA};
use crate::read::json::items;
use crate::write::edit::Cursor;
use crate::write::layout::{Edit, Plan};

/// A pod affinity term over the job's own pods; per group where the workload has
/// independent groups (the scheduler fills `matchLabelKeys` from the pod's labels).
fn job_term(shape: &Shape<'_>, key: &str, value: &str, topology: &str) -> Value {
    let mut term = json!({"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology});
    if let Some(group) = &shape.group_label {
        term["matchLabelKeys"] = json!([group]);
    }
    term
}

fn per_group(shape: &Shape<'_>) -> String {
    match &shape.group_label {
        Some(group) => format!(" and the same {group}"),
        None => String::new(),
    }
}

/// A multi-pod job held in one zone: a required pod affinity over its own pods on the
/// zone key, unless something else places it already (a zone pinned, held, spread or
/// split). It needs neither the instance type nor the device count, so it is written
/// where no layout is (`Judgement::write`).
pub(in crate::write::layout) fn zone_hold(
    shape: &Shape<'_>,
    spec: &mut Cursor<'_>,
    ed: &mut Edit<'_>,
) {
    let z = &shape.zones;
    if !shape.multi_pod
        || z.pinned.is_some()
        || z.held
        || z.anti
        || z.allows_many.is_some()
        || z.spread
    {
        return;
    }
    let Some((key, value)) = &shape.identity else {
        return;
    };
    let term = job_term(shape, key, value, LABEL_ZONE);
    if push_required(spec, "podAffinity", term, ed.ops) {
        ed.change(
            format!(
                "podAffinity: pods with {key}={value}{} in one {LABEL_ZONE}",
                per_group(shape)
            ),
            "EFA traffic cannot cross availability zones".into(),
        );
    }
}

impl Plan<'_> {
    /// A pod affinity term over the job's own pods; per group where the workload has
    /// independent groups (the scheduler fills `matchLabelKeys` from the pod's labels).
    pub(in crate::write::layout) fn job_term(
        &self,
        key: &str,
        value: &str,
        topology: &str,
    ) -> Value {
        job_term(self.shape, key, value, topology)
    }

    pub(in crate::write::layout) fn per_group(&self) -> String {
        per_group(self.shape)
    }

    pub(in crate::write::layout) fn tolerations(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let mut keys = Vec::new();
        if !self.shape.accel_resource.is_empty() {
            keys.push(self.shape.accel_resource.clone());
        }
        // The pod is pinned to this instance type, and EFA node groups are tainted with
        // vpc.amazonaws.com/efa whether or not the pod takes an interface: without the
        // toleration a pod that uses no EFA (a single-pod job on part of a p5) never
        // schedules (seen in the sandbox's kube-scheduler).
        if self.shape.efa > 0 || self.adds_efa() || self.instance.has_efa() {
            keys.push(RES_EFA.to_string());
        }
        for key in keys {
            let tolerations = items(spec.value, &["tolerations"]);
            if !crate::budget::draw_len("spec.tolerations", tolerations.len()) {
                return;
            }
            let covered = tolerations.iter().any(|t| {
                let tkey = t.get("key").and_then(Value::as_str);
                tkey == Some(key.as_str())
                    || (tkey.is_none_or(str::is_empty)
                        && t.get("operator").and_then(Value::as_str) == Some("Exists"))
            });
            if covered {
                continue;
            }
            if let Some(mut tols) = spec.reborrow().array("tolerations", ed.ops) {
                tols.push(
                    json!({"key": key, "operator": "Exists", "effect": "NoSchedule"}),
                    ed.ops,
                );
                ed.change(
                    format!("toleration {key}:NoSchedule"),
                    "GPU and EFA node groups are tainted so only device pods land there".into(),
                );
            }
        }
    }

    pub(in crate::write::layout) fn pin_instance(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        if matches!(
            self.source,
            InstanceSource::NodeName
                | InstanceSource::Hostname
                | InstanceSource::NodeSelector
                | InstanceSource::NodeAffinity
        ) {
            return;
        }
        let Some(mut sel) = spec.reborrow().object("nodeSelector", ed.ops) else {
            return;
        };
        if sel.insert_missing(LABEL_INSTANCE_TYPE, json!(self.instance.name), ed.ops) {
            ed.change(
                format!("nodeSelector {LABEL_INSTANCE_TYPE}={}", self.instance.name),
                format!("instance type from {}", self.source.describe()),
            );
        }
    }

    pub(in crate::write::layout) fn zone_affinity(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        zone_hold(self.shape, spec, ed);
    }

    pub(in crate::write::layout) fn anti_affinity(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        if !self.shape.multi_pod || !self.whole_node() {
            return;
        }
        let Some((key, value)) = &self.shape.identity else {
            return;
        };
        let exists = items(
            spec.value,
            &[
                "affinity",
                "podAntiAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
            ],
        )
        .iter()
        .any(|t| t.get("topologyKey").and_then(Value::as_str) == Some(LABEL_HOSTNAME));
        if exists {
            return;
        }
        let term = self.job_term(key, value, LABEL_HOSTNAME);
        if push_required(spec, "podAntiAffinity", term, ed.ops) {
            ed.change(
                format!(
                    "podAntiAffinity: one pod with {key}={value}{} per node",
                    self.per_group()
                ),
                "one pod per node keeps every GPU of a node on NVLink inside one pod".into(),
            );
        }
    }
}
