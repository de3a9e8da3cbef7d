//! The layout steps: each writes one part of the recommended layout into a pod
//! template when it is missing, and records the change with its reason.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::{Edit, Plan, SHM_VOLUME};
use crate::judge::classify::InstanceSource;
use crate::read::annotations::{
    LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_ZONE, NCCL_DEBUG, RES_EFA,
};
use crate::read::edit::{Cursor, Ops};
use crate::read::json::items;
use crate::read::podspec::{command_line, env_entry};

impl Plan<'_> {
    /// A pod affinity term over the job's own pods; per group where the workload has
    /// independent groups (the scheduler fills `matchLabelKeys` from the pod's labels).
    pub(super) fn job_term(&self, key: &str, value: &str, topology: &str) -> Value {
        let mut term =
            json!({"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology});
        if let Some(group) = &self.shape.group_label {
            term["matchLabelKeys"] = json!([group]);
        }
        term
    }

    pub(super) fn per_group(&self) -> String {
        match &self.shape.group_label {
            Some(group) => format!(" and the same {group}"),
            None => String::new(),
        }
    }

    pub(super) fn efa(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let Some(n) = self.added_efa() else {
            return;
        };
        let first = self.containers[0];
        let name = container_name(spec.value, first);
        let has_requests = items(spec.value, &["containers"])
            .get(first)
            .and_then(|c| c.get("resources")?.get("requests"))
            .is_some_and(Value::is_object);
        let which: &[&str] = if has_requests {
            &["limits", "requests"]
        } else {
            &["limits"]
        };
        for w in which {
            if let Some(mut map) =
                container(spec, first).and_then(|c| c.objects(&["resources", w], ed.ops))
            {
                map.insert_missing(RES_EFA, json!(n), ed.ops);
            }
        }
        let why = if n == self.instance.max_efa {
            format!(
                "the pod takes the whole {}, so it gets all {n} EFA interfaces for inter-node traffic",
                self.instance.name
            )
        } else {
            format!(
                "the pod takes {} of {}'s {} GPUs, so it gets its share of the {} EFA interfaces; without EFA its inter-node traffic falls back to TCP",
                self.shape.per_pod,
                self.instance.name,
                self.instance.accelerators,
                self.instance.max_efa
            )
        };
        ed.change(format!("container {name}: {RES_EFA}={n}"), why);
    }

    pub(super) fn host_ipc(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        if self.host_access_forbidden {
            return;
        }
        if spec.insert_missing("hostIPC", Value::Bool(true), ed.ops) {
            ed.change(
                "hostIPC=true".into(),
                "part of the recommended layout (the field notes' working pods used it); NVLink inside the pod does not depend on it (measured 336.6 GB/s with host IPC, 338.7 GB/s without, docs/measurements.md)".into(),
            );
        }
    }

    pub(super) fn ipc_lock(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        if self.host_access_forbidden {
            return;
        }
        for &i in &self.containers {
            let name = container_name(spec.value, i);
            let has = items(spec.value, &["containers"])
                .get(i)
                .map(|c| items(c, &["securityContext", "capabilities", "add"]))
                .is_some_and(|caps| caps.iter().any(|v| v.as_str() == Some("IPC_LOCK")));
            if has {
                continue;
            }
            let Some(mut add) = container(spec, i)
                .and_then(|c| c.objects(&["securityContext", "capabilities"], ed.ops))
                .and_then(|c| c.array("add", ed.ops))
            else {
                continue;
            };
            add.push(json!("IPC_LOCK"), ed.ops);
            ed.change(
                format!("container {name}: capability IPC_LOCK"),
                "EFA/RDMA registration pins memory; IPC_LOCK lifts the RLIMIT_MEMLOCK cap on that (capabilities(7): https://man7.org/linux/man-pages/man7/capabilities.7.html) where the container runtime's memlock limit is low".into(),
            );
        }
    }

    pub(super) fn shm(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let needs: Vec<usize> = self
            .containers
            .iter()
            .copied()
            .filter(|&i| {
                items(spec.value, &["containers"])
                    .get(i)
                    .is_none_or(|c| mount_at(c, "/dev/shm").is_none())
            })
            .collect();
        if needs.is_empty() {
            return;
        }
        let volume = self.shm_volume(spec, ed);
        for i in needs {
            let name = container_name(spec.value, i);
            if let Some(mut mounts) =
                container(spec, i).and_then(|c| c.array("volumeMounts", ed.ops))
            {
                mounts.push(json!({"name": volume, "mountPath": "/dev/shm"}), ed.ops);
                ed.change(
                    format!("container {name}: /dev/shm from volume {volume}"),
                    "NCCL's shared-memory transport and data loaders need a large /dev/shm (the default is 64Mi)".into(),
                );
            }
        }
    }

    /// The memory-backed volume other containers already mount at /dev/shm, or a new one.
    pub(super) fn shm_volume(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) -> String {
        if let Some(name) = items(spec.value, &["containers"])
            .iter()
            .find_map(|c| mount_at(c, "/dev/shm"))
        {
            return name.to_string();
        }
        let taken = |n: &str| {
            items(spec.value, &["volumes"])
                .iter()
                .any(|v| v.get("name").and_then(Value::as_str) == Some(n))
        };
        let mut name = SHM_VOLUME.to_string();
        let mut k = 1;
        while taken(&name) {
            name = format!("{SHM_VOLUME}-{k}");
            k += 1;
        }
        if let Some(mut vols) = reborrow(spec).array("volumes", ed.ops) {
            vols.push(
                json!({"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}}),
                ed.ops,
            );
            ed.change(
                format!(
                    "volume {name}: emptyDir medium=Memory sizeLimit={}",
                    self.shm_size
                ),
                format!("memory-backed /dev/shm sized for {}", self.instance.name),
            );
        }
        name
    }

    pub(super) fn nccl_env(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let mut wanted: Vec<(&str, &str, Cow<'_, str>)> = Vec::new();
        // The catalog's rules name the accelerator family they serve: NCCL env on
        // NVIDIA instances, Neuron collectives' env on Trainium.
        let efa = self.shape.efa > 0 || self.adds_efa();
        let catalog = &self.eff.policy.catalog;
        for rule in catalog.nccl_env(self.instance, &self.eff.plugin_version, efa) {
            wanted.push((&rule.name, &rule.value, Cow::Borrowed(&rule.source)));
        }
        if let Some(level) = &self.nccl_debug {
            wanted.push((
                "NCCL_DEBUG",
                level,
                Cow::Owned(format!("annotation {NCCL_DEBUG}")),
            ));
            wanted.push((
                "NCCL_DEBUG_SUBSYS",
                "INIT,GRAPH,ENV,NET",
                Cow::Owned(format!(
                    "annotation {NCCL_DEBUG}: the subsystems that show transports and env"
                )),
            ));
        }
        for &i in &self.containers {
            for (name, value, why) in &wanted {
                let set = items(spec.value, &["containers"])
                    .get(i)
                    .is_some_and(|c| env_entry(c, name).is_some());
                if !set {
                    push_env(spec, i, name, value, why, ed);
                }
            }
        }
    }

    pub(super) fn torchrun_env(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        for &i in &self.containers {
            let Some(c) = items(spec.value, &["containers"]).get(i) else {
                continue;
            };
            // One look through the env: does it use PET_ variables, and is the count set?
            let (mut uses_pet, mut count_set) = (false, false);
            for name in items(c, &["env"])
                .iter()
                .filter_map(|e| e.get("name").and_then(Value::as_str))
            {
                uses_pet |= name.starts_with("PET_");
                count_set |= name == "PET_NPROC_PER_NODE";
            }
            let cmd = command_line(c);
            let cmd_sets = cmd.contains("--nproc_per_node") || cmd.contains("--nproc-per-node");
            if !uses_pet || cmd_sets || count_set {
                continue;
            }
            let n = container_accels(c, &self.shape.accel_resource).unwrap_or(self.shape.per_pod);
            // Not set (looked at above), so no second look through the env.
            push_env(
                spec,
                i,
                "PET_NPROC_PER_NODE",
                &n.to_string(),
                "torchrun starts one process per GPU in the pod",
                ed,
            );
        }
    }

    pub(super) fn tolerations(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
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
            let covered = items(spec.value, &["tolerations"]).iter().any(|t| {
                let tkey = t.get("key").and_then(Value::as_str);
                tkey == Some(key.as_str())
                    || (tkey.is_none_or(str::is_empty)
                        && t.get("operator").and_then(Value::as_str) == Some("Exists"))
            });
            if covered {
                continue;
            }
            if let Some(mut tols) = reborrow(spec).array("tolerations", ed.ops) {
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

    pub(super) fn pin_instance(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        if matches!(
            self.source,
            InstanceSource::NodeSelector | InstanceSource::NodeAffinity
        ) {
            return;
        }
        let Some(mut sel) = reborrow(spec).object("nodeSelector", ed.ops) else {
            return;
        };
        if sel.insert_missing(LABEL_INSTANCE_TYPE, json!(self.instance.name), ed.ops) {
            ed.change(
                format!("nodeSelector {LABEL_INSTANCE_TYPE}={}", self.instance.name),
                format!("instance type from {}", self.source.describe()),
            );
        }
    }

    pub(super) fn zone_affinity(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let z = &self.shape.zones;
        if !self.shape.multi_pod
            || z.pinned.is_some()
            || z.held
            || z.anti
            || z.allows_many.is_some()
            || z.spread
        {
            return;
        }
        let Some((key, value)) = &self.shape.identity else {
            return;
        };
        let term = self.job_term(key, value, LABEL_ZONE);
        if push_required(spec, "podAffinity", term, ed.ops) {
            ed.change(
                format!(
                    "podAffinity: pods with {key}={value}{} in one {LABEL_ZONE}",
                    self.per_group()
                ),
                "EFA traffic cannot cross availability zones".into(),
            );
        }
    }

    pub(super) fn anti_affinity(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
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

/// A short-lived cursor on the same place, so `spec` can be walked again later.
fn reborrow<'a>(c: &'a mut Cursor<'_>) -> Cursor<'a> {
    Cursor {
        value: &mut *c.value,
        ptr: c.ptr.clone(),
    }
}

fn container<'a>(spec: &'a mut Cursor<'_>, i: usize) -> Option<Cursor<'a>> {
    reborrow(spec).get("containers")?.at(i)
}

fn container_name(spec: &Value, i: usize) -> String {
    items(spec, &["containers"])
        .get(i)
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

pub(super) fn push_required(spec: &mut Cursor<'_>, kind: &str, term: Value, ops: &mut Ops) -> bool {
    match reborrow(spec)
        .objects(&["affinity", kind], ops)
        .and_then(|c| c.array("requiredDuringSchedulingIgnoredDuringExecution", ops))
    {
        Some(mut terms) => {
            terms.push(term, ops);
            true
        }
        None => false,
    }
}

fn mount_at<'v>(c: &'v Value, path: &str) -> Option<&'v str> {
    items(c, &["volumeMounts"])
        .iter()
        .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(path))
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
}

fn container_accels(c: &Value, res: &str) -> Option<u32> {
    let r = c.get("resources")?;
    let v = r
        .get("limits")
        .and_then(|m| m.get(res))
        .or_else(|| r.get("requests")?.get(res))?;
    crate::read::quantity::parse_count(v).ok()
}

/// Append `name=value` to container `i`'s env, which has no `name` yet.
fn push_env(
    spec: &mut Cursor<'_>,
    i: usize,
    name: &str,
    value: &str,
    why: &str,
    ed: &mut Edit<'_>,
) {
    let cname = container_name(spec.value, i);
    if let Some(mut env) = container(spec, i).and_then(|c| c.array("env", ed.ops)) {
        env.push(json!({"name": name, "value": value}), ed.ops);
        ed.change(
            format!("container {cname}: env {name}={value}"),
            why.to_string(),
        );
    }
}
