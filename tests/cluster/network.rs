//! Network proximity through the sandbox's real API server, webhook and kube-scheduler:
//! on a fleet of twelve p5 nodes under three layer-3 network nodes
//! (tests/sandbox/network-fleet.yaml), a job that fits under one layer-3 node is packed
//! there, and a job that does not fit spills to the next layer with every pod
//! scheduled, none left Pending.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::sandbox::{self, Sandbox};
use serde_json::Value;

fn sb() -> &'static Sandbox {
    let fleet =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sandbox/network-fleet.yaml");
    // A control plane of its own: which network nodes a job lands under says something
    // only on a fleet no other suite's pods occupy, under a topology this test knows.
    sandbox::own(
        "cluster_network",
        &[("SANDBOX_FLEET", fleet.to_str().unwrap())],
    )
}

/// The network nodes of `layer` that `pods` run under.
fn spanned(sb: &Sandbox, pods: &[Value], layer: u8) -> BTreeSet<String> {
    let key = format!("topology.k8s.aws/network-node-layer-{layer}");
    pods.iter()
        .map(|p| {
            let node = p["spec"]["nodeName"].as_str().unwrap();
            sb.node_labels(node)[&key]
                .as_str()
                .unwrap_or_else(|| panic!("{node} has no {key}"))
                .to_string()
        })
        .collect()
}

#[test]
fn a_job_is_packed_under_one_layer3_node_when_it_fits_and_spills_up_a_layer_when_not() {
    let sb = sb();
    // The suite's only test: its control plane stops with it.
    let _stop = sandbox::StopWhenDone(sb);
    let ns = sb.namespace("network");
    let first = sb.whole_node_job(&ns, "fits", 4, Duration::from_secs(90));
    let mutated = first[0]["metadata"]["annotations"]["trainplace.io/mutated"]
        .as_str()
        .unwrap_or_default();
    assert!(
        mutated.contains("network-node layer-4 (weight 80), layer-3 (weight 40)"),
        "the change annotation explains the preference: {mutated}"
    );
    let l3 = spanned(sb, &first, 3);
    assert_eq!(
        l3.len(),
        1,
        "4 pods fit under one layer-3 node of 4: {l3:?}"
    );

    // Eight nodes are left, four under each of the two other layer-3 nodes: six pods
    // cannot share one, so they take two, and all six run.
    let second = sb.whole_node_job(&ns, "spills", 6, Duration::from_secs(90));
    let l3 = spanned(sb, &second, 3);
    assert_eq!(
        l3.len(),
        2,
        "6 pods over the two free layer-3 nodes: {l3:?}"
    );
    assert!(
        spanned(sb, &second, 3).is_disjoint(&spanned(sb, &first, 3)),
        "the first job's layer-3 node is full"
    );
    let _ = sb.kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
