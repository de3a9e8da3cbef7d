//! The deployment: every kustomize overlay renders offline with the real kubectl and its
//! core objects pass `kubernetes-validate --strict`; the webhook configurations carry the
//! settings that keep a cluster safe; the Deployment is highly available and hardened;
//! certs/make-certs.sh makes certificates the real server serves and rotates on disk.

mod common;
#[path = "common/manifests_helpers.rs"]
mod manifests_helpers;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use base64::Engine;
use manifests_helpers::*;
use serde_json::{Value, json};

const OVERLAYS: [&str; 4] = ["cert-manager", "fail-closed", "self-signed", "self-managed"];

/// Each overlay's rendering (and base's); self-signed after make-certs.sh ran.
fn renderings() -> (tempfile::TempDir, Vec<(String, Vec<Value>)>) {
    let (tmp, manifests, _) = manifests_with_certs();
    let mut out = vec![("base".to_string(), kustomize(&manifests.join("base")))];
    for name in OVERLAYS {
        out.push((
            name.to_string(),
            kustomize(&manifests.join("overlays").join(name)),
        ));
    }
    (tmp, out)
}

/// Built-in API groups: validated strictly. Anything else must be cert-manager's.
fn is_core(doc: &Value) -> bool {
    let api = doc["apiVersion"].as_str().unwrap();
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    [
        "",
        "apps",
        "policy",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
    ]
    .contains(&group)
}

#[test]
fn policy_copies_are_byte_identical_to_policies_dir() {
    let names = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let (src, copy) = (
        root().join("policies"),
        root().join("manifests/base/policies"),
    );
    assert_eq!(names(&src), names(&copy), "cp policies/*.yaml {copy:?}");
    for name in names(&src) {
        assert!(
            std::fs::read(src.join(&name)).unwrap() == std::fs::read(copy.join(&name)).unwrap(),
            "manifests/base/policies/{name} drifted from policies/{name}: copy it again"
        );
    }
}

#[test]
fn every_overlay_renders_offline_and_core_objects_pass_strict_validation() {
    let (tmp, renderings) = renderings();
    for (name, docs) in &renderings {
        let kinds: BTreeSet<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        for kind in [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Service",
            "Deployment",
            "PodDisruptionBudget",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            assert!(kinds.contains(kind), "{name} renders no {kind}");
        }
        // cert-manager's Issuer/Certificate are CRDs: kubernetes-validate has no schema
        // for them, so they are skipped here and checked field by field below.
        let (core, crs): (Vec<&Value>, Vec<&Value>) = docs.iter().partition(|d| is_core(d));
        for cr in &crs {
            assert!(
                cr["apiVersion"]
                    .as_str()
                    .unwrap()
                    .starts_with("cert-manager.io/"),
                "{name}: unexpected non-core object {}",
                cr["apiVersion"]
            );
        }
        let file = tmp.path().join(format!("{name}.core.yaml"));
        let yaml: Vec<String> = core
            .iter()
            .map(|d| serde_yaml_ng::to_string(d).unwrap())
            .collect();
        std::fs::write(&file, yaml.join("---\n")).unwrap();
        common::assert_strictly_valid(name, &[&file]);
    }
}

#[test]
fn webhook_configurations_keep_the_cluster_safe() {
    let (_tmp, renderings) = renderings();
    for (name, docs) in &renderings {
        let m = object(docs, "MutatingWebhookConfiguration", Some("trainplace"));
        let v = object(docs, "ValidatingWebhookConfiguration", Some("trainplace"));
        let (mw, vw) = (&m["webhooks"], &v["webhooks"]);
        assert_eq!(mw.as_array().unwrap().len(), 1, "{name}");
        assert_eq!(vw.as_array().unwrap().len(), 1, "{name}");
        let (mw, vw) = (&mw[0], &vw[0]);
        let mutate_policy = if *name == "fail-closed" {
            "Fail"
        } else {
            "Ignore"
        };
        assert_eq!(mw["failurePolicy"], mutate_policy, "{name}");
        assert_eq!(vw["failurePolicy"], "Fail", "{name}");
        assert_eq!(mw["reinvocationPolicy"], "IfNeeded", "{name}");
        for (w, path) in [(mw, "/mutate"), (vw, "/validate")] {
            assert_eq!(w["admissionReviewVersions"], json!(["v1"]), "{name}");
            assert_eq!(w["sideEffects"], "None", "{name}");
            assert_eq!(w["timeoutSeconds"], 5, "{name}");
            assert_eq!(
                w["clientConfig"]["service"],
                json!({"name": "trainplace", "namespace": "trainplace", "path": path, "port": 443}),
                "{name}"
            );
            assert_eq!(
                w["namespaceSelector"],
                json!({"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", "kube-node-lease", "trainplace"]
                }]}),
                "{name}"
            );
            assert_rules(name, &w["rules"]);
            assert_match_conditions(name, &w["matchConditions"]);
        }
        // Both webhooks see exactly the same objects.
        for field in ["rules", "matchConditions", "namespaceSelector"] {
            assert_eq!(mw[field], vw[field], "{name}: {field} differ");
        }
        let ca_from =
            |c: &Value| c["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].clone();
        if *name == "cert-manager" || *name == "fail-closed" {
            for c in [m, v] {
                assert_eq!(ca_from(c), "trainplace/trainplace-serving", "{name}");
            }
            object(docs, "Certificate", Some("trainplace-serving"));
        } else {
            assert!(ca_from(m).is_null() && ca_from(v).is_null(), "{name}");
        }
    }
}

/// Pods on CREATE and UPDATE (an UPDATE only when it changes the pod's labels, by a
/// matchCondition); the workload kinds on CREATE and UPDATE, PyTorchJob and PaddleJob
/// scales on UPDATE; nothing else, never DELETE.
fn assert_rules(name: &str, rules: &Value) {
    let mut seen = BTreeSet::new();
    for rule in rules.as_array().unwrap() {
        let ops = &rule["operations"];
        // Only the cluster-scoped ClusterTrainingRuntime has a Cluster rule.
        let cluster_scoped = rule["resources"] == json!(["clustertrainingruntimes"]);
        let scope = if cluster_scoped {
            "Cluster"
        } else {
            "Namespaced"
        };
        assert_eq!(rule["scope"], scope, "{name}: {rule}");
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                let (g, r) = (group.as_str().unwrap(), resource.as_str().unwrap());
                let expected = if r.ends_with("/scale") {
                    json!(["UPDATE"])
                } else {
                    json!(["CREATE", "UPDATE"])
                };
                assert_eq!(*ops, expected, "{name}: operations on {g}/{r}");
                seen.insert(format!("{g}/{r}"));
            }
        }
    }
    let expected: BTreeSet<String> = [
        "/pods",
        "batch/jobs",
        "jobset.x-k8s.io/jobsets",
        "kubeflow.org/pytorchjobs",
        "kubeflow.org/mpijobs",
        "trainer.kubeflow.org/trainjobs",
        "leaderworkerset.x-k8s.io/leaderworkersets",
        "kubeflow.org/paddlejobs",
        "kubeflow.org/tfjobs",
        "kubeflow.org/xgboostjobs",
        "kubeflow.org/jaxjobs",
        "trainer.kubeflow.org/trainingruntimes",
        "trainer.kubeflow.org/clustertrainingruntimes",
        "ray.io/rayclusters",
        "ray.io/rayjobs",
        "ray.io/rayservices",
        "batch.volcano.sh/jobs",
        "sagemaker.amazonaws.com/hyperpodpytorchjobs",
        // kubectl scale / autoscalers: judged at the new size (the mutating endpoint
        // answers a Scale without a patch).
        "kubeflow.org/pytorchjobs/scale",
        "kubeflow.org/paddlejobs/scale",
        // Strict mode: the core controllers' templates and DRA claims.
        "apps/deployments",
        "apps/replicasets",
        "apps/statefulsets",
        "apps/daemonsets",
        "/replicationcontrollers",
        "batch/cronjobs",
        "resource.k8s.io/resourceclaims",
        "resource.k8s.io/resourceclaimtemplates",
    ]
    .map(String::from)
    .into();
    assert_eq!(seen, expected, "{name}: rule resources");
}

/// The CEL conditions exist, are plausible, and say what manifests/README.md says.
fn assert_match_conditions(name: &str, conditions: &Value) {
    let conditions = conditions.as_array().unwrap();
    let names: Vec<&str> = conditions
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "not-delete",
            "pod-update-changes-labels",
            "pod-requests-accelerator",
            "template-requests-device"
        ],
        "{name}"
    );
    for c in conditions {
        let expr = c["expression"].as_str().unwrap();
        let problems = cel_problems(expr);
        assert!(problems.is_empty(), "{name}: {expr}\n{problems:?}");
    }
    assert_eq!(conditions[0]["expression"], "request.operation != 'DELETE'");
    // A pod UPDATE passes only when it changes the pod's labels (its job label).
    let relabel = conditions[1]["expression"].as_str().unwrap();
    for needle in [
        "request.operation != 'UPDATE'",
        "request.resource.resource != 'pods'",
        "object.metadata.labels != oldObject.metadata.labels",
    ] {
        assert!(
            relabel.contains(needle),
            "{name}: {needle} missing in {relabel}"
        );
    }
    let pods = conditions[2]["expression"].as_str().unwrap();
    for needle in [
        "request.resource.group != ''",
        "request.resource.resource != 'pods'",
        "has(object.spec.containers)",
        "(has(object.spec.initContainers) ? object.spec.initContainers : [])).exists(c,",
        "has(c.resources.limits)",
        "has(c.resources.requests)",
        // Any device resource under any name reaches the webhook, in init containers
        // too, and DRA claims: only the plain CPU resources are kept away.
        "!(r in ['cpu', 'memory', 'ephemeral-storage']) && !r.startsWith('hugepages-')",
        "has(object.spec.resourceClaims)",
        // Sizes before walks (the API server's walk of a list costs its length
        // squared): past the bounds a pod goes to the webhook, which refuses it.
        "(has(object.spec.initContainers) ? size(object.spec.initContainers) : 0) > 64 ||",
        "size(c.resources.limits) > 32 ||",
        "size(c.resources.requests) > 32 ||",
    ] {
        assert!(pods.contains(needle), "{name}: {needle} missing in {pods}");
    }
}

#[test]
fn cel_plausibility_check_rejects_broken_expressions() {
    assert!(cel_problems("object.spec.containers.exists(c, has(c.resources))").is_empty());
    assert!(cel_problems("['a'].exists(r, r in oldObject.metadata.labels)").is_empty());
    for (broken, why) in [
        ("has(object.spec", "unclosed"),
        ("object.spec)", "unbalanced"),
        ("request.operation != 'DELETE", "unterminated"),
        (
            "pod.spec.containers.size() > 0",
            "unknown identifier \"pod\"",
        ),
        (
            "object.spec.containers.exists(c, d.resources)",
            "unknown identifier \"d\"",
        ),
        ("", "empty"),
    ] {
        let problems = cel_problems(broken);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{broken:?}: {problems:?}"
        );
    }
}

fn env_value<'a>(container: &'a Value, name: &str) -> &'a str {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("env {name} missing"))
}

fn seconds(duration: &str) -> u64 {
    duration
        .strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{duration:?} is not like 20s"))
}

#[test]
fn deployment_is_highly_available_least_privileged_and_hardened() {
    let docs = kustomize(&root().join("manifests/base"));
    let deploy = object(&docs, "Deployment", Some("trainplace"));
    let spec = &deploy["spec"];
    let pod = &spec["template"]["spec"];
    let labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(spec["replicas"], 3);
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["serviceAccountName"], "trainplace");

    let pdb = object(&docs, "PodDisruptionBudget", Some("trainplace"));
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(labels[k], *v, "PDB selects the webhook pods");
    }
    let spread: BTreeSet<&str> = pod["topologySpreadConstraints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["topologyKey"].as_str().unwrap())
        .collect();
    assert_eq!(
        spread,
        BTreeSet::from(["kubernetes.io/hostname", "topology.kubernetes.io/zone"])
    );

    let psc = &pod["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true);
    assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["image"], "ghcr.io/trainplace/trainplace:0.1.0");
    assert_eq!(c["args"], json!(["serve"]));
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let res = &c["resources"];
    assert!(res["requests"]["cpu"].is_string(), "CPU request");
    assert!(res["limits"].get("cpu").is_none(), "no CPU limit");
    assert!(res["limits"]["memory"].is_string(), "memory limit");

    // Probes on the plain-HTTP port the server listens on.
    let port = |name: &str| {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("port {name}"))["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert!(env_value(c, "TRAINPLACE_ADDR").ends_with(&format!(":{}", port("https"))));
    assert!(env_value(c, "TRAINPLACE_PROBE_ADDR").ends_with(&format!(":{}", port("metrics"))));
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "metrics"})
    );
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "metrics"})
    );

    // preStop drains endpoints, then SIGTERM drains in-flight reviews; kubelet must not
    // SIGKILL before both are done.
    let pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    let grace = seconds(env_value(c, "TRAINPLACE_SHUTDOWN_GRACE"));
    let termination = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(pre_stop >= 5, "preStop {pre_stop}s");
    assert!(
        termination > pre_stop + grace,
        "{termination} <= {pre_stop} + {grace}"
    );

    // Policy ConfigMap and TLS Secret mounted as directories (no subPath: hot reload).
    let mounts = c["volumeMounts"].as_array().unwrap();
    let mount_of = |volume: &str| {
        let m = mounts.iter().find(|m| m["name"] == volume).unwrap();
        assert!(m.get("subPath").is_none(), "{volume} mounted with subPath");
        m["mountPath"].as_str().unwrap().to_string()
    };
    assert_eq!(mount_of("policy"), env_value(c, "TRAINPLACE_POLICY_DIR"));
    let tls_dir = mount_of("tls");
    assert_eq!(
        env_value(c, "TRAINPLACE_TLS_CERT"),
        format!("{tls_dir}/tls.crt")
    );
    assert_eq!(
        env_value(c, "TRAINPLACE_TLS_KEY"),
        format!("{tls_dir}/tls.key")
    );
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).unwrap();
    assert_eq!(volume("tls")["secret"]["secretName"], "trainplace-tls");
    assert_eq!(volume("policy")["configMap"]["name"], "trainplace-policy");
    let cm = object(&docs, "ConfigMap", Some("trainplace-policy"));
    for file in ["default.yaml", "instances.yaml"] {
        let want = std::fs::read_to_string(root().join("policies").join(file)).unwrap();
        assert_eq!(cm["data"][file], want, "ConfigMap {file}");
    }

    // Service: 443 -> https for the apiserver, and the metrics port.
    let svc = object(&docs, "Service", Some("trainplace"));
    assert_eq!(
        svc["spec"]["ports"],
        json!([
            {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
            {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
        ])
    );
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(labels[k], *v, "Service selects the webhook pods");
    }

    // RBAC: read nodes, pods, namespaces, PyTorchJobs, Jobs and StatefulSets (the owners
    // of marked pods), EC2NodeClasses, DRA claims and Kueue Topologies, and write Events;
    // nothing else.
    let role = object(&docs, "ClusterRole", Some("trainplace"));
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["nodes", "pods", "namespaces"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "paddlejobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainingruntimes", "clustertrainingruntimes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["karpenter.k8s.aws"], "resources": ["ec2nodeclasses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates", "resourceclaims"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["resource.nvidia.com"], "resources": ["computedomains"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["topologies"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
        ])
    );
    let binding = object(&docs, "ClusterRoleBinding", Some("trainplace"));
    assert_eq!(binding["roleRef"]["name"], "trainplace");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "trainplace", "namespace": "trainplace"}])
    );
}

#[test]
fn image_is_overridable_with_kustomize_images() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&root().join("manifests"), &tmp.path().join("manifests"));
    let dir = tmp.path().join("mine");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "resources: [../manifests/base]\nimages:\n  - name: ghcr.io/trainplace/trainplace\n    newName: registry.example.com/tp\n    newTag: dev\n",
    )
    .unwrap();
    let docs = kustomize(&dir);
    let deploy = object(&docs, "Deployment", Some("trainplace"));
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/tp:dev"
    );
}

#[test]
fn cert_manager_overlay_issues_a_p256_serving_cert_through_a_private_ca() {
    let docs = kustomize(&root().join("manifests/overlays/cert-manager"));
    let issuer = |name: &str| object(&docs, "Issuer", Some(name))["spec"].clone();
    let cert = |name: &str| object(&docs, "Certificate", Some(name))["spec"].clone();
    let issuer_ref =
        |name: &str| json!({"group": "cert-manager.io", "kind": "Issuer", "name": name});
    assert_eq!(issuer("trainplace-selfsigned"), json!({"selfSigned": {}}));
    let ca = cert("trainplace-ca");
    assert_eq!(ca["isCA"], true);
    assert_eq!(ca["issuerRef"], issuer_ref("trainplace-selfsigned"));
    assert_eq!(
        issuer("trainplace-ca")["ca"]["secretName"],
        ca["secretName"]
    );
    let serving = cert("trainplace-serving");
    assert_eq!(serving["issuerRef"], issuer_ref("trainplace-ca"));
    assert_eq!(serving["dnsNames"], json!(SERVICE_NAMES));
    for c in [&ca, &serving] {
        assert_eq!(c["privateKey"]["algorithm"], "ECDSA");
        assert_eq!(c["privateKey"]["size"], 256);
    }
    let deploy = object(&docs, "Deployment", Some("trainplace"));
    let volumes = deploy["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == serving["secretName"]),
        "the Deployment mounts the serving Secret"
    );
    for doc in docs.iter().filter(|d| !is_core(d)) {
        assert_eq!(
            doc["metadata"]["namespace"], "trainplace",
            "{}",
            doc["metadata"]["name"]
        );
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn certs_script_makes_a_p256_cert_that_verifies_and_the_self_signed_overlay_trusts_its_ca() {
    let (_tmp, manifests, certs) = manifests_with_certs();
    let overlay = manifests.join("overlays/self-signed");
    let (ca, crt) = (certs.join("ca.crt"), certs.join("tls.crt"));
    let (ca_s, crt_s) = (ca.to_str().unwrap(), crt.to_str().unwrap());
    assert_eq!(
        openssl(&["verify", "-CAfile", ca_s, crt_s]).trim(),
        format!("{crt_s}: OK")
    );
    let leaf = openssl(&["x509", "-in", crt_s, "-noout", "-text"]);
    assert!(leaf.contains("NIST CURVE: P-256"), "{leaf}");
    for name in SERVICE_NAMES {
        assert!(
            leaf.contains(&format!("DNS:{name},")) || leaf.contains(&format!("DNS:{name}\n")),
            "SAN {name} missing:\n{leaf}"
        );
    }

    // The overlay renders with the Secret and the CA in both webhooks.
    let docs = kustomize(&overlay);
    let secret = object(&docs, "Secret", Some("trainplace-tls"));
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(secret["metadata"]["namespace"], "trainplace");
    assert_eq!(secret["data"]["tls.crt"], b64(&read(&crt)));
    assert_eq!(
        secret["data"]["tls.key"],
        b64(&read(&certs.join("tls.key")))
    );
    assert_eq!(secret["data"]["ca.crt"], b64(&read(&ca)));
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let c = object(&docs, kind, Some("trainplace"));
        assert_eq!(
            c["webhooks"][0]["clientConfig"]["caBundle"],
            b64(&read(&ca)),
            "{kind}"
        );
    }

    // Idempotent: a second run changes nothing.
    let snapshot = |files: &[&Path]| files.iter().map(|f| read(f)).collect::<Vec<_>>();
    let secret_file = overlay.join("secret.yaml");
    let patch_file = overlay.join("ca-bundle-patch.yaml");
    let files = [ca.as_path(), crt.as_path(), &secret_file, &patch_file];
    let before = snapshot(&files);
    make_certs_ok(&certs, &overlay, &[]);
    assert!(
        snapshot(&files) == before,
        "a second run rewrote certificates"
    );

    // --rotate: a new serving cert from the same CA; caBundle unchanged.
    make_certs_ok(&certs, &overlay, &["--rotate"]);
    assert_eq!(read(&ca), before[0], "--rotate keeps the CA");
    assert_ne!(read(&crt), before[1], "--rotate issues a new serving cert");
    assert_eq!(
        read(&patch_file),
        before[3],
        "caBundle unchanged by --rotate"
    );
    openssl(&["verify", "-CAfile", ca_s, crt_s]);
    let docs = kustomize(&overlay);
    let secret = object(&docs, "Secret", Some("trainplace-tls"));
    assert_eq!(secret["data"]["tls.crt"], b64(&read(&crt)));

    // --rotate without a CA refuses, and says why.
    let empty = tempfile::tempdir().unwrap();
    let out = make_certs(&empty.path().join("none"), &overlay, &["--rotate"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("run without --rotate first"),
        "{}",
        text(&out.stderr)
    );
}

const SERVICE_DNS: &str = "trainplace.trainplace.svc";

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A TLS connection to the webhook as the apiserver makes it (the Service DNS name,
/// only the CA trusted); returns the presented leaf certificate too.
async fn connect(addr: std::net::SocketAddr, ca_pem: &str) -> (Tls, Vec<u8>) {
    let connector =
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(common::client_config(ca_pem)));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from(SERVICE_DNS).unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .expect("handshake verifies against the CA");
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    (tls, leaf)
}

fn leaf_der(path: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(path)
        .unwrap()
        .to_vec()
}

/// POST /validate on an open HTTP/1.1 keep-alive connection; the response's uid.
async fn review_on(tls: &mut Tls, uid: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let review = common::review_for(&common::fixture_object("full-node-p5-jobset"), uid);
    let body = serde_json::to_vec(&review).unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: {SERVICE_DNS}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    tls.flush().await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let n = tls
            .read(&mut chunk)
            .await
            .expect("response on the same connection");
        assert!(n > 0, "connection closed: {}", text(&buf));
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = text(&buf[..end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .expect("content-length")
            .trim()
            .parse()
            .unwrap();
        if buf.len() >= end + 4 + len {
            let v: Value = serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap();
            return v["response"]["uid"].as_str().unwrap().to_string();
        }
    }
}

/// The real binary serves the files make-certs.sh wrote and the policy files of the
/// ConfigMap; `make-certs.sh --rotate` is picked up without a restart: new handshakes
/// get the new certificate, an open keep-alive connection keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_end_to_end_with_files_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let (certs, overlay) = (tmp.path().join("certs"), tmp.path().join("overlay"));
    std::fs::create_dir(&overlay).unwrap();
    make_certs_ok(&certs, &overlay, &[]);
    let (crt, key, ca) = (
        certs.join("tls.crt"),
        certs.join("tls.key"),
        certs.join("ca.crt"),
    );
    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    let policies = root().join("manifests/base/policies");
    let mut server = Server::spawn(
        &[
            "--tls-cert",
            crt.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--policy-dir",
            policies.to_str().unwrap(),
            "--reload-interval",
            "200ms",
            "--shutdown-grace",
            "2s",
        ],
        tmp.path().join("server.log"),
    );
    let readyz = format!("http://{}/readyz", server.probe_addr);
    let detail: Value = common::eventually("ready", || {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("server exited ({status}):\n{}", server.log_text());
        }
        let readyz = readyz.clone();
        async move {
            let r = reqwest::get(&readyz).await.ok()?;
            if r.status() != 200 {
                return None;
            }
            r.json().await.ok()
        }
    })
    .await;
    assert_eq!(detail["ready"], true, "not ready:\n{}", server.log_text());
    let policy = detail["detail"]["policy"].as_str().unwrap_or_default();
    assert!(policy.contains("manifests/base/policies"), "{detail}");

    // A standard HTTPS client that trusts only the CA, as the apiserver with caBundle.
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(common::client_config(&ca_pem))
        .resolve(SERVICE_DNS, server.addr)
        .build()
        .unwrap();
    let review = common::review_for(&common::fixture_object("full-node-p5-jobset"), "https");
    let url = format!("https://{SERVICE_DNS}:{}/mutate", server.addr.port());
    let resp = client.post(&url).json(&review).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["response"]["uid"], "https");

    let (mut old, served) = connect(server.addr, &ca_pem).await;
    let first = leaf_der(&crt);
    assert!(served == first, "serves the certificate on disk");
    assert_eq!(review_on(&mut old, "before").await, "before");

    make_certs_ok(&certs, &overlay, &["--rotate"]);
    let rotated = leaf_der(&crt);
    assert!(rotated != first, "--rotate wrote a new certificate");
    common::eventually("the rotated certificate served", || async {
        (connect(server.addr, &ca_pem).await.1 == rotated).then_some(())
    })
    .await;
    // The connection opened before the rotation still answers.
    assert_eq!(review_on(&mut old, "after").await, "after");
    let metrics = common::metrics_text(server.probe_addr).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("certificate_reloads_total") && l.contains("success")),
        "{metrics}"
    );

    // SIGTERM: a clean exit within the shutdown grace.
    drop((old, client));
    let pid = server.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let status = common::eventually("an exit after SIGTERM", || {
        let exited = server.child.try_wait().unwrap();
        async move { exited }
    })
    .await;
    assert!(status.success(), "{status}:\n{}", server.log_text());
}

/// The self-managed overlay mounts no certificate and sets the self-managed flags, each an
/// environment variable `trainplace serve` reads (its --help lists them), naming the
/// Secret its RBAC grants and the Service and webhook configurations of the base.
#[test]
fn the_self_managed_overlay_sets_real_flags_and_its_rbac_names_them() {
    let docs = kustomize(&root().join("manifests/overlays/self-managed"));
    let deploy = object(&docs, "Deployment", Some("trainplace"));
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert!(
        !c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "tls")
            && !pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == "tls"),
        "no certificate volume"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for e in c["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        // The log filter is read by the logger, not a flag.
        if name == "TRAINPLACE_LOG" {
            continue;
        }
        assert!(
            help.contains(&format!("env: {name}=")),
            "{name} is not a `trainplace serve` setting"
        );
    }
    assert_eq!(env_value(c, "TRAINPLACE_SELF_MANAGED_CERTS"), "true");
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["name"] != "TRAINPLACE_TLS_CERT")
    );
    let secret = env_value(c, "TRAINPLACE_CERT_SECRET");
    let role = object(&docs, "Role", Some("trainplace-certificates"));
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
        ])
    );
    let cluster_role = object(&docs, "ClusterRole", Some("trainplace-certificates"));
    for key in [
        "TRAINPLACE_MUTATING_WEBHOOK",
        "TRAINPLACE_VALIDATING_WEBHOOK",
    ] {
        assert_eq!(
            cluster_role["rules"][0]["resourceNames"],
            json!([env_value(c, key)]),
            "{key}"
        );
    }
    assert_eq!(cluster_role["rules"][0]["verbs"], json!(["get", "patch"]));
    assert_eq!(env_value(c, "TRAINPLACE_CERT_SERVICE"), "trainplace");
    object(&docs, "Service", Some("trainplace"));
}
