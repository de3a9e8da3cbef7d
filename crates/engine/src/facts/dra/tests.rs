//! Resolving pods' DRA claims.
use serde_json::json;

use super::*;

fn pod(claims: Value) -> Value {
    json!({"spec": {"containers": [{"name": "t", "resources": {"claims": [{"name": "gpus"}]}}],
        "resourceClaims": claims}})
}

#[test]
fn counts_exact_and_all_in_every_api_version() {
    let catalog = Catalog::embedded();
    let mut claims = Claims::default();
    claims.add(
        &[
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "eight"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}},
                    {"name": "e", "exactly": {"deviceClassName": "efa.networking.k8s.aws", "allocationMode": "All"}}]}}}}),
            json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "all", "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "g", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}]}}}}),
        ],
        "default",
    );
    let d = resolve(
        &pod(json!([{"name": "gpus", "resourceClaimTemplateName": "eight"}])),
        "default",
        &[&claims],
        &catalog,
    );
    let a = d.accelerators.unwrap();
    assert_eq!(
        (a.resource.as_str(), a.count),
        ("nvidia.com/gpu", Count::Exact(8))
    );
    assert_eq!(d.efa, Some(Count::All));
    assert_eq!(d.device_claims, ["gpus"]);
    let d = resolve(
        &pod(json!([{"name": "gpus", "resourceClaimTemplateName": "all"}])),
        "ml",
        &[&claims],
        &catalog,
    );
    assert_eq!(d.accelerators.unwrap().count, Count::All);
    // Another namespace's template is not this pod's.
    let d = resolve(
        &pod(json!([{"name": "gpus", "resourceClaimTemplateName": "all"}])),
        "default",
        &[&claims],
        &catalog,
    );
    assert!(d.accelerators.is_none());
    assert!(
        d.unresolved[0].contains("ResourceClaimTemplate all not found"),
        "{:?}",
        d.unresolved
    );
}

#[test]
fn a_compute_domain_gives_its_channel_template() {
    let catalog = Catalog::embedded();
    let mut claims = Claims::default();
    claims.add(
        &[json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "cd"},
            "spec": {"numNodes": 18, "channel": {"resourceClaimTemplate": {"name": "cd-channel"}}}})],
        "default",
    );
    let p = json!({"spec": {"containers": [{"name": "t"}],
        "resourceClaims": [{"name": "ch", "resourceClaimTemplateName": "cd-channel"}]}});
    let d = resolve(&p, "default", &[&claims], &catalog);
    let ch = d.channel.unwrap();
    assert_eq!(ch.domain.unwrap().num_nodes, 18);
    assert!(!ch.used, "no container lists the claim");
    assert!(d.unresolved.is_empty() && d.device_claims.is_empty());
}

#[test]
fn uncountable_requests_are_named() {
    let catalog = Catalog::embedded();
    let mut claims = Claims::default();
    claims.add(
        &[json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "a", "exactly": {"deviceClassName": "my-gpus.example.com"}},
                {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All",
                    "selectors": [{"cel": {"expression": "true"}}]}},
                {"name": "c", "firstAvailable": [
                    {"name": "x", "deviceClassName": "gpu.nvidia.com", "count": 8},
                    {"name": "y", "deviceClassName": "my-gpus.example.com", "count": 4}]}]}}}})],
        "default",
    );
    let d = resolve(
        &pod(json!([{"name": "gpus", "resourceClaimTemplateName": "t"}])),
        "default",
        &[&claims],
        &catalog,
    );
    assert_eq!(d.unresolved.len(), 3, "{:?}", d.unresolved);
    assert!(d.accelerators.is_none());
}

#[test]
fn a_shared_resource_claim_is_read_by_name() {
    let catalog = Catalog::embedded();
    let mut claims = Claims::default();
    claims.add(
        &[
            json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
            "metadata": {"name": "node-gpus", "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "g", "deviceClassName": "gpu.nvidia.com", "count": 4}]}}}),
        ],
        "default",
    );
    let d = resolve(
        &pod(json!([{"name": "gpus", "resourceClaimName": "node-gpus"}])),
        "ml",
        &[&claims],
        &catalog,
    );
    assert_eq!(d.accelerators.unwrap().count, Count::Exact(4));
    let d = resolve(
        &pod(json!([{"name": "gpus", "resourceClaimName": "other"}])),
        "ml",
        &[&claims],
        &catalog,
    );
    assert!(
        d.unresolved[0].contains("ResourceClaim other not found"),
        "{:?}",
        d.unresolved
    );
}

/// `firstAvailable` alternatives of one class count as the fewest devices any of them
/// asks for: `[8, 1]` may give the pod one GPU.
#[test]
fn first_available_counts_its_fewest_devices() {
    let catalog = Catalog::embedded();
    let mut claims = Claims::default();
    let template = |name: &str, alternatives: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "g", "firstAvailable": alternatives}]}}}})
    };
    claims.add(
        &[
            template(
                "eight-or-one",
                json!([
                {"name": "x", "deviceClassName": "gpu.nvidia.com", "count": 8},
                {"name": "y", "deviceClassName": "gpu.nvidia.com", "count": 1}]),
            ),
            template(
                "all-or-eight",
                json!([
                {"name": "x", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
                {"name": "y", "deviceClassName": "gpu.nvidia.com", "count": 8}]),
            ),
        ],
        "default",
    );
    for (name, want) in [("eight-or-one", 1), ("all-or-eight", 8)] {
        let d = resolve(
            &pod(json!([{"name": "gpus", "resourceClaimTemplateName": name}])),
            "default",
            &[&claims],
            &catalog,
        );
        assert!(d.unresolved.is_empty(), "{name}: {:?}", d.unresolved);
        let a = d.accelerators.expect(name);
        assert_eq!(a.count.on(0), want, "{name}");
    }
}
