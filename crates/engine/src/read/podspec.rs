//! Read-only view of a pod (or pod template): containers, accelerator and EFA
//! requests, labels, annotations, env. Reading never changes the object.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ObjectError;
use crate::read::annotations::{LABEL_HOSTNAME, RES_EFA};
use crate::read::devices::{DRA_EXTENDED_PREFIX, PodDevices};
use crate::read::json::{items, str_at};
use crate::read::quantity::parse_count;
use trainplace_catalog::{Catalog, Counts};

const NODE_TERMS: &str = "spec.affinity.nodeAffinity required terms";
const VOLUMES: &str = "spec.volumes and volumeMounts";

/// One container's accelerator and EFA requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerUse {
    pub index: usize,
    pub name: String,
    /// `(resource name, count)` of the accelerator it asks for, if any.
    pub accelerators: Option<(String, u32)>,
    /// It asks for them by a DRA class's name (`deviceclass.resource.kubernetes.io/
    /// gpu.nvidia.com`), counted as the resource the class stands for.
    pub by_class: bool,
    pub efa: u32,
}

/// What a pod template asks for, read from `{metadata, spec}` at `base` (a field path
/// such as `spec` or `spec.pytorchReplicaSpecs.Worker.template.spec` for messages).
#[derive(Debug, Clone)]
pub struct PodView<'a> {
    pub pod: &'a Value,
    pub base: String,
    /// The app containers (`spec.containers`), which get the layout.
    pub containers: Vec<ContainerUse>,
    /// Init containers: sidecars (`restartPolicy: Always`) run beside the app
    /// containers, plain ones before them.
    init: Vec<(ContainerUse, bool)>,
    /// Some accelerator resource is a slice of a device (MIG, time-slicing, cores).
    pub shared: bool,
    /// DRA claims of the pod (`spec.resourceClaims`).
    pub claims: usize,
    /// What those claims ask for, once resolved ([`PodView::with_devices`]).
    pub devices: PodDevices,
}

/// One container's accelerator and EFA requests; `shared` when its accelerator
/// resource is a slice of a device.
fn read_container(
    c: &Value,
    index: usize,
    at: &str,
    catalog: &Catalog,
) -> Result<(ContainerUse, bool), ObjectError> {
    let name = c
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut accelerators = None;
    let mut shared = false;
    let mut by_class = false;
    let keys = ["limits", "requests"]
        .iter()
        .filter_map(|w| c.get("resources")?.get(*w)?.as_object())
        .flat_map(|m| m.keys());
    // Every accelerator resource counts: a zero request of one name (`amd.com/gpu: 0`)
    // beside another is valid and must not hide the devices the pod really holds.
    for key in keys {
        // A DRA class's devices asked for by the class's name (the scheduler writes the
        // claim): counted as the resource the catalog says the class stands for.
        let class = key
            .strip_prefix(DRA_EXTENDED_PREFIX)
            .and_then(|name| catalog.device_class(name))
            .filter(|d| d.counts == Counts::Accelerator)
            .and_then(|d| Some((d.resource.as_deref()?, d.shared)));
        let resource = match class {
            Some((resource, _)) => resource,
            None => key.as_str(),
        };
        if let Some(r) = catalog.accelerator(resource)
            && let Some(n) = resource_count(c, key, at)?
            && accelerators.as_ref().is_none_or(|(_, m)| n > *m)
        {
            shared = (r.shared || class.is_some_and(|(_, s)| s)) && n > 0;
            by_class = class.is_some();
            accelerators = Some((resource.to_string(), n));
        }
    }
    let efa = resource_count(c, RES_EFA, at)?.unwrap_or(0);
    Ok((
        ContainerUse {
            index,
            name,
            accelerators,
            by_class,
            efa,
        },
        shared,
    ))
}

impl<'a> PodView<'a> {
    pub fn read(pod: &'a Value, base: &str, catalog: &Catalog) -> Result<Self, ObjectError> {
        let spec = pod.get("spec");
        if let Some(spec) = spec
            && !spec.is_object()
        {
            return Err(ObjectError::bad(base, "must be an object"));
        }
        let apps = items(pod, &["spec", "containers"]).len();
        crate::budget::draw_len("spec.containers", apps);
        crate::budget::draw_len(
            "spec.initContainers",
            items(pod, &["spec", "initContainers"]).len(),
        );
        let mut shared = false;
        let mut containers = Vec::with_capacity(apps);
        for (index, c) in items(pod, &["spec", "containers"]).iter().enumerate() {
            let (used, s) =
                read_container(c, index, &format!("{base}.containers[{index}]"), catalog)?;
            shared |= s;
            containers.push(used);
        }
        let mut init = Vec::new();
        for (index, c) in items(pod, &["spec", "initContainers"]).iter().enumerate() {
            let (used, s) = read_container(
                c,
                index,
                &format!("{base}.initContainers[{index}]"),
                catalog,
            )?;
            shared |= s && used.accelerators.is_some();
            let sidecar = c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
            init.push((used, sidecar));
        }
        Ok(PodView {
            pod,
            base: base.to_string(),
            containers,
            init,
            shared,
            claims: items(pod, &["spec", "resourceClaims"]).len(),
            devices: PodDevices::default(),
        })
    }

    /// The same view with its DRA claims resolved.
    pub fn with_devices(&self, devices: PodDevices) -> Self {
        PodView {
            devices,
            ..self.clone()
        }
    }

    /// What the pod holds while it runs, as the scheduler counts it: app containers
    /// and sidecars together, or the largest plain init container if that is more.
    fn effective(&self, per: impl Fn(&ContainerUse) -> u32) -> u32 {
        let running: u32 = self
            .containers
            .iter()
            .chain(
                self.init
                    .iter()
                    .filter(|(_, sidecar)| *sidecar)
                    .map(|(c, _)| c),
            )
            .map(&per)
            .fold(0, u32::saturating_add);
        let init = self
            .init
            .iter()
            .filter(|(_, sidecar)| !*sidecar)
            .map(|(c, _)| per(c))
            .max()
            .unwrap_or(0);
        running.max(init)
    }

    /// Accelerators the pod holds, and the resource name they are asked under: the first
    /// name a container asks for, counted over the containers that ask for it as the
    /// scheduler counts them. Names are never added to each other: 30 NeuronCores and 2
    /// Neuron devices are not 32 of either, and leave room for another pod.
    pub fn accelerators(&self) -> Option<(&str, u32)> {
        let res = self
            .containers
            .iter()
            .chain(self.init.iter().map(|(c, _)| c))
            .find_map(|c| {
                c.accelerators
                    .as_ref()
                    .filter(|(_, n)| *n > 0)
                    .map(|(r, _)| r.as_str())
            })?;
        let n = self.effective(|c| match &c.accelerators {
            Some((r, n)) if r == res => *n,
            _ => 0,
        });
        (n > 0).then_some((res, n))
    }

    pub fn efa(&self) -> u32 {
        self.effective(|c| c.efa)
    }

    /// Containers that get the GPU layout (they ask for accelerators or EFA).
    pub fn device_containers(&self) -> impl Iterator<Item = &ContainerUse> {
        self.containers
            .iter()
            .filter(|c| c.accelerators.as_ref().is_some_and(|(_, n)| *n > 0) || c.efa > 0)
    }

    /// Every container that can run the trainer: app containers and native sidecars
    /// that hold devices, all app containers when none does (devices through DRA
    /// claims, or a plain init container's), and plain init containers that hold
    /// devices (they hold them until they end, and can run a whole training before the
    /// app containers start).
    pub fn trainer_containers(&self) -> impl Iterator<Item = &'a Value> + '_ {
        let holds =
            |c: &ContainerUse| c.accelerators.as_ref().is_some_and(|(_, n)| *n > 0) || c.efa > 0;
        let apps = items(self.pod, &["spec", "containers"]);
        let inits = items(self.pod, &["spec", "initContainers"]);
        let any = self.containers.iter().any(holds)
            || self.init.iter().any(|(c, sidecar)| *sidecar && holds(c));
        let app = self
            .containers
            .iter()
            .filter(move |c| !any || holds(c))
            .filter_map(move |c| apps.get(c.index));
        let init = self
            .init
            .iter()
            .filter(move |(c, _)| holds(c))
            .filter_map(move |(c, _)| inits.get(c.index));
        app.chain(init)
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

    /// The one node the pod can run on: the node it is bound to (`spec.nodeName`), the
    /// one its `kubernetes.io/hostname` node selector names (the kubelet sets that
    /// label to the node's name unless its hostname is overridden), or the one node its
    /// only required node-affinity term names: a `metadata.name` field (what the
    /// DaemonSet controller writes on each of its pods, replacing the template's terms)
    /// or a hostname `In` of one value.
    /// <https://github.com/kubernetes/kubernetes/blob/v1.34.0/pkg/controller/daemon/util/daemonset_util.go>
    pub fn pinned_node(&self) -> Option<&'a str> {
        self.spec_str("nodeName")
            .or_else(|| str_at(self.pod, &["spec", "nodeSelector", LABEL_HOSTNAME]))
            .or_else(|| match required_node_terms(self.pod) {
                [term] => term_node(term),
                _ => None,
            })
    }

    pub fn spec_bool(&self, key: &str) -> Option<bool> {
        self.pod.get("spec")?.get(key)?.as_bool()
    }

    /// The size of the memory-backed volume a container mounts at /dev/shm, if it
    /// mounts one with a sizeLimit.
    pub fn shm_size_limit(&self, container: usize) -> Option<&'a str> {
        let mounts = items(self.container(container)?, &["volumeMounts"]);
        let volumes = items(self.pod, &["spec", "volumes"]);
        if !crate::budget::draw_len(VOLUMES, mounts.len() + volumes.len()) {
            return None;
        }
        let name = mounts
            .iter()
            .find(|m| m.get("mountPath").and_then(Value::as_str) == Some("/dev/shm"))?
            .get("name")?
            .as_str()?;
        let volume = volumes
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))?;
        let dir = volume.get("emptyDir")?;
        (dir.get("medium").and_then(Value::as_str) == Some("Memory"))
            .then(|| dir.get("sizeLimit").and_then(Value::as_str))
            .flatten()
    }

    /// Whether a container mounts anything at /dev/shm (then trainplace adds none).
    pub fn mounts_shm(&self, container: usize) -> bool {
        self.container(container).is_some_and(|c| {
            let mounts = items(c, &["volumeMounts"]);
            crate::budget::draw_len(VOLUMES, mounts.len());
            mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some("/dev/shm"))
        })
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

/// A container's env entry of that name as the kubelet uses it: the last one wins.
pub fn env_entry<'v>(container: &'v Value, name: &str) -> Option<&'v Value> {
    let env = items(container, &["env"]);
    if !crate::budget::draw_len("spec.containers[].env", env.len()) {
        return None;
    }
    env.iter()
        .rev()
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
    let words = || {
        ["command", "args"]
            .iter()
            .flat_map(|k| items(c, &[k]))
            .filter_map(Value::as_str)
    };
    // Sized once: a long command line is copied into its final place, not grown.
    let mut line = String::with_capacity(words().map(|w| w.len() + 1).sum());
    for w in words() {
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    line
}

/// The one node a node-selector term names, by field or hostname label.
fn term_node(term: &Value) -> Option<&str> {
    let one = |list: &str, key: &str| {
        let exprs = items(term, &[list]);
        if !crate::budget::draw_len(NODE_TERMS, exprs.len()) {
            return None;
        }
        exprs.iter().find_map(|e| {
            let values = items(e, &["values"]);
            (e.get("key").and_then(Value::as_str) == Some(key)
                && e.get("operator").and_then(Value::as_str) == Some("In")
                && values.len() == 1)
                .then(|| values[0].as_str())
                .flatten()
        })
    };
    one("matchFields", "metadata.name").or_else(|| one("matchExpressions", LABEL_HOSTNAME))
}

/// The pod's required node selector terms (ORed).
pub(crate) fn required_node_terms(pod: &Value) -> &[Value] {
    items(
        pod,
        &[
            "spec",
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        ],
    )
}
