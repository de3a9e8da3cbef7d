//! Optional cluster inventory: what nodes already exist (type, zone, allocatable GPU and
//! EFA, nodegroup / nodepool / reservation). Read behind [`NodeSource`] so it can come
//! from `kubectl get nodes -o json` (implemented here) or, later, the Kubernetes API.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use trainplace_engine::annotations::{
    LABEL_INSTANCE_TYPE, LABEL_RESERVATION_ID, LABEL_ZONE, RES_EFA, RES_NEURON, RES_NVIDIA_GPU,
};

use crate::error::{InputError, InputSource};

/// One node as the advisor sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    pub name: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub gpus: u32,
    pub efa: u32,
    /// `eks.amazonaws.com/nodegroup` or `karpenter.sh/nodepool`.
    pub group: Option<String>,
    pub capacity_reservation: Option<String>,
}

/// Where nodes come from.
pub trait NodeSource {
    fn nodes(&self) -> Result<Vec<NodeInfo>, InputError>;
}

/// `kubectl get nodes -o json` output held in memory.
pub struct KubectlNodesJson(pub String);

impl NodeSource for KubectlNodesJson {
    fn nodes(&self) -> Result<Vec<NodeInfo>, InputError> {
        let doc: Value = serde_json::from_str(&self.0)
            .map_err(|e| InputError::new(InputSource::Nodes, "$", format!("not JSON: {e}")))?;
        let Some(Value::Array(items)) = doc.get("items") else {
            return Err(InputError::new(
                InputSource::Nodes,
                "items",
                "missing (expected `kubectl get nodes -o json`)",
            ));
        };
        items.iter().enumerate().map(|(i, v)| node(i, v)).collect()
    }
}

fn node(i: usize, v: &Value) -> Result<NodeInfo, InputError> {
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            InputError::new(
                InputSource::Nodes,
                format!("items[{i}].metadata.name"),
                "missing",
            )
        })?;
    let label = |key: &str| {
        v.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let alloc = |key: &str| -> Result<u32, InputError> {
        match v.pointer("/status/allocatable").and_then(|a| a.get(key)) {
            None => Ok(0),
            Some(Value::String(s)) => s.parse().map_err(|_| {
                InputError::new(
                    InputSource::Nodes,
                    format!("items[{i}].status.allocatable.{key}"),
                    format!("{s:?} is not a count"),
                )
            }),
            Some(_) => Err(InputError::new(
                InputSource::Nodes,
                format!("items[{i}].status.allocatable.{key}"),
                "must be a string quantity",
            )),
        }
    };
    Ok(NodeInfo {
        name: name.to_string(),
        instance_type: label(LABEL_INSTANCE_TYPE),
        zone: label(LABEL_ZONE),
        gpus: alloc(RES_NVIDIA_GPU)?.max(alloc(RES_NEURON)?),
        efa: alloc(RES_EFA)?,
        group: label("eks.amazonaws.com/nodegroup").or_else(|| label("karpenter.sh/nodepool")),
        capacity_reservation: label(LABEL_RESERVATION_ID),
    })
}

/// Existing nodes of one instance type, per zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneCount {
    pub zone: String,
    pub nodes: u32,
    pub groups: Vec<String>,
}

/// Zones that already hold `instance_type` nodes, most nodes first.
pub fn zones_with(nodes: &[NodeInfo], instance_type: &str) -> Vec<ZoneCount> {
    let mut by_zone: BTreeMap<String, ZoneCount> = BTreeMap::new();
    for n in nodes
        .iter()
        .filter(|n| n.instance_type.as_deref() == Some(instance_type))
    {
        let zone = n.zone.clone().unwrap_or_default();
        let entry = by_zone.entry(zone.clone()).or_insert(ZoneCount {
            zone,
            nodes: 0,
            groups: Vec::new(),
        });
        entry.nodes += 1;
        if let Some(g) = &n.group
            && !entry.groups.contains(g)
        {
            entry.groups.push(g.clone());
        }
    }
    let mut out: Vec<ZoneCount> = by_zone.into_values().collect();
    out.sort_by(|a, b| b.nodes.cmp(&a.nodes).then(a.zone.cmp(&b.zone)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_nodes_summarise_by_zone() {
        let src = KubectlNodesJson(include_str!("../fixtures/nodes.json").to_string());
        let nodes = src.nodes().unwrap();
        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[0].gpus, 8);
        assert_eq!(nodes[0].efa, 32);
        assert_eq!(
            nodes[0].capacity_reservation.as_deref(),
            Some("cr-0123456789abcdef0")
        );
        let zones = zones_with(&nodes, "p5.48xlarge");
        assert_eq!(
            zones,
            vec![ZoneCount {
                zone: "us-east-1a".into(),
                nodes: 2,
                groups: vec!["gpu-p5".into()]
            }]
        );
        assert_eq!(nodes[2].group.as_deref(), Some("l40s"));
    }

    #[test]
    fn bad_quantity_is_named() {
        let text = r#"{"items":[{"metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"eight"}}}]}"#;
        let err = KubectlNodesJson(text.into()).nodes().unwrap_err();
        assert_eq!(err.field, "items[0].status.allocatable.nvidia.com/gpu");
    }
}
