//! The recommended layout, written into a pod template: only what is missing, never
//! overwriting a value the user set, appending after the user's list entries so every
//! existing entry keeps its position. Each change is recorded with its reason.

use serde_json::{Value, json};

use crate::annotations::{
    LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_ZONE, NCCL_DEBUG, RES_EFA, RES_NVIDIA_GPU, SHM_SIZE,
};
use crate::catalog::InstanceProfile;
use crate::classify::{InstanceSource, Shape};
use crate::json::{array_at, items, object_at, object_path};
use crate::podspec::{PodView, env_entry};
use crate::policy::{Effective, Mutations};

/// One change, as written into the `trainplace.io/mutated` annotation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    pub what: String,
    pub why: String,
}

const SHM_VOLUME: &str = "trainplace-shm";

/// Everything the layout needs, read before any edit.
pub struct Plan<'a> {
    pub shape: &'a Shape<'a>,
    pub instance: &'a InstanceProfile,
    pub source: InstanceSource,
    pub eff: &'a Effective<'a>,
    /// Indices of the containers that get the GPU layout.
    pub containers: Vec<usize>,
    /// /dev/shm size (annotation, policy, instance default), already validated.
    pub shm_size: String,
    /// NCCL_DEBUG level from the annotation.
    pub nccl_debug: Option<String>,
}

impl<'a> Plan<'a> {
    pub fn new(
        view: &PodView<'_>,
        shape: &'a Shape<'a>,
        instance: &'a InstanceProfile,
        source: InstanceSource,
        eff: &'a Effective<'a>,
        shm_size: String,
    ) -> Self {
        Plan {
            shape,
            instance,
            source,
            eff,
            containers: view.device_containers().map(|c| c.index).collect(),
            shm_size,
            nccl_debug: view.annotation(NCCL_DEBUG).map(String::from),
        }
    }

    fn on(&self, pick: impl Fn(&Mutations) -> Option<bool>) -> bool {
        self.eff.on(pick)
    }

    fn whole_node(&self) -> bool {
        self.shape.per_pod == self.instance.accelerators
    }

    /// Apply the layout to `pod` (`{metadata, spec}`), returning what changed.
    pub fn apply(&self, pod: &mut Value) -> Vec<Change> {
        let mut out = Vec::new();
        if self.on(|m| m.efa) {
            self.efa(pod, &mut out);
        }
        if self.on(|m| m.host_ipc) {
            self.host_ipc(pod, &mut out);
        }
        if self.on(|m| m.ipc_lock) {
            self.ipc_lock(pod, &mut out);
        }
        if self.on(|m| m.shm) {
            self.shm(pod, &mut out);
        }
        if self.on(|m| m.nccl_env) {
            self.nccl_env(pod, &mut out);
        }
        if self.on(|m| m.torchrun_env) {
            self.torchrun_env(pod, &mut out);
        }
        if self.on(|m| m.tolerations) {
            self.tolerations(pod, &mut out);
        }
        if self.on(|m| m.pin_instance_type) {
            self.pin_instance(pod, &mut out);
        }
        if self.on(|m| m.zone_affinity) {
            self.zone_affinity(pod, &mut out);
        }
        if self.on(|m| m.node_anti_affinity) {
            self.anti_affinity(pod, &mut out);
        }
        out
    }

    fn efa(&self, pod: &mut Value, out: &mut Vec<Change>) {
        if !self.whole_node() || self.shape.efa > 0 || !self.instance.has_efa() {
            return;
        }
        let Some(&first) = self.containers.first() else {
            return;
        };
        let Some(c) = container_mut(pod, first) else {
            return;
        };
        let n = self.instance.max_efa;
        let has_requests = c
            .get("resources")
            .and_then(|r| r.get("requests"))
            .is_some_and(Value::is_object);
        for which in ["limits", "requests"] {
            if which == "requests" && !has_requests {
                continue;
            }
            if let Some(map) = object_path(c, &["resources", which]).and_then(Value::as_object_mut)
            {
                map.insert(RES_EFA.to_string(), json!(n));
            }
        }
        out.push(Change {
            what: format!("container {}: {RES_EFA}={n}", self.name(pod, first)),
            why: format!(
                "the pod takes the whole {}, so it gets all {n} EFA interfaces for inter-node traffic",
                self.instance.name
            ),
        });
    }

    fn host_ipc(&self, pod: &mut Value, out: &mut Vec<Change>) {
        let Some(spec) = object_at(pod, "spec") else {
            return;
        };
        if spec.contains_key("hostIPC") {
            return;
        }
        spec.insert("hostIPC".into(), Value::Bool(true));
        out.push(Change {
            what: "hostIPC=true".into(),
            why: "NCCL and the EFA plugin share memory between local ranks over host IPC".into(),
        });
    }

    fn ipc_lock(&self, pod: &mut Value, out: &mut Vec<Change>) {
        for &i in &self.containers {
            let name = self.name(pod, i);
            let Some(c) = container_mut(pod, i) else {
                continue;
            };
            let Some(caps) = object_path(c, &["securityContext", "capabilities"]) else {
                continue;
            };
            let Some(add) = array_at(caps, "add") else {
                continue;
            };
            if add.iter().any(|v| v.as_str() == Some("IPC_LOCK")) {
                continue;
            }
            add.push(json!("IPC_LOCK"));
            out.push(Change {
                what: format!("container {name}: capability IPC_LOCK"),
                why: "EFA/RDMA pins memory; without IPC_LOCK registration fails".into(),
            });
        }
    }

    fn shm(&self, pod: &mut Value, out: &mut Vec<Change>) {
        let needs: Vec<usize> = self
            .containers
            .iter()
            .copied()
            .filter(|&i| {
                !items(pod, &["spec", "containers"])
                    .get(i)
                    .is_some_and(|c| mount_at(c, "/dev/shm").is_some())
            })
            .collect();
        if needs.is_empty() {
            return;
        }
        let volume = self.shm_volume(pod, out);
        for i in needs {
            let name = self.name(pod, i);
            let Some(c) = container_mut(pod, i) else {
                continue;
            };
            if let Some(mounts) = array_at(c, "volumeMounts") {
                mounts.push(json!({"name": volume, "mountPath": "/dev/shm"}));
                out.push(Change {
                    what: format!("container {name}: /dev/shm from volume {volume}"),
                    why: "NCCL's shared-memory transport and data loaders need a large /dev/shm (the default is 64Mi)".into(),
                });
            }
        }
    }

    /// The memory-backed volume other containers already mount at /dev/shm, or a new one.
    fn shm_volume(&self, pod: &mut Value, out: &mut Vec<Change>) -> String {
        let existing = items(pod, &["spec", "containers"])
            .iter()
            .find_map(|c| mount_at(c, "/dev/shm"))
            .map(String::from);
        if let Some(name) = existing {
            return name;
        }
        let taken = |n: &str| {
            items(pod, &["spec", "volumes"])
                .iter()
                .any(|v| v.get("name").and_then(Value::as_str) == Some(n))
        };
        let mut name = SHM_VOLUME.to_string();
        let mut k = 1;
        while taken(&name) {
            name = format!("{SHM_VOLUME}-{k}");
            k += 1;
        }
        if let Some(spec) = pod.get_mut("spec")
            && let Some(vols) = array_at(spec, "volumes")
        {
            vols.push(json!({
                "name": name,
                "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size},
            }));
            out.push(Change {
                what: format!(
                    "volume {name}: emptyDir medium=Memory sizeLimit={}",
                    self.shm_size
                ),
                why: format!("memory-backed /dev/shm sized for {}", self.instance.name),
            });
        }
        name
    }

    fn nccl_env(&self, pod: &mut Value, out: &mut Vec<Change>) {
        let mut wanted: Vec<(String, String, String)> = Vec::new();
        if self.shape.accel_resource == RES_NVIDIA_GPU || self.shape.accel_resource.is_empty() {
            let efa = self.shape.efa > 0 || (self.whole_node() && self.instance.has_efa());
            let catalog = &self.eff.policy.catalog;
            for rule in catalog.nccl_env(self.instance, &self.eff.plugin_version, efa) {
                wanted.push((rule.name.clone(), rule.value.clone(), rule.source.clone()));
            }
        }
        if let Some(level) = &self.nccl_debug {
            wanted.push((
                "NCCL_DEBUG".into(),
                level.clone(),
                format!("annotation {NCCL_DEBUG}"),
            ));
            wanted.push((
                "NCCL_DEBUG_SUBSYS".into(),
                "INIT,GRAPH,ENV,NET".into(),
                format!("annotation {NCCL_DEBUG}: the subsystems that show transports and env"),
            ));
        }
        for &i in &self.containers {
            for (name, value, why) in &wanted {
                self.add_env(pod, i, name, value, why, out);
            }
        }
    }

    fn torchrun_env(&self, pod: &mut Value, out: &mut Vec<Change>) {
        for &i in &self.containers {
            let c = &items(pod, &["spec", "containers"])[i];
            let uses_pet = items(c, &["env"]).iter().any(|e| {
                e.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.starts_with("PET_"))
            });
            let view_cmd = command_line(c);
            let cmd_sets =
                view_cmd.contains("--nproc_per_node") || view_cmd.contains("--nproc-per-node");
            if !uses_pet || cmd_sets || env_entry(c, "PET_NPROC_PER_NODE").is_some() {
                continue;
            }
            let n = container_accels(c, &self.shape.accel_resource).unwrap_or(self.shape.per_pod);
            self.add_env(
                pod,
                i,
                "PET_NPROC_PER_NODE",
                &n.to_string(),
                "torchrun starts one process per GPU in the pod",
                out,
            );
        }
    }

    fn add_env(
        &self,
        pod: &mut Value,
        i: usize,
        name: &str,
        value: &str,
        why: &str,
        out: &mut Vec<Change>,
    ) {
        let cname = self.name(pod, i);
        let Some(c) = container_mut(pod, i) else {
            return;
        };
        if env_entry(c, name).is_some() {
            return;
        }
        if let Some(env) = array_at(c, "env") {
            env.push(json!({"name": name, "value": value}));
            out.push(Change {
                what: format!("container {cname}: env {name}={value}"),
                why: why.to_string(),
            });
        }
    }

    fn tolerations(&self, pod: &mut Value, out: &mut Vec<Change>) {
        let mut keys = Vec::new();
        if !self.shape.accel_resource.is_empty() {
            keys.push(self.shape.accel_resource.clone());
        }
        if self.shape.efa > 0
            || (self.whole_node() && self.instance.has_efa() && self.on(|m| m.efa))
        {
            keys.push(RES_EFA.to_string());
        }
        let Some(spec) = pod.get_mut("spec") else {
            return;
        };
        let Some(tols) = array_at(spec, "tolerations") else {
            return;
        };
        for key in keys {
            let covered = tols.iter().any(|t| {
                let tkey = t.get("key").and_then(Value::as_str);
                tkey == Some(key.as_str())
                    || (tkey.is_none_or(str::is_empty)
                        && t.get("operator").and_then(Value::as_str) == Some("Exists"))
            });
            if covered {
                continue;
            }
            tols.push(json!({"key": key, "operator": "Exists", "effect": "NoSchedule"}));
            out.push(Change {
                what: format!("toleration {key}:NoSchedule"),
                why: "GPU and EFA node groups are tainted so only device pods land there".into(),
            });
        }
    }

    fn pin_instance(&self, pod: &mut Value, out: &mut Vec<Change>) {
        if matches!(
            self.source,
            InstanceSource::NodeSelector | InstanceSource::NodeAffinity
        ) {
            return;
        }
        let Some(sel) = object_path(pod, &["spec", "nodeSelector"]).and_then(Value::as_object_mut)
        else {
            return;
        };
        if sel.contains_key(LABEL_INSTANCE_TYPE) {
            return;
        }
        sel.insert(LABEL_INSTANCE_TYPE.into(), json!(self.instance.name));
        out.push(Change {
            what: format!("nodeSelector {LABEL_INSTANCE_TYPE}={}", self.instance.name),
            why: format!("instance type from {}", self.source.describe()),
        });
    }

    fn zone_affinity(&self, pod: &mut Value, out: &mut Vec<Change>) {
        let z = &self.shape.zones;
        if !self.shape.multi_pod
            || z.pinned.is_some()
            || z.held
            || z.allows_many.is_some()
            || z.spread
        {
            return;
        }
        let Some((key, value)) = &self.shape.identity else {
            return;
        };
        let term = json!({
            "labelSelector": {"matchLabels": {key: value}},
            "topologyKey": LABEL_ZONE,
        });
        if push_required(pod, "podAffinity", term) {
            out.push(Change {
                what: format!("podAffinity: pods with {key}={value} in one {LABEL_ZONE}"),
                why: "EFA traffic cannot cross availability zones".into(),
            });
        }
    }

    fn anti_affinity(&self, pod: &mut Value, out: &mut Vec<Change>) {
        if !self.shape.multi_pod || !self.whole_node() {
            return;
        }
        let Some((key, value)) = &self.shape.identity else {
            return;
        };
        let exists = items(
            pod,
            &[
                "spec",
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
        let term = json!({
            "labelSelector": {"matchLabels": {key: value}},
            "topologyKey": LABEL_HOSTNAME,
        });
        if push_required(pod, "podAntiAffinity", term) {
            out.push(Change {
                what: format!("podAntiAffinity: one pod with {key}={value} per node"),
                why: "one pod per node keeps every GPU of a node on NVLink inside one pod".into(),
            });
        }
    }

    fn name(&self, pod: &Value, i: usize) -> String {
        items(pod, &["spec", "containers"])
            .get(i)
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    }
}

fn push_required(pod: &mut Value, kind: &str, term: Value) -> bool {
    let Some(aff) = object_path(pod, &["spec", "affinity", kind]) else {
        return false;
    };
    match array_at(aff, "requiredDuringSchedulingIgnoredDuringExecution") {
        Some(terms) => {
            terms.push(term);
            true
        }
        None => false,
    }
}

fn container_mut(pod: &mut Value, i: usize) -> Option<&mut Value> {
    pod.get_mut("spec")?.get_mut("containers")?.get_mut(i)
}

fn mount_at<'v>(c: &'v Value, path: &str) -> Option<&'v str> {
    items(c, &["volumeMounts"])
        .iter()
        .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(path))
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
}

fn command_line(c: &Value) -> String {
    ["command", "args"]
        .iter()
        .flat_map(|k| items(c, &[k]))
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

fn container_accels(c: &Value, res: &str) -> Option<u32> {
    let r = c.get("resources")?;
    let v = r
        .get("limits")
        .and_then(|m| m.get(res))
        .or_else(|| r.get("requests")?.get(res))?;
    crate::quantity::parse_count(v).ok()
}

/// The /dev/shm size for a pod: annotation, else policy, else the instance default.
pub fn shm_size(
    view: &PodView<'_>,
    eff: &Effective<'_>,
    instance: &InstanceProfile,
) -> Result<String, String> {
    if let Some(v) = view.annotation(SHM_SIZE) {
        crate::quantity::parse_bytes(v)?;
        return Ok(v.to_string());
    }
    Ok(eff
        .defaults
        .shm_size
        .clone()
        .unwrap_or_else(|| instance.shm_default.clone()))
}
