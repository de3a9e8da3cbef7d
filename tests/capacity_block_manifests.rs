//! `manifests/components/capacity-block-reservations`: an overlay with it renders with
//! the real kubectl, its core objects pass `kubernetes-validate --strict`, and the
//! Deployment reads the ConfigMap's file through `TRAINPLACE_RESERVATIONS`.

mod common;
#[path = "common/manifests_helpers.rs"]
#[allow(dead_code)]
mod manifests_helpers;

use manifests_helpers::{kustomize, manifests_with_certs};
use serde_json::Value;

#[test]
fn the_component_mounts_the_reservations_configmap_into_the_webhook() {
    let (tmp, manifests, _) = manifests_with_certs();
    let overlay = manifests.join("overlays/with-reservations");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../self-signed\ncomponents:\n  - ../../components/capacity-block-reservations\n",
    )
    .unwrap();
    let docs = kustomize(&overlay);
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "TRAINPLACE_RESERVATIONS")
        .expect("TRAINPLACE_RESERVATIONS set");
    let file = env["value"].as_str().unwrap();
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "reservations")
        .expect("the reservations volume is mounted");
    let dir = mount["mountPath"].as_str().unwrap();
    assert!(
        file.starts_with(&format!("{dir}/")),
        "{file} is not under {dir}"
    );
    assert_eq!(mount["readOnly"], true);
    let volume: &Value = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "reservations")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], "trainplace-reservations");
    assert_eq!(volume["configMap"]["optional"], true);
    let key = file.rsplit('/').next().unwrap();
    assert_eq!(
        key, "reservations.json",
        "the file is the ConfigMap key the command in docs/capacity-blocks.md writes"
    );
    let core: Vec<String> = docs
        .iter()
        .filter(|d| {
            !d["apiVersion"]
                .as_str()
                .unwrap()
                .starts_with("cert-manager.io/")
        })
        .map(|d| serde_yaml_ng::to_string(d).unwrap())
        .collect();
    let path = tmp.path().join("with-reservations.core.yaml");
    std::fs::write(&path, core.join("---\n")).unwrap();
    common::assert_strictly_valid("with-reservations", &[&path]);
}
