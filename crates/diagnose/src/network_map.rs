//! Which EC2 network nodes each host sits under, from what the user gives: a topology
//! file and, when the log names pods rather than nodes, which node each pod ran on. A
//! leaf: the network rules read it.
//!
//! A node set is top-down, layer 1 (the broadest) first, the bottom node last
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>).
//! The topology file is one of:
//!
//! - `aws ec2 describe-instance-topology --output json` (one document or several, as
//!   `aws-cli.sh` saves them), keyed by instance id;
//! - `kubectl get nodes -o json`, from the nodes' EKS labels
//!   `topology.k8s.aws/network-node-layer-1` to `-4`
//!   (<https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html>), keyed
//!   by node name and by the instance id in `spec.providerID`;
//! - `kubectl get nodes -L topology.k8s.aws/network-node-layer-1,...-2,...-3`, whose label
//!   columns kubectl heads with the key's last segment in upper case
//!   (`NETWORK-NODE-LAYER-1`), keyed by node name.
//!
//! The pods file is `kubectl get pods -o wide` (its `NAME` and `NODE` columns) or
//! `kubectl get pods -o json` (`spec.nodeName`).

use std::collections::BTreeMap;

use serde_json::Value;

/// The EKS label of network layer N is this prefix and N.
pub const NETWORK_LABEL_PREFIX: &str = "topology.k8s.aws/network-node-layer-";

/// The header kubectl gives the label of layer N in `-L` output is this and N.
const NETWORK_COLUMN_PREFIX: &str = "NETWORK-NODE-LAYER-";

/// Layers EKS labels: 1 to 4.
const MAX_LAYERS: usize = 4;

/// Network nodes by host, and pods by node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkMap {
    /// Node name or instance id -> its network nodes, layer 1 first.
    nodes: BTreeMap<String, Vec<String>>,
    /// Pod name -> the node it ran on.
    pods: BTreeMap<String, String>,
}

/// Why a topology or pods file could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NetworkMapError {
    #[error(
        "{what}: no network nodes found; expected `aws ec2 describe-instance-topology --output json`, `kubectl get nodes -o json` or `kubectl get nodes -L {NETWORK_LABEL_PREFIX}1,...` output"
    )]
    NoTopology { what: String },
    #[error(
        "{what}: no pods found; expected `kubectl get pods -o wide` or `kubectl get pods -o json` output"
    )]
    NoPods { what: String },
}

impl NetworkMap {
    /// The topology file `text` (named `what` in errors).
    pub fn parse_topology(text: &str, what: &str) -> Result<Self, NetworkMapError> {
        let mut map = Self::default();
        match json_documents(text) {
            Some(docs) => docs.iter().for_each(|doc| map.add_json(doc)),
            None => map.add_label_columns(text),
        }
        if map.nodes.is_empty() {
            return Err(NetworkMapError::NoTopology { what: what.into() });
        }
        Ok(map)
    }

    /// Adds the pods file `text`: which node each pod ran on.
    pub fn add_pods(&mut self, text: &str, what: &str) -> Result<(), NetworkMapError> {
        let before = self.pods.len();
        match json_documents(text) {
            Some(docs) => {
                for item in docs.iter().flat_map(items) {
                    if let (Some(pod), Some(node)) = (
                        item["metadata"]["name"].as_str(),
                        item["spec"]["nodeName"].as_str(),
                    ) {
                        self.pods.insert(pod.into(), node.into());
                    }
                }
            }
            None => {
                for row in table(text) {
                    if let (Some(pod), Some(node)) = (row.get("NAME"), row.get("NODE"))
                        && !node.is_empty()
                        && node != "<none>"
                    {
                        self.pods.insert(pod.clone(), node.clone());
                    }
                }
            }
        }
        if self.pods.len() == before {
            return Err(NetworkMapError::NoPods { what: what.into() });
        }
        Ok(())
    }

    /// `host`'s network nodes (layer 1 first) and the name it was found under: the host
    /// itself, or the node its pod ran on; a name matches exactly or by its first DNS
    /// label (`ip-10-0-1-2` is `ip-10-0-1-2.ec2.internal`; `i-0abc.us-west-2.compute.internal`
    /// is instance `i-0abc`).
    pub fn lookup(&self, host: &str) -> Option<(&str, &[String])> {
        let node = self.pods.get(host).map_or(host, String::as_str);
        self.find(node).or_else(|| self.find(host))
    }

    fn find(&self, name: &str) -> Option<(&str, &[String])> {
        if let Some((key, nodes)) = self.nodes.get_key_value(name) {
            return Some((key, nodes));
        }
        let short = first_label(name);
        let mut found = self
            .nodes
            .iter()
            .filter(|(key, _)| first_label(key) == short);
        match (found.next(), found.next()) {
            (Some((key, nodes)), None) => Some((key, nodes)),
            _ => None,
        }
    }

    /// Whether the pods file was given.
    pub fn has_pods(&self) -> bool {
        !self.pods.is_empty()
    }

    fn insert(&mut self, key: &str, nodes: Vec<String>) {
        if !key.is_empty() && !nodes.is_empty() {
            self.nodes.insert(key.to_string(), nodes);
        }
    }

    fn add_json(&mut self, doc: &Value) {
        // describe-instance-topology.
        for instance in doc["Instances"].as_array().into_iter().flatten() {
            let nodes = strings(&instance["NetworkNodes"]);
            self.insert(instance["InstanceId"].as_str().unwrap_or(""), nodes);
        }
        // kubectl get nodes -o json (a list, or one node).
        for node in items(doc) {
            let labels = &node["metadata"]["labels"];
            let nodes: Vec<String> = (1..=MAX_LAYERS)
                .map_while(|n| labels[format!("{NETWORK_LABEL_PREFIX}{n}")].as_str())
                .map(String::from)
                .collect();
            self.insert(
                node["metadata"]["name"].as_str().unwrap_or(""),
                nodes.clone(),
            );
            // spec.providerID is aws:///ZONE/INSTANCE-ID on EKS.
            if let Some(id) = node["spec"]["providerID"]
                .as_str()
                .and_then(|p| p.rsplit('/').next())
                .filter(|id| id.starts_with("i-"))
            {
                self.insert(id, nodes);
            }
        }
    }

    fn add_label_columns(&mut self, text: &str) {
        for row in table(text) {
            let nodes: Vec<String> = (1..=MAX_LAYERS)
                .map_while(|n| {
                    row.get(&format!("{NETWORK_COLUMN_PREFIX}{n}"))
                        .filter(|v| !v.is_empty() && *v != "<none>")
                        .cloned()
                })
                .collect();
            if let Some(name) = row.get("NAME") {
                self.insert(name, nodes);
            }
        }
    }
}

/// The name up to its first dot.
fn first_label(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// The objects of a `kubectl get ... -o json` document: its `items`, or itself.
fn items(doc: &Value) -> Vec<&Value> {
    match doc["items"].as_array() {
        Some(items) => items.iter().collect(),
        None if doc.get("metadata").is_some() => vec![doc],
        None => Vec::new(),
    }
}

/// The JSON documents in `text`, when it is JSON (one document or several in a row).
fn json_documents(text: &str) -> Option<Vec<Value>> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') && !trimmed.starts_with('[') {
        return None;
    }
    serde_json::Deserializer::from_str(trimmed)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .ok()
}

/// The rows of a kubectl table, each cell under the header it starts below: kubectl
/// left-aligns its columns, so a cell starts where its header does, and an empty cell
/// (a missing label) is blank there.
fn table(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.find(|l| l.starts_with("NAME")) else {
        return Vec::new();
    };
    let mut starts: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for word in header.split_whitespace() {
        let start = at + header[at..].find(word).unwrap_or(0);
        starts.push((start, word));
        at = start + word.len();
    }
    lines
        .map(|line| {
            let mut row = BTreeMap::new();
            for (i, (start, name)) in starts.iter().enumerate() {
                let end = starts.get(i + 1).map_or(line.len(), |(s, _)| *s);
                let cell = line.get(*start..end.min(line.len())).unwrap_or("");
                // The first column of a name wins: `NOMINATED NODE` is not `NODE`.
                row.entry(name.to_string())
                    .or_insert_with(|| cell.trim().to_string());
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_instance_topology_in_two_documents() {
        let text = r#"{"Instances": [{"InstanceId": "i-0a", "NetworkNodes": ["a", "b", "c"]}]}
{"Instances": [{"InstanceId": "i-0b", "NetworkNodes": ["a", "b", "d"]}, {"InstanceId": "i-0c"}]}"#;
        let map = NetworkMap::parse_topology(text, "t").unwrap();
        assert_eq!(map.lookup("i-0b").unwrap().1, ["a", "b", "d"]);
        // An EKS node named by its instance (resource-based names).
        assert_eq!(
            map.lookup("i-0a.us-west-2.compute.internal").unwrap().0,
            "i-0a"
        );
        assert_eq!(map.lookup("i-0c"), None);
    }

    #[test]
    fn kubectl_label_columns_with_a_missing_label() {
        let text = "\
NAME                          STATUS   ROLES    AGE   VERSION   NETWORK-NODE-LAYER-1   NETWORK-NODE-LAYER-2   NETWORK-NODE-LAYER-3
ip-10-0-1-2.ec2.internal      Ready    <none>   2d    v1.34.1   nn-1                   nn-2                   nn-3a
ip-10-0-1-3.ec2.internal      Ready    <none>   2d    v1.34.1   nn-1                   nn-2                   nn-3b
ip-10-0-9-9.ec2.internal      Ready    <none>   2d    v1.34.1                                                  
";
        let map = NetworkMap::parse_topology(text, "t").unwrap();
        assert_eq!(
            map.lookup("ip-10-0-1-3.ec2.internal").unwrap().1,
            ["nn-1", "nn-2", "nn-3b"]
        );
        // The short hostname a pod on the host network prints.
        assert_eq!(map.lookup("ip-10-0-1-2").unwrap().1[2], "nn-3a");
        assert_eq!(map.lookup("ip-10-0-9-9"), None);
    }

    #[test]
    fn nodes_json_and_pods_wide() {
        let nodes = r#"{"items": [{"metadata": {"name": "node-a", "labels": {
            "topology.k8s.aws/network-node-layer-1": "x", "topology.k8s.aws/network-node-layer-2": "y",
            "topology.k8s.aws/network-node-layer-3": "z"}}, "spec": {"providerID": "aws:///us-east-1a/i-0123"}}]}"#;
        let mut map = NetworkMap::parse_topology(nodes, "t").unwrap();
        assert_eq!(map.lookup("i-0123").unwrap().1, ["x", "y", "z"]);
        let pods = "\
NAME             READY   STATUS    RESTARTS   AGE   IP          NODE     NOMINATED NODE   READINESS GATES
train-worker-0   1/1     Running   0          5m    10.0.1.5    node-a   <none>           <none>
train-worker-1   0/1     Pending   0          5m    <none>      <none>   <none>           <none>
";
        map.add_pods(pods, "p").unwrap();
        assert_eq!(map.lookup("train-worker-0").unwrap().0, "node-a");
        assert_eq!(map.lookup("train-worker-1"), None);
        assert_eq!(
            NetworkMap::default().add_pods("nothing", "p"),
            Err(NetworkMapError::NoPods { what: "p".into() })
        );
        assert!(NetworkMap::parse_topology("{}", "t").is_err());
    }
}
