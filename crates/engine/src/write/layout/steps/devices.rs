//! Devices and memory: EFA interfaces, host IPC, IPC_LOCK for pinned memory, and a
//! memory-backed /dev/shm.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::spec::{container, container_name};
use crate::read::annotations::RES_EFA;
use crate::read::json::items;
use crate::write::edit::Cursor;
use crate::write::layout::{Edit, Plan, SHM_VOLUME};

impl Plan<'_> {
    pub(in crate::write::layout) fn efa(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
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

    pub(in crate::write::layout) fn host_ipc(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
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

    pub(in crate::write::layout) fn ipc_lock(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
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

    pub(in crate::write::layout) fn shm(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
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
    pub(in crate::write::layout) fn shm_volume(
        &self,
        spec: &mut Cursor<'_>,
        ed: &mut Edit<'_>,
    ) -> String {
        if let Some(name) = items(spec.value, &["containers"])
            .iter()
            .find_map(|c| mount_at(c, "/dev/shm"))
        {
            return name.to_string();
        }
        // The names taken, read once: a pod that already has `trainplace-shm`,
        // `trainplace-shm-1`, ... costs one look per name, not one per name per name.
        let name = {
            let volumes = items(spec.value, &["volumes"]);
            let taken: HashSet<&str> = if crate::budget::draw_len(VOLUMES, volumes.len()) {
                volumes
                    .iter()
                    .filter_map(|v| v.get("name").and_then(Value::as_str))
                    .collect()
            } else {
                HashSet::new()
            };
            let mut name = SHM_VOLUME.to_string();
            let mut k = 1;
            while taken.contains(name.as_str()) {
                name = format!("{SHM_VOLUME}-{k}");
                k += 1;
            }
            name
        };
        if let Some(mut vols) = spec.reborrow().array("volumes", ed.ops) {
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
}

const VOLUMES: &str = "spec.volumes and volumeMounts";

fn mount_at<'v>(c: &'v Value, path: &str) -> Option<&'v str> {
    let mounts = items(c, &["volumeMounts"]);
    if !crate::budget::draw_len(VOLUMES, mounts.len()) {
        return None;
    }
    mounts
        .iter()
        .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(path))
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
}
