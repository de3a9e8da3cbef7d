//! An inventory read from `kubectl get nodes/pods/namespaces -o json` output files,
//! for the offline CLI, `trainplace audit --from`, and tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde_json::Value;
use thiserror::Error;
use trainplace_engine::{Reservations, Snapshot};

use super::{InventorySource, Status};

#[derive(Debug, Error)]
pub enum FilesError {
    #[error("{path}: cannot read: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: not a kubectl -o json List: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{dir}: no nodes.json; write it with `kubectl get nodes -o json > {dir}/nodes.json`")]
    NoNodes { dir: PathBuf },
}

fn read_list(path: &Path, required: bool) -> Result<Value, FilesError> {
    if !required && !path.exists() {
        return Ok(serde_json::json!({"items": []}));
    }
    let text = std::fs::read_to_string(path).map_err(|e| FilesError::Read {
        path: path.into(),
        message: e.to_string(),
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| FilesError::Parse {
        path: path.into(),
        message: e.to_string(),
    })?;
    if !v.get("items").is_some_and(Value::is_array) {
        return Err(FilesError::Parse {
            path: path.into(),
            message: "no items array".into(),
        });
    }
    Ok(v)
}

/// DRA objects pods' `resourceClaims` are counted through: `kubectl get
/// resourceclaimtemplates,resourceclaims -A -o json` and `kubectl get computedomains -A -o json`.
const DRA_FILES: [&str; 3] = [
    "resourceclaimtemplates.json",
    "resourceclaims.json",
    "computedomains.json",
];

/// Load `nodes.json` (required), `pods.json`, `namespaces.json`, `pytorchjobs.json` and
/// `paddlejobs.json` (what their `/scale` reviews are judged against), `jobs.json` and
/// `statefulsets.json` (the size of a marked pod's owner), `ec2nodeclasses.json`
/// (Karpenter's Capacity Blocks in `status.capacityReservations`), `trainingruntimes.json` /
/// `clustertrainingruntimes.json` (the runtimes TrainJobs inherit their pod template
/// from), `topologies.json` (`kubectl get topologies.kueue.x-k8s.io -o json`: Kueue's
/// Topologies) and the `DRA_FILES` from `dir`; all but nodes optional.
pub fn load_dir(dir: &Path) -> Result<Snapshot, FilesError> {
    let nodes_path = dir.join("nodes.json");
    if !nodes_path.exists() {
        return Err(FilesError::NoNodes { dir: dir.into() });
    }
    let nodes = read_list(&nodes_path, true)?;
    let pods = read_list(&dir.join("pods.json"), false)?;
    let namespaces = read_list(&dir.join("namespaces.json"), false)?;
    let mut snap = Snapshot::from_lists(&nodes, &pods, &namespaces);
    for file in ["pytorchjobs.json", "paddlejobs.json"] {
        let jobs = read_list(&dir.join(file), false)?;
        snap.add_scalable(jobs["items"].as_array().into_iter().flatten());
        snap.add_owners(jobs["items"].as_array().into_iter().flatten());
    }
    for file in ["jobs.json", "statefulsets.json"] {
        let owners = read_list(&dir.join(file), false)?;
        snap.add_owners(owners["items"].as_array().into_iter().flatten());
    }
    let classes = read_list(&dir.join("ec2nodeclasses.json"), false)?;
    snap.reservations_mut().add_ec2nodeclasses(&classes);
    for file in DRA_FILES {
        let list = read_list(&dir.join(file), false)?;
        snap.add_claims(list["items"].as_array().into_iter().flatten());
    }
    for file in ["trainingruntimes.json", "clustertrainingruntimes.json"] {
        let runtimes = read_list(&dir.join(file), false)?;
        snap.add_runtimes(runtimes["items"].as_array().into_iter().flatten());
    }
    let topologies = read_list(&dir.join("topologies.json"), false)?;
    snap.add_topologies(topologies["items"].as_array().into_iter().flatten());
    Ok(snap)
}

/// A snapshot loaded once from files, with the describe-capacity-reservations blocks
/// laid over it (replaced when that file is reloaded).
pub struct StaticInventory {
    base: Arc<Snapshot>,
    current: ArcSwap<Snapshot>,
}

impl StaticInventory {
    pub fn new(snapshot: Snapshot) -> Self {
        let base = Arc::new(snapshot);
        StaticInventory {
            current: ArcSwap::new(base.clone()),
            base,
        }
    }
}

impl InventorySource for StaticInventory {
    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        Some(self.current.load_full())
    }
    fn status(&self) -> Status {
        Status::Static {
            gpu_types: self.base.types.len(),
        }
    }
    fn set_described(&self, reservations: Arc<Reservations>) -> bool {
        let mut snap = (*self.base).clone();
        snap.reservations_mut().extend(&reservations);
        self.current.store(Arc::new(snap));
        true
    }
}
