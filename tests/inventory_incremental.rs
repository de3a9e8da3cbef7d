//! The live inventory's two ways to a new snapshot agree: publishing the pod changes
//! over the last snapshot (`Caches::publish`, what the server does when only pods
//! changed) and rebuilding from the caches (`Caches::snapshot`, after a node change).

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::json;
use trainplace::inventory::live::Caches;
use trainplace::inventory::pods::{PodIndex, PodPlacement};
use trainplace_engine::Snapshot;

const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn node(i: usize, zone: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": format!("n{i}"),
        "labels": {"topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": "p5.48xlarge"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}}}))
    .unwrap()
}

fn pod(name: &str, job: Option<&str>, node: usize) -> PodPlacement {
    let labels = match job {
        Some(job) => json!({JOBSET: job}),
        None => json!({}),
    };
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"nodeName": format!("n{node}")}}),
    )
    .unwrap()
}

fn store(kind: &str, plural: &str) -> Writer<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", kind);
    Writer::new(ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn caches(nodes: &Writer<Node>, pods: Arc<Mutex<PodIndex>>) -> Caches {
    Caches {
        nodes: nodes.as_reader(),
        namespaces: Writer::<Namespace>::default().as_reader(),
        pods,
        jobs: [store("A", "as").as_reader(), store("B", "bs").as_reader()],
        node_classes: store("C", "cs").as_reader(),
        runtimes: [store("D", "ds").as_reader(), store("E", "es").as_reader()],
        dra: Vec::new(),
    }
}

fn zones(snap: &Snapshot, job: &str) -> Vec<String> {
    snap.sibling_zones("ml", JOBSET, job)
        .map(|z| z.iter().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn publishing_pod_changes_answers_like_a_rebuild() {
    let mut nodes = Writer::<Node>::default();
    for i in 0..6 {
        nodes.apply_watcher_event(&Event::Apply(node(i, ZONES[i % 3])));
    }
    let pods = Arc::new(Mutex::new(PodIndex::default()));
    let caches = caches(&nodes, pods.clone());
    let apply = |watch, event| pods.lock().unwrap().apply(watch, &event);

    // The initial list of one watch; the other watch lists a pod of the same job.
    apply(0, Event::Init);
    apply(0, Event::InitApply(pod("a-0", Some("a"), 0)));
    apply(0, Event::InitApply(pod("a-1", Some("a"), 3)));
    apply(0, Event::InitApply(pod("b-0", Some("b"), 1)));
    apply(0, Event::InitDone);
    apply(1, Event::Apply(pod("a-0", Some("a"), 0)));
    let mut snap = caches.snapshot();
    assert_eq!(zones(&snap, "a"), ["us-east-1a"]);
    assert_eq!(zones(&snap, "b"), ["us-east-1b"]);

    // a-1 moves to zone c; b-0 loses its job label; c appears; then published.
    apply(0, Event::Apply(pod("a-1", Some("a"), 2)));
    apply(0, Event::Apply(pod("b-0", None, 1)));
    apply(0, Event::Apply(pod("c-0", Some("c"), 4)));
    snap = caches.publish(&snap);
    assert_eq!(zones(&snap, "a"), ["us-east-1a", "us-east-1c"]);
    assert_eq!(
        zones(&snap, "b"),
        Vec::<String>::new(),
        "b has no pods left"
    );
    assert_eq!(zones(&snap, "c"), ["us-east-1b"]);
    let rebuilt = caches.snapshot();
    for job in ["a", "b", "c"] {
        assert_eq!(zones(&snap, job), zones(&rebuilt, job), "{job}");
    }

    // a-0 is deleted by one watch but still listed by the other; then by both.
    apply(0, Event::Delete(pod("a-0", Some("a"), 0)));
    snap = caches.publish(&rebuilt);
    assert_eq!(zones(&snap, "a"), ["us-east-1a", "us-east-1c"]);
    apply(1, Event::Delete(pod("a-0", Some("a"), 0)));
    snap = caches.publish(&snap);
    assert_eq!(zones(&snap, "a"), ["us-east-1c"]);

    // A node moves zone (a new node list): the rebuild maps the counted pods anew.
    nodes.apply_watcher_event(&Event::Apply(node(2, "us-east-1d")));
    let rebuilt = caches.snapshot();
    assert_eq!(zones(&rebuilt, "a"), ["us-east-1d"]);
    // Later pod changes publish over that rebuild with the new zones.
    apply(0, Event::Apply(pod("a-2", Some("a"), 5)));
    snap = caches.publish(&rebuilt);
    assert_eq!(zones(&snap, "a"), ["us-east-1c", "us-east-1d"]);
}
