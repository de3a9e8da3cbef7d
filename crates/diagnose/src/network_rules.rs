//! How far apart the ranks ran in the EC2 network: each host the input names is looked
//! up in the user's topology ([`NetworkMap`]), and the hosts are grouped by the bottom
//! network node they sit under. Two hosts under one bottom node are closest; otherwise
//! their traffic climbs to the deepest layer whose node they share
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>),
//! and an all-reduce waits for its slowest path.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::finding::{Finding, Severity};
use crate::network_map::NetworkMap;

/// How many network nodes of one layer the hosts span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerCount {
    pub layer: u8,
    pub nodes: usize,
}

/// The hosts under one bottom-layer network node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkGroup {
    pub network_node: String,
    /// The layer of `network_node`: the bottom one (3, or 4 on four-layer types).
    pub layer: u8,
    pub hosts: Vec<String>,
    pub ranks: Vec<u32>,
    /// The deepest layer whose network node this group shares with the largest group
    /// (0: none); absent for the largest group itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meets_largest_at: Option<u8>,
}

/// Where the ranks' hosts sit in the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpan {
    /// Network nodes spanned per layer, layer 1 first.
    pub layers: Vec<LayerCount>,
    /// By bottom-layer network node, the largest group first.
    pub groups: Vec<NetworkGroup>,
    /// The deepest layer whose one network node every host found shares (0: none).
    pub shared_layer: u8,
    /// Hosts the topology does not list.
    pub unknown_hosts: Vec<String>,
}

/// A host the input names and the ranks it ran.
pub(crate) struct HostRanks {
    pub host: String,
    pub ranks: Vec<u32>,
}

/// The span of `hosts` in `map`, and what to say about it.
pub(crate) fn check(hosts: &[HostRanks], map: &NetworkMap) -> (Option<NetworkSpan>, Vec<Finding>) {
    if hosts.is_empty() {
        return (
            None,
            vec![Finding::new(
                Severity::Info,
                "network-no-hosts",
                "a topology was given, but the input names no hosts to place in it".into(),
                "Diagnose an NCCL INFO log (each line starts with its host) or nccl-tests output with its `# Rank ... on HOST` lines.".into(),
            )],
        );
    }
    let mut found: Vec<(&HostRanks, &[String])> = Vec::new();
    let mut unknown_hosts = Vec::new();
    for h in hosts {
        match map.lookup(&h.host) {
            Some((_, nodes)) => found.push((h, nodes)),
            None => unknown_hosts.push(h.host.clone()),
        }
    }
    let span = span(&found, unknown_hosts);
    let mut findings = Vec::new();
    if !span.unknown_hosts.is_empty() {
        findings.push(unknown(&span.unknown_hosts, map.has_pods()));
    }
    if found.len() > 1 {
        findings.push(if span.groups.len() == 1 {
            close(&span, found.len())
        } else {
            far(&span, found.len())
        });
    }
    (Some(span), findings)
}

fn span(found: &[(&HostRanks, &[String])], unknown_hosts: Vec<String>) -> NetworkSpan {
    let depth = found.iter().map(|(_, n)| n.len()).max().unwrap_or(0);
    let layers = (0..depth)
        .map(|l| {
            let mut nodes: Vec<&str> = found
                .iter()
                .filter_map(|(_, n)| n.get(l).map(String::as_str))
                .collect();
            nodes.sort_unstable();
            nodes.dedup();
            LayerCount {
                layer: layer(l + 1),
                nodes: nodes.len(),
            }
        })
        .collect();
    let shared_layer = (0..depth)
        .take_while(|&l| {
            let first = found[0].1.get(l);
            first.is_some() && found.iter().all(|(_, n)| n.get(l) == first)
        })
        .count();
    // By the whole node set, so two bottom nodes of one name under different parents
    // stay apart.
    let mut by_node: BTreeMap<&[String], (Vec<String>, Vec<u32>)> = BTreeMap::new();
    for (h, nodes) in found {
        let entry = by_node.entry(nodes).or_default();
        entry.0.push(h.host.clone());
        entry.1.extend(&h.ranks);
    }
    let mut groups: Vec<(&[String], Vec<String>, Vec<u32>)> = by_node
        .into_iter()
        .map(|(nodes, (hosts, mut ranks))| {
            ranks.sort_unstable();
            (nodes, hosts, ranks)
        })
        .collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let largest = groups.first().map(|g| g.0).unwrap_or_default();
    let groups = groups
        .iter()
        .enumerate()
        .map(|(i, (nodes, hosts, ranks))| NetworkGroup {
            network_node: nodes.last().cloned().unwrap_or_default(),
            layer: layer(nodes.len()),
            hosts: hosts.clone(),
            ranks: ranks.clone(),
            meets_largest_at: (i > 0).then(|| layer(common_prefix(nodes, largest))),
        })
        .collect();
    NetworkSpan {
        layers,
        groups,
        shared_layer: layer(shared_layer),
        unknown_hosts,
    }
}

fn layer(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

fn common_prefix(a: &[String], b: &[String]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `0-7,16-23`.
pub(crate) fn rank_ranges(ranks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// `1 layer-1, 1 layer-2, 2 layer-3`.
pub(crate) fn layer_counts(span: &NetworkSpan) -> String {
    span.layers
        .iter()
        .map(|c| format!("{} layer-{}", c.nodes, c.layer))
        .collect::<Vec<_>>()
        .join(", ")
}

fn group_text(g: &NetworkGroup) -> String {
    let ranks = if g.ranks.is_empty() {
        String::new()
    } else {
        format!("ranks {} ", rank_ranges(&g.ranks))
    };
    format!("{ranks}on {} under {}", g.hosts.join(", "), g.network_node)
}

fn close(span: &NetworkSpan, hosts: usize) -> Finding {
    let g = &span.groups[0];
    Finding::new(
        Severity::Info,
        "ranks-network-close",
        format!(
            "the {hosts} hosts are all under one layer-{} network node ({}): as close as EC2 topology describes",
            g.layer, g.network_node
        ),
        "Nothing to change: this is the placement trainplace's network proximity asks for.".into(),
    )
}

fn far(span: &NetworkSpan, hosts: usize) -> Finding {
    let largest = &span.groups[0];
    let far: Vec<String> = span.groups[1..]
        .iter()
        .map(|g| {
            let at = g.meets_largest_at.unwrap_or(0);
            let meet = if at == 0 {
                "share no network node with them".to_string()
            } else {
                format!("meet them at layer {at}")
            };
            format!("{} {meet}", group_text(g))
        })
        .collect();
    let climbs = if span.shared_layer == 0 {
        "no network node is shared by all of them".to_string()
    } else {
        format!(
            "traffic between them climbs to layer {}, and every all-reduce waits for its slowest path",
            span.shared_layer
        )
    };
    Finding::new(
        Severity::Warning,
        "ranks-network-far",
        format!(
            "the {hosts} hosts span {} network node(s): {climbs}. Closest together: {}; farther: {}",
            layer_counts(span),
            group_text(largest),
            far.join("; ")
        ),
        "Keep a job's pods under one network node: trainplace's webhook asks the scheduler to (network proximity, docs/network.md), `defaults.networkProximity.placement: required` holds jobs up to a size under one node of a layer, and Kueue's Topology Aware Scheduling places a whole job at once. EC2 does not say how many instances one network node holds: a large job may have to span several.".into(),
    )
}

fn unknown(hosts: &[String], with_pods: bool) -> Finding {
    let fix = if with_pods {
        "Give a topology that lists these nodes (their instance ids, or node names with the network-node labels)."
    } else {
        "When the log names pods, not nodes, add --pods (`kubectl get pods -o wide`); else give a topology that lists these hosts."
    };
    Finding::new(
        Severity::Info,
        "ranks-network-unknown",
        format!(
            "{} host(s) are not in the topology, so where they ran is not known: {}",
            hosts.len(),
            hosts.join(", ")
        ),
        fix.into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &[(&str, &[u32])]) -> Vec<HostRanks> {
        list.iter()
            .map(|(h, r)| HostRanks {
                host: h.to_string(),
                ranks: r.to_vec(),
            })
            .collect()
    }

    const TOPOLOGY: &str = r#"{"Instances": [
        {"InstanceId": "i-a", "NetworkNodes": ["l1", "l2-a", "l3-a"]},
        {"InstanceId": "i-b", "NetworkNodes": ["l1", "l2-a", "l3-a"]},
        {"InstanceId": "i-c", "NetworkNodes": ["l1", "l2-a", "l3-b"]},
        {"InstanceId": "i-d", "NetworkNodes": ["l1", "l2-b", "l3-c"]}]}"#;

    #[test]
    fn two_hosts_under_one_bottom_node_are_close() {
        let map = NetworkMap::parse_topology(TOPOLOGY, "t").unwrap();
        let (span, findings) = check(&hosts(&[("i-a", &[0, 1]), ("i-b", &[2, 3])]), &map);
        let span = span.unwrap();
        assert_eq!(span.shared_layer, 3);
        assert_eq!(span.groups.len(), 1);
        assert_eq!(findings[0].rule, "ranks-network-close");
    }

    #[test]
    fn the_far_ranks_are_named_with_where_they_meet() {
        let map = NetworkMap::parse_topology(TOPOLOGY, "t").unwrap();
        let (span, findings) = check(
            &hosts(&[
                ("i-a", &[0, 1, 2, 3]),
                ("i-b", &[4, 5, 6, 7]),
                ("i-c", &[8, 9, 10, 11]),
                ("i-d", &[12, 13, 14, 15]),
                ("i-x", &[16]),
            ]),
            &map,
        );
        let span = span.unwrap();
        assert_eq!(layer_counts(&span), "1 layer-1, 2 layer-2, 3 layer-3");
        assert_eq!(span.shared_layer, 1);
        assert_eq!(span.groups[0].ranks, (0..8).collect::<Vec<_>>());
        assert_eq!(span.groups[1].meets_largest_at, Some(2));
        assert_eq!(span.groups[2].meets_largest_at, Some(1));
        assert_eq!(span.unknown_hosts, ["i-x"]);
        let far = findings
            .iter()
            .find(|f| f.rule == "ranks-network-far")
            .unwrap();
        assert_eq!(far.severity, Severity::Warning);
        assert!(
            far.message.contains("Closest together: ranks 0-7 on i-a, i-b under l3-a; farther: ranks 8-11 on i-c under l3-b meet them at layer 2; ranks 12-15 on i-d under l3-c meet them at layer 1"),
            "{}",
            far.message
        );
        assert!(findings.iter().any(|f| f.rule == "ranks-network-unknown"));
    }

    #[test]
    fn rank_ranges_compress_runs() {
        assert_eq!(rank_ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(rank_ranges(&[]), "");
    }
}
