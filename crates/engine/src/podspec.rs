//! Read-only view of a pod (or pod template): containers, accelerator and EFA
//! requests, labels, annotations, env. Reading never changes the object.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::annotations::{ACCELERATOR_RESOURCES, RES_EFA};
use crate::error::ObjectError;
use crate::json::{items, str_at};
use crate::quantity::parse_count;

/// One container's accelerator and EFA requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerUse {
    pub index: usize,
    pub name: String,
    /// `(resource name, count)` of the accelerator it asks for, if any.
    pub accelerators: Option<(String, u32)>,
    pub efa: u32,
}

/// What a pod template asks for, read from `{metadata, spec}` at `base` (a field path
/// such as `spec` or `spec.pytorchReplicaSpecs.Worker.template.spec` for messages).
#[derive(Debug, Clone)]
pub struct PodView<'a> {
    pub pod: &'a Value,
    pub base: String,
    pub containers: Vec<ContainerUse>,
}

impl<'a> PodView<'a> {
    pub fn read(pod: &'a Value, base: &str) -> Result<Self, ObjectError> {
        let spec = pod.get("spec");
        if let Some(spec) = spec
            && !spec.is_object()
        {
            return Err(ObjectError::bad(base, "must be an object"));
        }
        let mut containers = Vec::new();
        for (index, c) in items(pod, &["spec", "containers"]).iter().enumerate() {
            let at = format!("{base}.containers[{index}]");
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut accelerators = None;
            for res in ACCELERATOR_RESOURCES {
                if let Some(n) = resource_count(c, res, &at)? {
                    accelerators = Some((res.to_string(), n));
                    break;
                }
            }
            let efa = resource_count(c, RES_EFA, &at)?.unwrap_or(0);
            containers.push(ContainerUse {
                index,
                name,
                accelerators,
                efa,
            });
        }
        Ok(PodView {
            pod,
            base: base.to_string(),
            containers,
        })
    }

    /// Total accelerators the pod asks for, and their resource name.
    pub fn accelerators(&self) -> Option<(&str, u32)> {
        let mut found: Option<(&str, u32)> = None;
        for c in &self.containers {
            if let Some((res, n)) = &c.accelerators {
                let total = found.map_or(0, |(_, t)| t) + n;
                found = Some((res.as_str(), total));
            }
        }
        found.filter(|(_, n)| *n > 0)
    }

    pub fn efa(&self) -> u32 {
        self.containers.iter().map(|c| c.efa).sum()
    }

    /// Containers that get the GPU layout (they ask for accelerators or EFA).
    pub fn device_containers(&self) -> impl Iterator<Item = &ContainerUse> {
        self.containers
            .iter()
            .filter(|c| c.accelerators.as_ref().is_some_and(|(_, n)| *n > 0) || c.efa > 0)
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.pod, &["metadata", "labels"])
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.pod
            .get("metadata")?
            .get("annotations")?
            .get(key)?
            .as_str()
    }

    pub fn spec_str(&self, key: &str) -> Option<&'a str> {
        str_at(self.pod, &["spec", key])
    }

    pub fn spec_bool(&self, key: &str) -> Option<bool> {
        self.pod.get("spec")?.get(key)?.as_bool()
    }

    /// The literal value of an env var in a container, if set with `value`.
    pub fn env(&self, container: usize, name: &str) -> Option<&'a str> {
        env_entry(self.container(container)?, name)?
            .get("value")
            .and_then(Value::as_str)
    }

    /// The size of the memory-backed volume a container mounts at /dev/shm, if it
    /// mounts one with a sizeLimit.
    pub fn shm_size_limit(&self, container: usize) -> Option<&'a str> {
        let name = items(self.container(container)?, &["volumeMounts"])
            .iter()
            .find(|m| m.get("mountPath").and_then(Value::as_str) == Some("/dev/shm"))?
            .get("name")?
            .as_str()?;
        let volume = items(self.pod, &["spec", "volumes"])
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))?;
        let dir = volume.get("emptyDir")?;
        (dir.get("medium").and_then(Value::as_str) == Some("Memory"))
            .then(|| dir.get("sizeLimit").and_then(Value::as_str))
            .flatten()
    }

    /// A container's memory limit as written, if any.
    pub fn memory_limit(&self, container: usize) -> Option<&'a str> {
        str_at(
            self.container(container)?,
            &["resources", "limits", "memory"],
        )
    }

    pub fn container(&self, index: usize) -> Option<&'a Value> {
        items(self.pod, &["spec", "containers"]).get(index)
    }
}

pub fn env_entry<'v>(container: &'v Value, name: &str) -> Option<&'v Value> {
    items(container, &["env"])
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

fn string_map(v: &Value, keys: &[&str]) -> BTreeMap<String, String> {
    let mut cur = v;
    for k in keys {
        match cur.get(*k) {
            Some(next) => cur = next,
            None => return BTreeMap::new(),
        }
    }
    cur.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A container's count of `res`: limits win (extended resources require them);
/// requests alone are read too. A mismatch between the two is an error.
fn resource_count(c: &Value, res: &str, at: &str) -> Result<Option<u32>, ObjectError> {
    let read = |which: &str| -> Result<Option<u32>, ObjectError> {
        match c
            .get("resources")
            .and_then(|r| r.get(which))
            .and_then(|m| m.get(res))
        {
            None => Ok(None),
            Some(v) => parse_count(v)
                .map(Some)
                .map_err(|e| ObjectError::bad(format!("{at}.resources.{which}[{res}]"), e)),
        }
    };
    let limit = read("limits")?;
    let request = read("requests")?;
    match (limit, request) {
        (Some(l), Some(r)) if l != r => Err(ObjectError::bad(
            format!("{at}.resources"),
            format!(
                "requests[{res}]={r} but limits[{res}]={l}; device resources need requests equal to limits"
            ),
        )),
        (Some(n), _) | (None, Some(n)) => Ok(Some(n)),
        (None, None) => Ok(None),
    }
}

/// Command and args of a container joined by spaces.
pub fn command_line(c: &Value) -> String {
    ["command", "args"]
        .iter()
        .flat_map(|k| items(c, &[k]))
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}
