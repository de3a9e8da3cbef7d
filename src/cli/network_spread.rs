//! `trainplace audit --network-spread`: running jobs whose pods span more layer-3 EC2
//! network nodes than the inventory says they needed, as a table section and as
//! PolicyReport results.

use serde_json::{Value, json};
use trainplace_engine::SpreadJob;

/// The table section (printed after the audit's own table).
pub fn table(jobs: &[SpreadJob]) -> String {
    let mut out = String::from(
        "\nJOBS OVER MORE LAYER-3 NETWORK NODES THAN THEY NEED (by the nodes' EKS labels)\n",
    );
    if jobs.is_empty() {
        out.push_str("none\n");
        return out;
    }
    out.push_str(&format!(
        "{:<16} {:<36} {:<5} {:<16} {:<8} {:<7} {:<8} {}\n",
        "NAMESPACE",
        "JOB",
        "NODES",
        "TYPE",
        "LAYER-3",
        "NEEDED",
        "LAYER-2",
        "ITS NODES UNDER EACH LAYER-3 NODE (OF)"
    ));
    for j in jobs {
        let per: Vec<String> = j
            .per_layer3
            .iter()
            .map(|u| format!("{}:{}({})", u.network_node, u.job_nodes, u.holds))
            .collect();
        out.push_str(&format!(
            "{:<16} {:<36} {:<5} {:<16} {:<8} {:<7} {:<8} {}\n",
            j.namespace,
            format!("{} {}", j.kind, j.job),
            j.nodes,
            j.instance_type,
            j.layer3_spanned,
            j.layer3_needed,
            j.layer2_spanned,
            per.join(" ")
        ));
    }
    out
}

/// One PolicyReport result per job: rule `network-spread`, result `warn`, the job's
/// pods as resources.
pub fn results(jobs: &[SpreadJob]) -> Vec<Value> {
    jobs.iter()
        .map(|j| {
            let resources: Vec<Value> = j
                .pods
                .iter()
                .zip(&j.pod_uids)
                .map(|(name, uid)| {
                    json!({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": j.namespace, "uid": uid})
                })
                .collect();
            json!({"policy": "trainplace", "rule": "network-spread", "result": "warn", "severity": "medium",
                "message": j.message(),
                "properties": {"instanceType": j.instance_type, "nodes": j.nodes.to_string(),
                    "layer3Spanned": j.layer3_spanned.to_string(), "layer3Needed": j.layer3_needed.to_string(),
                    "layer2Spanned": j.layer2_spanned.to_string()},
                "resources": resources})
        })
        .collect()
}
