//! charts/trainplace with the pinned helm (scripts/helm.sh, built by scripts/test-deps.sh):
//! `helm lint --strict`; `helm template` against golden files; every rendered core object
//! valid under `kubernetes-validate --strict`; the kustomize overlays equal to the chart's
//! output (one source of truth: the chart; manifests/README.md); values.schema.json refusing
//! typos; and `helm install`/`upgrade`/`uninstall` into the sandbox's real API server
//! (SANDBOX_WEBHOOK=0: the chart registers its own webhooks there). Without helm or the
//! control plane the tests fail and say to run scripts/test-deps.sh; they never skip.
//!
//! Golden files: tests/fixtures/helm/*.yaml. After an intended change of the chart, rewrite
//! them with `UPDATE_GOLDEN=1 cargo test --test helm_chart golden` and review the diff.

mod common;
mod sandbox;

#[path = "common/golden.rs"]
mod golden;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use common::root;

fn chart() -> PathBuf {
    root().join("charts/trainplace")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The pinned helm, or a failure that says how to get it.
fn helm_bin() -> PathBuf {
    let out = Command::new(root().join("scripts/helm.sh"))
        .arg("path")
        .output()
        .expect("run scripts/helm.sh path");
    let bin = PathBuf::from(text(&out.stdout).trim());
    assert!(
        bin.is_file(),
        "helm is not built ({} missing): run scripts/test-deps.sh, which builds it from the pin in tools/helm once",
        bin.display()
    );
    bin
}

/// helm with its own cache and config under target/ (never the user's), against
/// `kubeconfig` (a file that does not exist for offline commands).
fn helm(args: &[&str], kubeconfig: &Path) -> Output {
    let home = root().join("target/helm-home");
    Command::new(helm_bin())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm runs")
}

fn offline() -> PathBuf {
    root().join("target/helm-home/no-such-kubeconfig")
}

fn ok(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `helm template trainplace charts/trainplace -n trainplace` with `args` appended.
fn template(args: &[&str]) -> Result<String, String> {
    let chart = chart();
    let mut a = vec![
        "template",
        "trainplace",
        chart.to_str().unwrap(),
        "-n",
        "trainplace",
    ];
    a.extend(args);
    let out = helm(&a, &offline());
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(text(&out.stderr))
    }
}

fn ci_values(name: &str) -> String {
    chart().join("ci").join(name).to_string_lossy().into_owned()
}

fn docs(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).expect("the rendering is YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// The renderings the tests look at: (name, helm arguments).
fn renderings() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("default", vec![]),
        (
            "all-features",
            vec!["-f".into(), ci_values("all-features-values.yaml")],
        ),
    ]
}

fn render(args: &[String]) -> String {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    template(&a).unwrap_or_else(|e| panic!("helm template {a:?}: {e}"))
}

/// The rendering as the golden files hold it. The mark-key Secret's key is random per
/// rendering: checked to be 32 bytes, then replaced by a placeholder. Content the chart
/// takes from the repository's own files (charts/trainplace/files/ links to them) is named,
/// not repeated: the shipped policy files in the ConfigMap (their bytes are checked by
/// `the_policy_config_map_is_a_policy_directory_the_server_accepts`) and the guardrail
/// policies (checked by `kustomize_overlays_equal_the_chart`), so a policy or VAP export
/// change does not rewrite the golden files.
fn golden_form(yaml: &str) -> String {
    let mut keys = 0;
    let mut guardrails = 0;
    let mut out: Vec<String> = Vec::new();
    for doc in yaml.split("\n---\n") {
        if doc.starts_with("# Source: trainplace/templates/guardrails.yaml\n") {
            guardrails += doc.matches("\nkind: ").count();
            continue;
        }
        let lines: Vec<&str> = doc.lines().collect();
        let mut kept = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if let Some(b64) = line.strip_prefix("  00-initial: ") {
                let key = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .expect("the key is base64");
                assert_eq!(key.len(), 32, "the mark key is 32 random bytes");
                keys += 1;
                kept.push("  00-initial: <32 random bytes, base64>".to_string());
                i += 1;
                continue;
            }
            let shipped = ["default.yaml", "instances.yaml"]
                .into_iter()
                .find(|f| line == format!("  {f}: |") && doc.contains("\nkind: ConfigMap\n"));
            if let Some(file) = shipped {
                let mut end = i + 1;
                while end < lines.len()
                    && (lines[end].starts_with("    ") || lines[end].trim().is_empty())
                {
                    end += 1;
                }
                let block: Vec<&str> = lines[i + 1..end]
                    .iter()
                    .map(|l| l.strip_prefix("    ").unwrap_or(l.trim()))
                    .collect();
                let source = std::fs::read_to_string(root().join("policies").join(file)).unwrap();
                if block.join("\n").trim_end() == source.trim_end() {
                    kept.push(format!("  {file}: <policies/{file}, byte for byte>"));
                    i = end;
                    continue;
                }
            }
            kept.push(line.to_string());
            i += 1;
        }
        out.push(kept.join("\n"));
    }
    assert_eq!(keys, 1, "one mark key in the rendering");
    if guardrails > 0 {
        out.push(format!(
            "# Source: trainplace/templates/guardrails.yaml\n# {guardrails} objects: manifests/overlays/guardrails/validating-admission-policies.yaml"
        ));
    }
    out.join("\n---\n") + "\n"
}

#[test]
fn lint_passes_strict_with_every_values_file() {
    let chart = chart();
    let chart = chart.to_str().unwrap();
    ok(
        "helm lint --strict",
        helm(&["lint", "--strict", chart], &offline()),
    );
    for entry in std::fs::read_dir(root().join("charts/trainplace/ci")).unwrap() {
        let file = entry.unwrap().path();
        let file = file.to_str().unwrap();
        let out = ok(
            &format!("helm lint --strict -f {file}"),
            helm(&["lint", "--strict", chart, "-f", file], &offline()),
        );
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
}

#[test]
fn golden_template_output() {
    let dir = root().join("tests/fixtures/helm");
    let update = golden::update();
    for (name, args) in renderings() {
        let got = golden_form(&render(&args));
        let path = dir.join(format!("{name}.yaml"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            let first = got
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(got.lines().count().min(want.lines().count()));
            panic!(
                "helm template ({name}) differs from {} from line {}:\n  got:  {:?}\n  want: {:?}\nif intended: UPDATE_GOLDEN=1 cargo test --test helm_chart golden, and review the diff",
                path.display(),
                first + 1,
                got.lines().nth(first),
                want.lines().nth(first)
            );
        }
    }
}

/// Built-in API groups are validated strictly; anything else must be a kind the chart
/// is expected to render from a CRD (cert-manager, Prometheus Operator).
fn is_core(doc: &Value) -> bool {
    let api = doc["apiVersion"].as_str().unwrap();
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    [
        "",
        "apps",
        "batch",
        "policy",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
        "networking.k8s.io",
    ]
    .contains(&group)
}

#[test]
fn every_rendered_core_object_passes_strict_validation() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, args) in renderings() {
        let all = docs(&render(&args));
        let (core, crs): (Vec<&Value>, Vec<&Value>) = all.iter().partition(|d| is_core(d));
        for cr in &crs {
            let kind = cr["kind"].as_str().unwrap();
            let api = cr["apiVersion"].as_str().unwrap();
            assert!(
                (api == "cert-manager.io/v1" && ["Issuer", "Certificate"].contains(&kind))
                    || (api == "monitoring.coreos.com/v1"
                        && ["ServiceMonitor", "PrometheusRule"].contains(&kind)),
                "{name}: unexpected object {api} {kind}"
            );
        }
        let file = tmp.path().join(format!("{name}.yaml"));
        let yaml: Vec<String> = core
            .iter()
            .map(|d| serde_yaml_ng::to_string(d).unwrap())
            .collect();
        std::fs::write(&file, yaml.join("---\n")).unwrap();
        common::assert_strictly_valid(name, &[&file]);
    }
}

#[test]
fn the_policy_config_map_is_a_policy_directory_the_server_accepts() {
    for (name, args) in renderings() {
        let all = docs(&render(&args));
        let cm = find(&all, "ConfigMap", "trainplace-policy");
        let dir = tempfile::tempdir().unwrap();
        for (file, content) in cm["data"].as_object().unwrap() {
            std::fs::write(dir.path().join(file), content.as_str().unwrap()).unwrap();
        }
        let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["policy", "check"])
            .arg(dir.path())
            .output()
            .unwrap();
        ok(&format!("trainplace policy check ({name})"), out);
    }
    // The defaults are the shipped files, byte for byte.
    let all = docs(&render(&[]));
    let cm = find(&all, "ConfigMap", "trainplace-policy");
    for file in ["default.yaml", "instances.yaml"] {
        assert_eq!(
            cm["data"][file].as_str().unwrap(),
            std::fs::read_to_string(root().join("policies").join(file)).unwrap(),
            "{file}"
        );
    }
}

fn find<'a>(all: &'a [Value], kind: &str, name: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendering"))
}

/// The chart carries copies of the policy files and the guardrail policies (links made
/// helm warn on every command), each equal to its source in the repository: a copy that
/// drifts fails here. `scripts/export-vap.sh` writes both policies files; the policy
/// files are copied with `cp policies/*.yaml charts/trainplace/files/policies/`.
#[test]
fn chart_files_equal_the_repository_sources_and_helm_warns_of_nothing() {
    let copies = [
        ("files/policies/default.yaml", "policies/default.yaml"),
        ("files/policies/instances.yaml", "policies/instances.yaml"),
        (
            "files/validating-admission-policies.yaml",
            "manifests/overlays/guardrails/validating-admission-policies.yaml",
        ),
    ];
    for (copy, source) in copies {
        let path = chart().join(copy);
        assert!(
            !std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink(),
            "charts/trainplace/{copy} is a file, not a link (helm warns of links)"
        );
        assert!(
            std::fs::read(&path).unwrap() == std::fs::read(root().join(source)).unwrap(),
            "charts/trainplace/{copy} differs from {source}: copy it again"
        );
    }
    let out = helm(
        &[
            "template",
            "trainplace",
            chart().to_str().unwrap(),
            "-n",
            "trainplace",
        ],
        &offline(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("symbolic link"),
        "helm warns: {}",
        text(&out.stderr)
    );
}

/// Helm's bookkeeping, which kustomize does not write: dropped before comparing.
fn without_helm_bookkeeping(mut doc: Value) -> Value {
    let meta = doc["metadata"].as_object_mut().unwrap();
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        for k in [
            "app.kubernetes.io/instance",
            "app.kubernetes.io/version",
            "app.kubernetes.io/managed-by",
            "helm.sh/chart",
        ] {
            labels.remove(k);
        }
    }
    if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        ann.retain(|k, _| !k.starts_with("helm.sh/"));
        if ann.is_empty() {
            meta.remove("annotations");
        }
    }
    doc
}

fn by_name(all: Vec<Value>) -> BTreeMap<(String, String), Value> {
    all.into_iter()
        .map(|d| {
            let key = (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            );
            (key, d)
        })
        .collect()
}

/// `kubectl kustomize DIR`, offline.
fn kustomize(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .env("KUBECONFIG", dir.join("no-such-kubeconfig"))
        .output()
        .expect("kubectl is installed (scripts/test-deps.sh checks it)");
    docs(&ok(&format!("kubectl kustomize {}", dir.display()), out))
}

/// One source of truth: each kustomize overlay is the chart's output under the values
/// named here (manifests/README.md). The overlays stay for kustomize users; a change to
/// either side without the other fails here.
#[test]
fn kustomize_overlays_equal_the_chart() {
    let base = ci_values("kustomize-cert-manager-values.yaml");
    let cases: [(&str, Vec<&str>); 4] = [
        ("cert-manager", vec!["-f", &base]),
        (
            "self-managed",
            vec!["-f", &base, "--set", "certificates.mode=self-managed"],
        ),
        (
            "fail-closed",
            vec!["-f", &base, "--set", "webhooks.mutate.failurePolicy=Fail"],
        ),
        // The guardrails overlay is the chart's ValidatingAdmissionPolicies alone.
        (
            "guardrails",
            vec!["-f", &base, "--set", "guardrails.enabled=true"],
        ),
    ];
    for (overlay, args) in cases {
        let want = by_name(kustomize(&root().join("manifests/overlays").join(overlay)));
        let mut got = by_name(
            docs(&template(&args).unwrap())
                .into_iter()
                .map(without_helm_bookkeeping)
                .collect(),
        );
        if overlay == "guardrails" {
            got.retain(|(kind, _), _| kind.starts_with("ValidatingAdmissionPolicy"));
        }
        let (w, g): (Vec<_>, Vec<_>) = (want.keys().collect(), got.keys().collect());
        assert_eq!(w, g, "{overlay}: the same objects");
        for (key, object) in &want {
            assert!(
                *object == got[key],
                "{overlay}: {key:?} differs:\nkustomize: {}\nchart:     {}",
                serde_json::to_string_pretty(object).unwrap(),
                serde_json::to_string_pretty(&got[key]).unwrap()
            );
        }
    }
}

#[test]
fn typos_and_refused_modes_fail_with_a_reason() {
    let cases: [(&[&str], &str); 9] = [
        (
            &["--set", "replicaCount=2"],
            "additional properties 'replicaCount' not allowed",
        ),
        (
            &["--set", "webhooks.mutate.failurPolicy=Fail"],
            "additional properties 'failurPolicy' not allowed",
        ),
        (
            &["--set", "webhooks.validate.failurePolicy=fail"],
            "value must be one of 'Ignore', 'Fail'",
        ),
        (
            &["--set", "webhooks.validate.timeoutSeconds=31"],
            "/webhooks/validate/timeoutSeconds",
        ),
        (&["--set", "certificates.mode=vault"], "/certificates/mode"),
        (
            &["--set", "certificates.selfManaged.caLifetime=1y"],
            "/certificates/selfManaged/caLifetime",
        ),
        (
            &["--set", "certificates.selfManaged.certLifetime=90"],
            "/certificates/selfManaged/certLifetime",
        ),
        (
            &["--set", "certificates.mode=provided"],
            "needs certificates.provided.caBundle",
        ),
        (
            &["--set", "markKeys.initialKeyId=k.1"],
            "/markKeys/initialKeyId",
        ),
    ];
    for (args, reason) in cases {
        let err = template(args).expect_err(&format!("{args:?} must fail"));
        assert!(err.contains(reason), "{args:?}: {err}");
    }
}

#[test]
fn webhook_values_reach_both_configurations() {
    let all = docs(&render(&[
        "-f".into(),
        ci_values("all-features-values.yaml"),
    ]));
    let m = &find(&all, "MutatingWebhookConfiguration", "trainplace")["webhooks"][0];
    let v = &find(&all, "ValidatingWebhookConfiguration", "trainplace")["webhooks"][0];
    assert_eq!(
        (&m["failurePolicy"], &m["timeoutSeconds"]),
        (&json!("Fail"), &json!(3))
    );
    assert_eq!(
        (&v["failurePolicy"], &v["timeoutSeconds"]),
        (&json!("Fail"), &json!(10))
    );
    for w in [m, v] {
        assert_eq!(
            w["namespaceSelector"],
            json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                 "values": ["kube-system", "kube-node-lease", "trainplace", "monitoring", "argo-cd"]},
                {"key": "platform.example.com/trainplace", "operator": "NotIn", "values": ["disabled"]},
                {"key": "platform.example.com/team", "operator": "Exists"},
            ]})
        );
        assert_eq!(
            w["objectSelector"],
            json!({"matchExpressions": [
                {"key": "platform.example.com/exempt", "operator": "DoesNotExist"}]})
        );
        let ca = base64::engine::general_purpose::STANDARD
            .decode(w["clientConfig"]["caBundle"].as_str().unwrap())
            .unwrap();
        assert!(text(&ca).contains("placeholder CA"));
        assert_eq!(m["rules"], v["rules"]);
        assert_eq!(m["matchConditions"], v["matchConditions"]);
    }
    // hostNetwork, its ports and the securityContext overrides reach the Deployment.
    let d = find(&all, "Deployment", "trainplace");
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(
        (&spec["hostNetwork"], &spec["dnsPolicy"]),
        (&json!(true), &json!("ClusterFirstWithHostNet"))
    );
    assert_eq!(spec["securityContext"]["fsGroup"], 65532);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let c = &spec["containers"][0];
    assert_eq!(c["ports"][0]["containerPort"], 10443);
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "TRAINPLACE_ADDR", "value": "0.0.0.0:10443"}))
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    // The audit CronJob runs the audit with its own ServiceAccount.
    let cron = find(&all, "CronJob", "trainplace-audit");
    let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "trainplace-audit");
    assert_eq!(
        pod["containers"][0]["args"],
        json!(["audit", "--write-reports", "--exit-zero"])
    );

    // Self-managed (the default): no webhook configuration in the rendering; the server
    // registers the ones of the ConfigMap, which are the chart's own rendering of them.
    let default = docs(&render(&[]));
    assert!(
        !default.iter().any(|d| d["kind"]
            .as_str()
            .unwrap()
            .ends_with("WebhookConfiguration")),
        "the default install renders no webhook configuration"
    );
    let file = find(&default, "ConfigMap", "trainplace-webhooks")["data"]["webhooks.yaml"]
        .as_str()
        .unwrap()
        .to_string();
    let by_chart = docs(&render(&[
        "--set".into(),
        "webhooks.registeredBy=chart".into(),
    ]));
    for (i, kind) in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            docs(&file)[i],
            *find(&by_chart, kind, "trainplace"),
            "{kind}"
        );
    }
    let env = find(&default, "Deployment", "trainplace")["spec"]["template"]["spec"]["containers"]
        [0]["env"]
        .clone();
    for e in [
        json!({"name": "TRAINPLACE_REGISTER_WEBHOOKS", "value": "/etc/trainplace/webhooks/webhooks.yaml"}),
        json!({"name": "TRAINPLACE_WEBHOOK_OWNER", "value": "trainplace-certificates"}),
    ] {
        assert!(env.as_array().unwrap().contains(&e), "{e} in {env}");
    }

    // kube-system stays excluded whatever the values say.
    let all = docs(&render(&[
        "--set".into(),
        "webhooks.excludeNamespaces={kube-system,ml-infra}".into(),
        "--set".into(),
        "webhooks.registeredBy=chart".into(),
    ]));
    let v = &find(&all, "ValidatingWebhookConfiguration", "trainplace")["webhooks"][0];
    assert_eq!(
        v["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", "kube-node-lease", "trainplace", "ml-infra"])
    );
    // The Deployment mounts the mark keys on every replica and names them to the server.
    let d = find(&all, "Deployment", "trainplace");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert!(
        c["env"].as_array().unwrap().contains(
            &json!({"name": "TRAINPLACE_MARK_KEYS", "value": "/etc/trainplace/mark-keys"})
        )
    );
    assert!(
        d["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .contains(
                &json!({"name": "mark-keys", "secret": {"secretName": "trainplace-mark-keys"}})
            )
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        d["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
        true
    );
}

// ---- against the sandbox's real API server ----

struct Release<'a> {
    sb: &'a sandbox::Sandbox,
    name: &'a str,
    ns: &'a str,
}

impl Release<'_> {
    fn helm(&self, args: &[&str]) -> Output {
        let mut a = args.to_vec();
        a.extend(["-n", self.ns]);
        helm(&a, &self.sb.kubeconfig)
    }

    fn fullname(&self) -> String {
        format!("{}-trainplace", self.name)
    }
}

/// A test that fails part way leaves no install behind: the next install test would be
/// refused beside it (one trainplace install per cluster) and fail for this one's
/// reason. The release goes, and the webhook configurations its replicas registered
/// (cluster-wide, owned by a ClusterRole the garbage collector may not have reached).
impl Drop for Release<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let _ = self.helm(&["uninstall", self.name, "--wait", "--timeout", "60s"]);
        for kind in WEBHOOK_KINDS {
            let _ = self
                .sb
                .kubectl(&["delete", kind, &self.fullname(), "--ignore-not-found"]);
        }
    }
}

/// The Event and namespace-metric values reach `trainplace serve` as the environment
/// its flags read (each name one that `trainplace serve --help` lists); by default only
/// the pod's name (the Events' reporting instance) is set, and the server's defaults hold.
#[test]
fn event_values_reach_the_servers_flags() {
    let env_of = |args: &[String]| -> BTreeMap<String, Value> {
        let all = docs(&render(args));
        let deploy = find(&all, "Deployment", "trainplace");
        deploy["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
            .collect()
    };
    let set = |s: &str| vec!["--set".to_string(), s.to_string()];
    let default = env_of(&[]);
    assert_eq!(
        default["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    for name in [
        "TRAINPLACE_NO_EVENTS",
        "TRAINPLACE_EVENT_BURST",
        "TRAINPLACE_EVENT_RATE",
        "TRAINPLACE_METRICS_NAMESPACES",
    ] {
        assert!(!default.contains_key(name), "{name} by default");
    }
    let off = env_of(&set("events.enabled=false"));
    assert_eq!(off["TRAINPLACE_NO_EVENTS"]["value"], "true");
    let tuned = env_of(
        &[
            set("events.burst=10"),
            set("events.perMinute=0"),
            set("metrics.namespaces=50"),
        ]
        .concat(),
    );
    assert_eq!(tuned["TRAINPLACE_EVENT_BURST"]["value"], "10");
    assert_eq!(tuned["TRAINPLACE_EVENT_RATE"]["value"], "0");
    assert_eq!(tuned["TRAINPLACE_METRICS_NAMESPACES"]["value"], "50");
    let help = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = text(&help.stdout);
    for name in [
        "TRAINPLACE_NO_EVENTS",
        "TRAINPLACE_EVENT_BURST",
        "TRAINPLACE_EVENT_RATE",
        "TRAINPLACE_METRICS_NAMESPACES",
    ] {
        assert!(
            help.contains(&format!("[env: {name}")),
            "{name} is a serve flag"
        );
    }
    assert!(
        template(&["--set", "events.burst=0"]).is_err(),
        "a burst of 0 refused"
    );
}

/// A CA and a serving certificate for provided mode, as a values file.
fn provided_values(dir: &Path) -> PathBuf {
    let pki = common::Pki::new("helm-chart-test-ca");
    let (crt, key) = pki.write_leaf(dir);
    let values = json!({
        "certificates": {
            "mode": "provided",
            "provided": {
                "caBundle": pki.ca_pem,
                "tlsCrt": std::fs::read_to_string(crt).unwrap(),
                "tlsKey": std::fs::read_to_string(key).unwrap(),
            }
        }
    });
    let path = dir.join("provided.yaml");
    std::fs::write(&path, serde_yaml_ng::to_string(&values).unwrap()).unwrap();
    path
}

/// A control plane of its own, without trainplace registered: a release refuses to
/// install beside another trainplace install, and the shared control plane of
/// tests/cluster/ has one (manifests/base's webhook configurations and RBAC).
fn sb() -> &'static sandbox::Sandbox {
    sandbox::own("helm_chart", &[("SANDBOX_WEBHOOK", "0")])
}

/// The tests that install a release into the sandbox run one at a time: a release
/// refuses to install beside another trainplace install (webhook configurations are
/// cluster-wide), and the releases of these tests are such installs to each other.
fn one_install_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn install_upgrade_uninstall_in_the_sandbox() {
    let sb = sb();
    let _one = one_install_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let provided = provided_values(tmp.path());
    let provided = provided.to_str().unwrap();
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let rel = Release {
        sb,
        name: "tph",
        ns: "tp-helm",
    };
    let full = rel.fullname();
    // The namespace exists first (helm stores the release in it); the chart takes it over
    // to set its Pod Security labels.
    sb.ok(&["create", "namespace", rel.ns]);
    // Two replicas on the two untainted system nodes (one per node, DoNotSchedule): kwok
    // plays their kubelet, so --wait sees them Ready.
    let install = [
        "install",
        rel.name,
        chart,
        "--take-ownership",
        "-f",
        provided,
        "--set",
        "namespace.manage=true",
        "--set",
        "replicas=2",
        "--set",
        "nodeSelector.eks\\.amazonaws\\.com/nodegroup=system",
        "--set",
        "guardrails.enabled=true",
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "webhooks.excludeNamespaceLabel.key=platform.example.com/trainplace",
        "--wait",
        "--timeout",
        "120s",
    ];
    ok("helm install", rel.helm(&install));

    // The namespace enforces restricted, and the webhook's pods were admitted under it.
    let ns = sb.json(&["get", "namespace", rel.ns]);
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let pods = sb.pods(rel.ns, "app.kubernetes.io/component=webhook");
    assert_eq!(pods.len(), 2, "{pods:?}");
    let nodes: std::collections::BTreeSet<&str> = pods
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes,
        ["system-us-east-1a-0", "system-us-east-1b-0"].into(),
        "one replica per system node"
    );
    for (kind, name) in [
        ("deployment", full.as_str()),
        ("service", full.as_str()),
        ("serviceaccount", full.as_str()),
        ("poddisruptionbudget", full.as_str()),
        ("networkpolicy", full.as_str()),
        ("configmap", &format!("{full}-policy")),
        ("secret", &format!("{full}-tls")),
    ] {
        sb.ok(&["-n", rel.ns, "get", kind, name]);
    }
    for kind in ["clusterrole", "clusterrolebinding"] {
        sb.ok(&["get", kind, &full]);
    }
    // One mark key of 32 bytes, shared by every replica through the same Secret.
    let keys_name = format!("{full}-mark-keys");
    let keys = sb.json(&["-n", rel.ns, "get", "secret", &keys_name])["data"].clone();
    let initial = keys["00-initial"].as_str().unwrap().to_string();
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&initial)
            .unwrap()
            .len(),
        32
    );
    assert_eq!(keys.as_object().unwrap().len(), 1);

    // The webhook configurations are registered: a GPU pod in an ordinary namespace is
    // sent to the chart's Service (nothing answers there: kwok runs no container), so the
    // validating webhook's failurePolicy Fail refuses it naming webhook and Service.
    let gpu_pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu"},
        "spec": {"containers": [{"name": "c", "image": "x",
                 "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    })
    .to_string();
    let dry_run = |ns: &str| {
        sb.kubectl_stdin(
            &["-n", ns, "create", "--dry-run=server", "-f", "-"],
            Some(&gpu_pod),
        )
    };
    let plain = sb.namespace("plain");
    let refused = dry_run(&plain);
    assert!(
        !refused.status.success(),
        "no webhook answers, Fail refuses"
    );
    let err = sandbox::stderr(&refused);
    assert!(
        err.contains("failed calling webhook \"validate.trainplace.io\"")
            && err.contains(&format!("{full}.{}.svc:443/validate", rel.ns)),
        "{err}"
    );
    // Excluded by the platform's namespace label, and kube-system always: not sent.
    let labelled = sb.namespace("labelled");
    sb.ok(&[
        "label",
        "namespace",
        &labelled,
        "platform.example.com/trainplace=disabled",
    ]);
    for ns in [labelled.as_str(), "kube-system"] {
        let out = dry_run(ns);
        assert!(out.status.success(), "{ns}: {}", sandbox::stderr(&out));
    }
    // The caBundle is the provided CA.
    let vwc = sb.json(&["get", "validatingwebhookconfiguration", &full]);
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            vwc["webhooks"][0]["clientConfig"]["caBundle"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    assert!(text(&ca).contains("BEGIN CERTIFICATE"));

    // The guardrail ValidatingAdmissionPolicies are accepted and in force: a partial-node
    // job is refused by the API server itself (in the labelled namespace, which the
    // chart's webhooks do not see).
    // The embedded policy's export: one policy of every rule, and its binding.
    for kind in [
        "validatingadmissionpolicy",
        "validatingadmissionpolicybinding",
    ] {
        sb.ok(&[
            "get",
            kind,
            "trainplace-partial-node.multi-az.impossible-request",
        ]);
    }
    let job = sandbox::corpus::placed(
        &sandbox::corpus::fixture("workloads/job-one-gpu.yaml"),
        &labelled,
    );
    sandbox::wait_until(Duration::from_secs(30), "the guardrails in force", || {
        sandbox::corpus::dry_run(sb, &job).is_err_and(|e| e.contains("[partial-node]"))
    });

    // Upgrade: a key added for a rotation survives (lookup keeps what the cluster holds),
    // per-webhook values and exclusions change in place.
    let rotated = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    sb.ok(&[
        "-n",
        rel.ns,
        "patch",
        "secret",
        &keys_name,
        "--type=merge",
        "-p",
        &json!({"data": {"2026-11-26": rotated}}).to_string(),
    ]);
    let mut upgrade = install.to_vec();
    upgrade[0] = "upgrade";
    upgrade.retain(|a| *a != "--take-ownership");
    upgrade.extend([
        "--set",
        "webhooks.validate.timeoutSeconds=3",
        "--set",
        "webhooks.excludeNamespaces={ml-infra}",
    ]);
    ok("helm upgrade", rel.helm(&upgrade));
    let keys = sb.json(&["-n", rel.ns, "get", "secret", &keys_name])["data"].clone();
    assert_eq!(
        keys,
        json!({"00-initial": initial, "2026-11-26": rotated}),
        "the upgrade kept both keys"
    );
    let vwc = sb.json(&["get", "validatingwebhookconfiguration", &full]);
    assert_eq!(vwc["webhooks"][0]["timeoutSeconds"], 3);
    assert_eq!(
        vwc["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", "kube-node-lease", rel.ns, "ml-infra"])
    );
    let history = ok("helm history", rel.helm(&["history", rel.name]));
    assert!(history.contains("Upgrade complete"), "{history}");
    // Rollback to the first revision: its webhook values again, and (helm replays the
    // revision's stored manifest; lookup is not run again) its key set: the key added
    // after it is gone (charts/trainplace/README.md says so). An upgrade records what
    // the cluster holds again.
    ok(
        "helm rollback",
        rel.helm(&["rollback", rel.name, "1", "--wait", "--timeout", "120s"]),
    );
    let vwc = sb.json(&["get", "validatingwebhookconfiguration", &full]);
    assert_eq!(vwc["webhooks"][0]["timeoutSeconds"], 5);
    let keys_now = sb.json(&["-n", rel.ns, "get", "secret", &keys_name])["data"].clone();
    assert_eq!(
        keys_now,
        json!({"00-initial": initial}),
        "a rollback restores the revision's keys"
    );

    // Uninstall: everything the release made is gone, cluster-scoped objects too; the
    // namespace stays (it holds what helm does not own) with its labels.
    ok(
        "helm uninstall",
        rel.helm(&["uninstall", rel.name, "--wait"]),
    );
    for (kind, name) in [
        ("validatingwebhookconfiguration", full.clone()),
        ("mutatingwebhookconfiguration", full.clone()),
        ("clusterrole", full.clone()),
        ("clusterrolebinding", full.clone()),
        (
            "validatingadmissionpolicy",
            "trainplace-partial-node.multi-az.impossible-request".to_string(),
        ),
    ] {
        let out = sb.kubectl(&["get", kind, &name]);
        assert!(
            !out.status.success() && sandbox::stderr(&out).contains("NotFound"),
            "{kind} {name} left behind"
        );
    }
    for kind in ["deployment", "service", "secret", "configmap"] {
        let out = sb.kubectl(&["-n", rel.ns, "get", kind, &full]);
        assert!(!out.status.success(), "{kind} {full} left behind");
    }
    let ns = sb.json(&["get", "namespace", rel.ns]);
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    // And the GPU pod is admitted again: no webhook of the release is registered.
    let out = dry_run(&plain);
    assert!(out.status.success(), "{}", sandbox::stderr(&out));
}

#[test]
fn a_values_typo_fails_install_and_creates_nothing() {
    let sb = sb();
    let _one = one_install_at_a_time();
    let ns = sb.namespace("tp-typo");
    let chart = chart();
    let rel = Release {
        sb,
        name: "typo",
        ns: &ns,
    };
    let tmp = tempfile::tempdir().unwrap();
    let provided = provided_values(tmp.path());
    for (set, reason) in [
        ("replica=2", "additional properties 'replica' not allowed"),
        (
            "certificates.provided.caBundle=",
            "needs certificates.provided.caBundle",
        ),
    ] {
        let out = rel.helm(&[
            "install",
            rel.name,
            chart.to_str().unwrap(),
            "-f",
            provided.to_str().unwrap(),
            "--set",
            set,
        ]);
        assert!(!out.status.success(), "{set}: install must fail");
        assert!(
            sandbox::stderr(&out).contains(reason),
            "{set}: {}",
            sandbox::stderr(&out)
        );
    }
    let list = ok("helm list", rel.helm(&["list", "-a", "-q"]));
    assert_eq!(list.trim(), "", "no release recorded");
    let out = sb.kubectl(&["get", "validatingwebhookconfiguration", &rel.fullname()]);
    assert!(!out.status.success(), "no webhook registered");
    let all = sb.ok(&[
        "-n",
        &ns,
        "get",
        "deployments,secrets,configmaps",
        "-o",
        "name",
    ]);
    assert!(
        !all.contains(&rel.fullname()),
        "nothing of the release: {all}"
    );
}

/// Self-managed with the chart registering the webhooks (webhooks.registeredBy=chart, as
/// the kustomize overlay has it): its RBAC objects are there, the webhook configurations
/// carry no caBundle and no cainjector annotation (the server writes the caBundle), and a
/// caBundle written into them, as the server does, survives `helm upgrade` (the chart
/// never sets the field, so Helm's three-way merge leaves it).
#[test]
fn the_default_self_managed_install_keeps_the_ca_bundle_through_an_upgrade() {
    let sb = sb();
    let _one = one_install_at_a_time();
    let ns = sb.namespace("tp-self");
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let rel = Release {
        sb,
        name: "tpsm",
        ns: &ns,
    };
    let full = rel.fullname();
    // failurePolicy Ignore on both: this release's webhooks must not refuse the other
    // tests' pods (kwok runs its pods, not the server).
    ok(
        "helm install (defaults)",
        rel.helm(&[
            "install",
            rel.name,
            chart,
            "--set",
            "replicas=1",
            "--set",
            "webhooks.validate.failurePolicy=Ignore",
            "--set",
            "webhooks.registeredBy=chart",
            "--wait",
            "--timeout",
            "120s",
        ]),
    );
    let certs = format!("{full}-certificates");
    sb.ok(&["-n", &ns, "get", "role", &certs]);
    sb.ok(&["-n", &ns, "get", "rolebinding", &certs]);
    sb.ok(&["get", "clusterrole", &certs]);
    sb.ok(&["get", "clusterrolebinding", &certs]);
    let deploy = sb.json(&["-n", &ns, "get", "deployment", &full]);
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "TRAINPLACE_SELF_MANAGED_CERTS" && e["value"] == "true"),
        "{env}"
    );
    let kinds = [
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ];
    let pki = common::Pki::new("helm-self-managed-test-ca");
    let b64 = base64::engine::general_purpose::STANDARD.encode(&pki.ca_pem);
    for kind in kinds {
        let w = sb.json(&["get", kind, &full]);
        assert!(
            w["metadata"]["annotations"]
                .get("cert-manager.io/inject-ca-from")
                .is_none()
        );
        assert!(
            w["webhooks"][0]["clientConfig"].get("caBundle").is_none(),
            "{w}"
        );
        let name = w["webhooks"][0]["name"].as_str().unwrap().to_string();
        let patch = json!({"webhooks": [{"name": name, "clientConfig": {"caBundle": b64}}]});
        sb.ok(&[
            "patch",
            kind,
            &full,
            "--type=strategic",
            "-p",
            &patch.to_string(),
        ]);
    }
    ok(
        "helm upgrade",
        rel.helm(&[
            "upgrade",
            rel.name,
            chart,
            "--reuse-values",
            "--set",
            "reloadInterval=3s",
            "--wait",
            "--timeout",
            "120s",
        ]),
    );
    for kind in kinds {
        let w = sb.json(&["get", kind, &full]);
        assert_eq!(w["webhooks"][0]["clientConfig"]["caBundle"], b64, "{kind}");
    }
    ok(
        "helm uninstall",
        rel.helm(&["uninstall", rel.name, "--wait"]),
    );
    assert!(!sb.kubectl(&["get", "clusterrole", &certs]).status.success());
}

/// The objects of a YAML file under examples/.
fn example(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("examples").join(name)).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// A kubeconfig that is the sandbox admin impersonating the ServiceAccount `ns/name`
/// with its groups: a local `trainplace serve` then has exactly the release's RBAC.
fn impersonating_kubeconfig(sb: &sandbox::Sandbox, ns: &str, name: &str, path: &Path) {
    let mut k: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&sb.kubeconfig).unwrap()).unwrap();
    for user in k["users"].as_array_mut().unwrap() {
        user["user"]["as"] = json!(format!("system:serviceaccount:{ns}:{name}"));
        user["user"]["as-groups"] = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ]);
    }
    std::fs::write(path, serde_yaml_ng::to_string(&k).unwrap()).unwrap();
}

/// A replica of an installed release, outside a pod: `trainplace serve` with the
/// Deployment's environment, as its ServiceAccount, registering the release's webhook
/// file, with clientConfig rewritten to call it on 127.0.0.1 when `by_url` (kwok runs
/// no container), else as the chart has it (the Service).
struct LocalReplica {
    child: std::process::Child,
    log: PathBuf,
    probe: u16,
}

impl LocalReplica {
    fn start(
        sb: &sandbox::Sandbox,
        ns: &str,
        full: &str,
        dir: &Path,
        by_url: bool,
    ) -> LocalReplica {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let probe = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let deploy = sb.json(&["-n", ns, "get", "deployment", full]);
        let env: Vec<(String, String)> = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_string(),
                    e["value"].as_str()?.to_string(),
                ))
            })
            .filter(|(k, _)| {
                ![
                    "TRAINPLACE_ADDR",
                    "TRAINPLACE_PROBE_ADDR",
                    "TRAINPLACE_POLICY_DIR",
                    "TRAINPLACE_MARK_KEYS",
                    "TRAINPLACE_REGISTER_WEBHOOKS",
                ]
                .contains(&k.as_str())
            })
            .collect();
        assert!(
            env.iter()
                .any(|(k, v)| k == "TRAINPLACE_WEBHOOK_OWNER"
                    && *v == format!("{full}-certificates")),
            "{env:?}"
        );
        let cm = sb.json(&["-n", ns, "get", "configmap", &format!("{full}-webhooks")]);
        let mut file = String::new();
        for mut doc in docs(cm["data"]["webhooks.yaml"].as_str().unwrap()) {
            for w in doc["webhooks"].as_array_mut().unwrap() {
                let path = w["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap()
                    .to_string();
                if by_url {
                    w["clientConfig"] = json!({"url": format!("https://127.0.0.1:{port}{path}")});
                }
            }
            file.push_str("---\n");
            file.push_str(&serde_yaml_ng::to_string(&doc).unwrap());
        }
        let hooks = dir.join("webhooks.yaml");
        std::fs::write(&hooks, file).unwrap();
        let kubeconfig = dir.join("replica.kubeconfig");
        impersonating_kubeconfig(sb, ns, full, &kubeconfig);
        let log_path = sb.dir.join(format!("{full}-replica-{port}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .envs(env)
            // Checks every 5 s (the serving lifetime / 30) instead of every minute.
            .env("TRAINPLACE_CERT_LIFETIME", "150s")
            .env("TRAINPLACE_LOG", "info")
            .env("KUBECONFIG", &kubeconfig)
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--probe-addr", &format!("127.0.0.1:{probe}")])
            .args(["--cert-extra-names", "127.0.0.1"])
            .arg("--mark-keys")
            .arg(sb.dir.join("pki/mark-keys"))
            .arg("--register-webhooks")
            .arg(&hooks)
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        LocalReplica {
            child,
            log: log_path,
            probe,
        }
    }

    /// What /readyz says about the registration (`detail.webhooks`).
    fn registration(&self) -> String {
        let out = Command::new("curl")
            .args(["-s", &format!("http://127.0.0.1:{}/readyz", self.probe)])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v["detail"]["webhooks"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for LocalReplica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const WEBHOOK_KINDS: [&str; 2] = [
    "mutatingwebhookconfiguration",
    "validatingwebhookconfiguration",
];

fn not_found(sb: &sandbox::Sandbox, kind: &str, name: &str) -> bool {
    let out = sb.kubectl(&["get", kind, name]);
    !out.status.success() && sandbox::stderr(&out).contains("NotFound")
}

/// Issue 41, the first hour. The default install (self-managed certificates, three
/// replicas, no nodeSelector) with two untainted system nodes and tainted GPU nodes:
/// `helm install --wait` completes (the hostname spread counts no tainted node). While no
/// trainplace serves, no webhook configuration is registered and a compliant GPU job is
/// admitted. Once a replica serves, it registers both with its CA and owned by the
/// release's ClusterRole: a 1-GPU Job and a 1-GPU training Deployment are refused at
/// apply time, and a deleted configuration comes back (no replica registers while its
/// Service has no ready endpoint). The audit CronJob's ServiceAccount can run `audit
/// --write-reports`. With every replica down the validating webhook fails closed. `helm
/// uninstall` leaves no configuration behind.
#[test]
fn the_default_install_refuses_nothing_until_a_replica_serves() {
    let sb = sb();
    let _one = one_install_at_a_time();
    let ns = sb.namespace("tp-first");
    let chart = chart();
    let rel = Release {
        sb,
        name: "first",
        ns: &ns,
    };
    let full = rel.fullname();
    // The webhooks judge only the namespace labelled for this test (a
    // webhooks.namespaceSelector term), so no other test's pod reaches them.
    let work = sb.namespace("first-work");
    sb.ok(&["label", "namespace", &work, "trainplace-test=first"]);
    ok(
        "helm install (defaults) --wait",
        rel.helm(&[
            "install",
            rel.name,
            chart.to_str().unwrap(),
            "--set",
            "webhooks.namespaceSelector.matchLabels.trainplace-test=first",
            "--set",
            "audit.cronJob.enabled=true",
            "--wait",
            "--timeout",
            "90s",
        ]),
    );
    let pods = sb.pods(&ns, "app.kubernetes.io/component=webhook");
    assert_eq!(pods.len(), 3, "the default three replicas");
    let nodes: std::collections::BTreeSet<&str> = pods
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap_or("<pending>"))
        .collect();
    assert_eq!(
        nodes,
        ["system-us-east-1a-0", "system-us-east-1b-0"].into(),
        "all three on the two system nodes"
    );

    // Installed, nothing serving: nothing registered, a compliant job admitted.
    for kind in WEBHOOK_KINDS {
        assert!(
            not_found(sb, kind, &full),
            "{kind} {full} registered before any replica serves"
        );
    }
    let good = sandbox::corpus::placed(&example("workloads/job.yaml"), &work);
    let one_gpu = sandbox::corpus::placed(
        &sandbox::corpus::fixture("workloads/job-one-gpu.yaml"),
        &work,
    );
    if let Err(e) = sandbox::corpus::dry_run(sb, &good) {
        panic!("a compliant job refused right after helm install: {e}");
    }

    // What the release's ServiceAccount may do to webhook configurations: create and
    // patch its own two by name, nothing else.
    let sa = format!("system:serviceaccount:{ns}:{full}");
    let can = |verb: &str, what: &str| {
        sb.kubectl(&["auth", "can-i", verb, what, "--as", &sa])
            .stdout
            .starts_with(b"yes")
    };
    for kind in WEBHOOK_KINDS {
        assert!(can("create", &format!("{kind}/{full}")), "{kind}");
        assert!(can("patch", &format!("{kind}/{full}")), "{kind}");
        assert!(!can("create", &format!("{kind}/other")), "{kind}/other");
        assert!(!can("delete", &format!("{kind}/{full}")), "{kind} delete");
    }
    assert!(!can("create", "validatingwebhookconfigurations"));

    // A replica that serves while its Service has no ready endpoint (every pod gone)
    // registers nothing: the API server would find no one to call.
    let owner = format!("{full}-certificates");
    sb.ok(&["-n", &ns, "scale", "deployment", &full, "--replicas=0"]);
    sandbox::wait_until(Duration::from_secs(60), "no replica pod", || {
        sb.pods(&ns, "app.kubernetes.io/component=webhook")
            .is_empty()
    });
    // What the replica reads: the Service's EndpointSlices, which the endpoint-slice
    // controller updates after the pods are gone. A replica started in between sees a
    // ready endpoint and rightly registers (CI saw it once).
    sandbox::wait_until(
        Duration::from_secs(60),
        "no ready endpoint in the Service's EndpointSlices",
        || {
            let selector = format!("kubernetes.io/service-name={full}");
            let slices = sb.json(&["-n", &ns, "get", "endpointslices", "-l", &selector]);
            !slices["items"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
                .any(|e| e["conditions"]["ready"] == true)
        },
    );
    let gated_dir = tempfile::tempdir().unwrap();
    let gated = LocalReplica::start(sb, &ns, &full, gated_dir.path(), false);
    sandbox::wait_until(
        Duration::from_secs(30),
        "the replica waiting for an endpoint",
        || {
            gated
                .log()
                .contains("the Service has no ready endpoint yet")
                && gated.registration()
                    == "not registered yet: the Service has no ready endpoint yet"
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    for kind in WEBHOOK_KINDS {
        assert!(
            not_found(sb, kind, &full),
            "{kind} registered with no endpoint"
        );
    }
    // Endpoints again (kwok's pods are ready): registered, calling the Service.
    sb.ok(&["-n", &ns, "scale", "deployment", &full, "--replicas=3"]);
    sandbox::wait_until(
        Duration::from_secs(60),
        "registered once the Service has endpoints",
        || {
            let out = sb.kubectl(&["get", "validatingwebhookconfiguration", &full, "-o", "json"]);
            out.status.success()
                && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|w| {
                    w["webhooks"][0]["clientConfig"]["service"]["name"] == full.as_str()
                        && w["metadata"]["ownerReferences"][0]["name"] == owner.as_str()
                })
        },
    );
    drop(gated);

    // A replica the API server can reach serves: it registers both configurations with
    // its CA (calling it by URL here).
    let tmp = tempfile::tempdir().unwrap();
    let replica = LocalReplica::start(sb, &ns, &full, tmp.path(), true);
    let registered = || {
        WEBHOOK_KINDS.iter().all(|kind| {
            let out = sb.kubectl(&["get", kind, &full, "-o", "json"]);
            out.status.success()
                && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|w| {
                    w["metadata"]["ownerReferences"][0]["name"] == owner.as_str()
                        && w["webhooks"][0]["clientConfig"]["url"].is_string()
                        && w["webhooks"][0]["clientConfig"].get("service").is_none()
                        && w["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainplace"
                        && w["webhooks"][0]["clientConfig"]["caBundle"]
                            .as_str()
                            .is_some_and(|b| !b.is_empty())
                })
        })
    };
    sandbox::wait_until(
        Duration::from_secs(60),
        "the replica registers both configurations",
        registered,
    );
    assert!(
        replica
            .registration()
            .starts_with("registered: MutatingWebhookConfiguration"),
        "{}",
        replica.registration()
    );
    let vwc = sb.json(&["get", "validatingwebhookconfiguration", &full]);
    assert_eq!(vwc["webhooks"][0]["failurePolicy"], "Fail");
    assert_eq!(
        vwc["webhooks"][0]["namespaceSelector"]["matchLabels"],
        json!({"trainplace-test": "first"})
    );
    let mut last = String::new();
    sandbox::wait_until(Duration::from_secs(30), "the 1-GPU job refused", || {
        match sandbox::corpus::dry_run(sb, &one_gpu) {
            Ok(_) => false,
            Err(e) => {
                last = e;
                last.contains("partial-node")
            }
        }
    });
    if let Err(e) = sandbox::corpus::dry_run(sb, &good) {
        panic!("a compliant job refused while a replica serves: {e}");
    }
    // A 1-GPU training Deployment is refused by `kubectl apply` itself, not after its
    // ReplicaSet fails to make pods.
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": work},
        "spec": {"replicas": 8, "selector": {"matchLabels": {"app": "trainer"}},
            "template": {"metadata": {"labels": {"app": "trainer"}},
                "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                    "containers": [{"name": "trainer", "image": "pytorch",
                        "command": ["torchrun"], "args": ["--nnodes=8", "train.py"],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    });
    let applied = sb.apply(&work, &deployment.to_string());
    assert!(!applied.status.success(), "a 1-GPU Deployment applied");
    let err = sandbox::stderr(&applied);
    assert!(
        err.contains("validate.trainplace.io") && err.contains("partial-node"),
        "{err}"
    );
    assert!(
        !sb.kubectl(&["-n", &work, "get", "deployment", "trainer"])
            .status
            .success()
    );
    // Drift: a deleted configuration is registered again.
    sb.ok(&["delete", "validatingwebhookconfiguration", &full]);
    sandbox::wait_until(
        Duration::from_secs(30),
        "the configuration registered again",
        registered,
    );

    // The audit CronJob's ServiceAccount may do what `trainplace audit --write-reports`
    // does: run as it, the audit reads the cluster and writes the reports.
    sb.ok(&["-n", &ns, "get", "cronjob", &format!("{full}-audit")]);
    let mut suspended = good.clone();
    suspended["spec"]["suspend"] = json!(true);
    suspended["metadata"]["name"] = json!("suspended");
    let created = sb.kubectl_stdin(&["create", "-f", "-"], Some(&suspended.to_string()));
    assert!(created.status.success(), "{}", sandbox::stderr(&created));
    let auditor = tmp.path().join("audit.kubeconfig");
    impersonating_kubeconfig(sb, &ns, &format!("{full}-audit"), &auditor);
    let audit = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["audit", "--write-reports", "--exit-zero", "-n", &work])
        .env("KUBECONFIG", &auditor)
        .env_remove("TRAINPLACE_POLICY_DIR")
        .output()
        .unwrap();
    assert!(
        audit.status.success(),
        "audit as the CronJob's ServiceAccount: {}",
        sandbox::stderr(&audit)
    );
    assert!(
        sandbox::stderr(&audit).contains(&format!("policyreport {work}/trainplace: written")),
        "{}",
        sandbox::stderr(&audit)
    );

    // Every replica down: the validating webhook fails closed (docs/install.md, "What
    // holds when"; the TrainplaceWebhookUnreachable alert).
    drop(replica);
    let refused = sandbox::corpus::dry_run(sb, &good).expect_err("fails closed with no replica");
    assert!(refused.contains("failed calling webhook"), "{refused}");

    // Uninstall: the ClusterRole goes, and the garbage collector takes its dependents.
    ok(
        "helm uninstall",
        rel.helm(&["uninstall", rel.name, "--wait"]),
    );
    sandbox::wait_until(Duration::from_secs(60), "no configuration left", || {
        WEBHOOK_KINDS.iter().all(|kind| not_found(sb, kind, &full))
    });
    if let Err(e) = sandbox::corpus::dry_run(sb, &good) {
        panic!("a compliant job refused after helm uninstall: {e}");
    }
}

/// Issue 41: the documented `helm install --take-ownership` over an existing kustomize
/// install (the sandbox's: its namespace and RBAC, and here its webhook configurations)
/// refuses before it creates or takes anything, and says what to do; without the
/// webhook configurations, it still refuses to take the install's ClusterRole.
#[test]
fn installing_over_a_foreign_install_refuses_clearly() {
    let sb = sb();
    let _one = one_install_at_a_time();
    // manifests/overlays/self-managed's webhook configurations, judging nothing here
    // (failurePolicy Ignore, a namespaceSelector no namespace matches).
    let mut foreign: Vec<Value> = kustomize(&root().join("manifests/overlays/self-managed"))
        .into_iter()
        .filter(|d| {
            d["kind"]
                .as_str()
                .unwrap()
                .ends_with("WebhookConfiguration")
        })
        .collect();
    assert_eq!(foreign.len(), 2);
    for doc in &mut foreign {
        for w in doc["webhooks"].as_array_mut().unwrap() {
            w["failurePolicy"] = json!("Ignore");
            w["namespaceSelector"] = json!({"matchLabels": {"trainplace-test": "none"}});
        }
        let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&doc.to_string()));
        assert!(out.status.success(), "{}", sandbox::stderr(&out));
    }
    let rel = Release {
        sb,
        name: "trainplace",
        ns: "trainplace",
    };
    let chart = chart();
    let out = rel.helm(&[
        "install",
        rel.name,
        chart.to_str().unwrap(),
        "--take-ownership",
        "--set",
        "namespace.manage=true",
    ]);
    let err = sandbox::stderr(&out);
    for kind in WEBHOOK_KINDS {
        let _ = sb.kubectl(&["delete", kind, "trainplace"]);
    }
    assert!(!out.status.success(), "installed over a kustomize install");
    assert!(
        err.contains("trainplace is already installed in this cluster")
            && err.contains("WebhookConfiguration \"trainplace\"")
            && err.contains("Remove that install first"),
        "{err}"
    );
    // Without its webhook configurations (the sandbox's own kustomize install has only
    // its namespace and RBAC here), the install still refuses to take its ClusterRole.
    let out = rel.helm(&[
        "install",
        rel.name,
        chart.to_str().unwrap(),
        "--take-ownership",
        "--set",
        "namespace.manage=true",
    ]);
    let err = sandbox::stderr(&out);
    assert!(!out.status.success(), "took over the kustomize RBAC");
    assert!(
        err.contains("trainplace is already installed in this cluster: ClusterRole \"trainplace\"")
            && err.contains("whose uninstall would then delete it"),
        "{err}"
    );
    let list = ok("helm list", rel.helm(&["list", "-a", "-q"]));
    assert_eq!(list.trim(), "", "no release recorded");
    let role = sb.json(&["get", "clusterrole", "trainplace"]);
    assert!(
        role["metadata"]["annotations"]
            .get("meta.helm.sh/release-name")
            .is_none(),
        "the kustomize ClusterRole was taken over: {role}"
    );
}

/// The CRD-backed objects (cert-manager's Issuers and Certificates, the Prometheus
/// Operator's ServiceMonitor and PrometheusRule) against their real CRDs
/// (tests/fixtures/helm/crds), in the real API server with strict field validation; then a
/// cert-manager mode install with the monitoring objects on.
#[test]
fn crd_objects_pass_their_crds_and_the_cert_manager_mode_installs() {
    let sb = sb();
    let crds = root().join("tests/fixtures/helm/crds");
    sb.ok(&["apply", "--server-side", "-f", crds.to_str().unwrap()]);
    sb.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout",
        "60s",
        "crd/certificates.cert-manager.io",
        "crd/issuers.cert-manager.io",
        "crd/servicemonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
    ]);
    let ns = sb.namespace("tp-crds");
    let strict_dry_run = |doc: &Value| {
        let mut doc = doc.clone();
        doc["metadata"]["namespace"] = json!(ns);
        sb.kubectl_stdin(
            &[
                "create",
                "--dry-run=server",
                "--validate=strict",
                "-o",
                "name",
                "-f",
                "-",
            ],
            Some(&doc.to_string()),
        )
    };
    let mut seen = std::collections::BTreeSet::new();
    let cert_manager = || vec!["--set".into(), "certificates.mode=cert-manager".into()];
    for (name, args) in renderings().into_iter().chain([
        ("cert-manager", cert_manager()),
        (
            "monitoring",
            vec![
                "--set".into(),
                "metrics.serviceMonitor.enabled=true".into(),
                "--set".into(),
                "metrics.prometheusRule.enabled=true".into(),
            ],
        ),
    ]) {
        for doc in docs(&render(&args)).iter().filter(|d| !is_core(d)) {
            let out = strict_dry_run(doc);
            assert!(
                out.status.success(),
                "{name}: {} {} refused: {}",
                doc["kind"],
                doc["metadata"]["name"],
                sandbox::stderr(&out)
            );
            seen.insert(doc["kind"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        seen,
        ["Certificate", "Issuer", "PrometheusRule", "ServiceMonitor"]
            .map(String::from)
            .into(),
    );
    // Strict validation has teeth: a misspelt Certificate field is refused.
    let all = docs(&render(&cert_manager()));
    let mut typo = find(&all, "Certificate", "trainplace-serving").clone();
    typo["spec"]["dnsName"] = json!(["x"]);
    let out = strict_dry_run(&typo);
    assert!(
        !out.status.success() && sandbox::stderr(&out).contains("dnsName"),
        "{}",
        sandbox::stderr(&out)
    );

    let _one = one_install_at_a_time();
    // cert-manager mode. No cert-manager runs here, so the Secret is
    // never written (kwok starts the pods regardless) and caBundle stays empty; the
    // objects are created and the webhooks carry cainjector's annotation. failurePolicy
    // Ignore on both: this release's webhooks must not refuse the other test's pods.
    let chart = chart();
    let rel = Release {
        sb,
        name: "tpcm",
        ns: &ns,
    };
    let full = rel.fullname();
    ok(
        "helm install (cert-manager mode)",
        rel.helm(&[
            "install",
            rel.name,
            chart.to_str().unwrap(),
            "--set",
            "certificates.mode=cert-manager",
            "--set",
            "replicas=1",
            "--set",
            "webhooks.validate.failurePolicy=Ignore",
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "metrics.prometheusRule.enabled=true",
            "--wait",
            "--timeout",
            "120s",
        ]),
    );
    for (kind, name) in [
        ("issuer", format!("{full}-selfsigned")),
        ("issuer", format!("{full}-ca")),
        ("certificate", format!("{full}-ca")),
        ("certificate", format!("{full}-serving")),
        ("servicemonitor", full.clone()),
        ("prometheusrule", full.clone()),
    ] {
        sb.ok(&["-n", &ns, "get", kind, &name]);
    }
    let cert = sb.json(&["-n", &ns, "get", "certificate", &format!("{full}-serving")]);
    assert_eq!(cert["spec"]["secretName"], format!("{full}-tls"));
    assert_eq!(
        cert["spec"]["dnsNames"][2],
        format!("{full}.{ns}.svc"),
        "the Service's name"
    );
    for kind in [
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ] {
        let w = sb.json(&["get", kind, &full]);
        assert_eq!(
            w["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("{ns}/{full}-serving")
        );
    }
    // The ServiceMonitor selects the chart's Service.
    let sm = sb.json(&["-n", &ns, "get", "servicemonitor", &full]);
    let svc = sb.json(&["-n", &ns, "get", "service", &full]);
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&svc["metadata"]["labels"][k], v, "{k}");
    }
    ok(
        "helm uninstall",
        rel.helm(&["uninstall", rel.name, "--wait"]),
    );
    let out = sb.kubectl(&["-n", &ns, "get", "certificate", &format!("{full}-serving")]);
    assert!(!out.status.success(), "the Certificate is gone");
}

/// The mark-key Secret as kubelet mounts it: one file per key (base64-decoded), beside a
/// hidden timestamped directory.
fn mount_secret(secret: &Value, dir: &Path) {
    std::fs::create_dir(dir.join("..2026_11_26_00_00_00.000000001")).unwrap();
    for (name, b64) in secret["data"].as_object().unwrap() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Two replicas mounting the chart's one Secret: a PyTorchJob admitted through either (an
/// opt-in only a group may use) has its operator's pods admitted by both, because both
/// verify the mark the other signed. A replica with the key of another rendering (what
/// each replica's own random key amounts to) judges those pods again and denies them; an
/// empty key directory does not start.
#[tokio::test]
async fn replicas_sharing_the_charts_mark_key_trust_each_others_admissions() {
    let policy = tempfile::tempdir().unwrap();
    std::fs::write(
        policy.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\noptIns:\n  allowPartialNode: { namespaces: [\"*\"], groups: [ml-researchers] }\n",
    )
    .unwrap();
    let secret_of = |yaml: &str| {
        docs(yaml)
            .into_iter()
            .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == "trainplace-mark-keys")
            .expect("the mark-key Secret")
    };
    let shared = tempfile::tempdir().unwrap();
    mount_secret(&secret_of(&render(&[])), shared.path());
    let other = tempfile::tempdir().unwrap();
    mount_secret(&secret_of(&render(&[])), other.path());
    let replica = |keys: &Path| {
        let mut cfg = common::config(None, Some(policy.path().to_path_buf()));
        cfg.mark_keys = Some(keys.to_path_buf());
        common::serve(cfg)
    };
    let (a, b, stranger) = (
        replica(shared.path()).await,
        replica(shared.path()).await,
        replica(other.path()).await,
    );
    let url = |srv: &trainplace::server::Running, path: &str| {
        format!("https://127.0.0.1:{}{path}", srv.addr.port())
    };

    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {
            "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "pytorch", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}
    });
    let pod_review = |template: &Value| {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
        pod["metadata"]["name"] = json!("bert-worker-0");
        pod["metadata"]["namespace"] = json!("research");
        pod["metadata"]["labels"] = json!({"training.kubeflow.org/job-name": "bert"});
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob", "name": "bert",
            "uid": "00000000-0000-4000-8000-000000000001", "controller": true}]);
        let mut r = common::review_for(&pod, "pod");
        r["request"]["userInfo"]["groups"] = json!(["system:serviceaccounts:kubeflow"]);
        r
    };
    for admitter in [&a, &b] {
        let mut review = common::review_for(&job, "job");
        review["request"]["userInfo"]["groups"] = json!(["ml-researchers"]);
        let (_, answer) = common::post_review(&url(admitter, "/mutate"), &review).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        let mutated = common::apply_response_patch(&job, &answer);
        let template = &mutated["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
        assert!(
            template["metadata"]["annotations"]["trainplace.io/admitted"]
                .as_str()
                .is_some_and(|m| m.split('.').nth(1) == Some("00-initial")),
            "signed with the chart's key: {template}"
        );
        let pod = pod_review(template);
        for judge in [&a, &b] {
            let (_, answer) = common::post_review(&url(judge, "/validate"), &pod).await;
            assert_eq!(answer["response"]["allowed"], true, "{answer}");
        }
        let (_, answer) = common::post_review(&url(&stranger, "/validate"), &pod).await;
        assert_eq!(
            answer["response"]["allowed"], false,
            "another key: judged again and denied: {answer}"
        );
    }
    // Counted where the marks did not verify, and only there.
    let failures = "trainplace_mark_verification_failures_total";
    assert_eq!(common::counter(stranger.probe_addr, failures).await, 2);
    for srv in [&a, &b] {
        assert_eq!(common::counter(srv.probe_addr, failures).await, 0);
    }
    for srv in [a, b, stranger] {
        srv.handle.shutdown();
    }

    let empty = tempfile::tempdir().unwrap();
    let mut cfg = common::config(None, Some(policy.path().to_path_buf()));
    cfg.mark_keys = Some(empty.path().to_path_buf());
    let err = match trainplace::server::start(cfg).await {
        Ok(_) => panic!("a replica without the shared key started"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("no usable key"), "{err}");
}

fn promtool_bin() -> PathBuf {
    let out = Command::new(root().join("scripts/go-tool.sh"))
        .args(["promtool", "path"])
        .output()
        .expect("run scripts/go-tool.sh promtool path");
    let bin = PathBuf::from(text(&out.stdout).trim());
    assert!(
        bin.is_file(),
        "promtool is not built ({} missing): run scripts/test-deps.sh, which builds it from the pin in tools/promtool once",
        bin.display()
    );
    bin
}

/// The PrometheusRule's alerts (files/prometheus/alerts.yaml) pass `promtool check
/// rules`, and six of them fire as their comments say under `promtool test rules`
/// (series made up for the purpose): the inventory alert not for a replica started with
/// `--inventory off`; the webhook alerts when the API server fails to call it while
/// validation fails closed, and when no replica reports at all.
#[test]
fn prometheus_rule_alerts_pass_promtool() {
    let all = docs(&render(&[
        "--set".into(),
        "metrics.prometheusRule.enabled=true".into(),
    ]));
    let rule = find(&all, "PrometheusRule", "trainplace");
    let tmp = tempfile::tempdir().unwrap();
    let rules = tmp.path().join("rules.yaml");
    std::fs::write(&rules, serde_yaml_ng::to_string(&rule["spec"]).unwrap()).unwrap();
    let out = Command::new(promtool_bin())
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    let said = ok("promtool check rules", out);
    assert!(said.contains("SUCCESS: 11 rules found"), "{said}");
    // The same file as plain Prometheus loads it, and the PrometheusRule's spec is it.
    let file = chart().join("files/prometheus/alerts.yaml");
    let out = Command::new(promtool_bin())
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    let said = ok("promtool check rules files/prometheus/alerts.yaml", out);
    assert!(said.contains("SUCCESS: 11 rules found"), "{said}");
    let plain: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(rule["spec"], plain);

    let tests = json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": "trainplace_inventory_up{pod=\"a\"}", "values": "0x15"},
                // `--inventory off`: 0 by design, no alert.
                {"series": "trainplace_inventory_up{pod=\"b\"}", "values": "0x15"},
                {"series": "trainplace_inventory_enabled{pod=\"b\"}", "values": "0x15"},
                {"series": "apiserver_admission_webhook_rejection_count{name=\"validate.trainplace.io\",error_type=\"calling_webhook_error\",operation=\"CREATE\",rejection_code=\"0\",type=\"validating\"}",
                 "values": "0 0 0 3 6 9 12 15 18 21 24 27 30 33 36 39"},
                {"series": "apiserver_admission_webhook_rejection_count{name=\"validate.trainplace.io\",error_type=\"no_error\",operation=\"CREATE\",rejection_code=\"403\",type=\"validating\"}",
                 "values": "0+5x15"},
                {"series": "trainplace_certificate_expiry_days{pod=\"a\"}", "values": "10x15"},
                {"series": "trainplace_capacity_block_seconds_remaining{pod=\"a\",reservation=\"cr-1\"}",
                 "values": "3600x15"},
                {"series": "trainplace_capacity_block_seconds_remaining{pod=\"a\",reservation=\"cr-2\"}",
                 "values": "86400x15"},
                {"series": "trainplace_mark_key_reloads_total{pod=\"a\",outcome=\"failure\"}",
                 "values": "0 0 1 1 1"}
            ],
            "alert_rule_test": [
                // `for: 10m`: not yet after 5 minutes, firing after 11.
                {"eval_time": "5m", "alertname": "TrainplaceInventoryDown", "exp_alerts": []},
                {"eval_time": "11m", "alertname": "TrainplaceInventoryDown", "exp_alerts": [{
                    "exp_labels": {"severity": "warning", "pod": "a"},
                    "exp_annotations": {"summary": "trainplace cannot watch the cluster; it judges from its embedded catalog"}
                }]},
                {"eval_time": "1m", "alertname": "TrainplaceCertificateExpiring", "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "pod": "a"},
                    "exp_annotations": {"summary": "trainplace's serving certificate expires within 14 days"}
                }]},
                // Calls failing from minute 3 (denials, no_error, never count).
                {"eval_time": "2m", "alertname": "TrainplaceWebhookUnreachable", "exp_alerts": []},
                {"eval_time": "8m", "alertname": "TrainplaceWebhookUnreachable", "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "name": "validate.trainplace.io"},
                    "exp_annotations": {"summary": "the API server cannot call trainplace's validating webhook and refused 15 requests in 5 minutes (failurePolicy Fail): GPU pods and training jobs are not admitted"}
                }]},
                {"eval_time": "11m", "alertname": "TrainplaceDown", "exp_alerts": []},
                // A rotated mark key rejected.
                {"eval_time": "1m", "alertname": "TrainplaceReloadFailing", "exp_alerts": []},
                {"eval_time": "3m", "alertname": "TrainplaceReloadFailing", "exp_alerts": [{
                    "exp_labels": {"severity": "warning", "pod": "a", "outcome": "failure"},
                    "exp_annotations": {"summary": "a policy, certificate, mark-key or reservations reload was rejected; the last good one serves"}
                }]},
                // Only the block that ends within 6 hours.
                {"eval_time": "1m", "alertname": "CapacityBlockEndingSoon", "exp_alerts": [{
                    "exp_labels": {"severity": "warning", "reservation": "cr-1"},
                    "exp_annotations": {"summary": "Capacity Block cr-1 ends in 1h 0m 0s; Karpenter drains and EKS managed node groups scale to 0 at 40 min, EC2 terminates from 30 min before the end"}
                }]}
            ]
        }, {
            // No replica reports: TrainplaceDown after 5 minutes.
            "interval": "1m",
            "input_series": [
                {"series": "up{job=\"apiserver\"}", "values": "1x10"}
            ],
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "TrainplaceDown", "exp_alerts": []},
                {"eval_time": "6m", "alertname": "TrainplaceDown", "exp_alerts": [{
                    "exp_labels": {"severity": "critical"},
                    "exp_annotations": {"summary": "no trainplace replica reports metrics; with the validating webhook registered the API server refuses what it judges"}
                }]}
            ]
        }]
    });
    let test_file = tmp.path().join("tests.yaml");
    std::fs::write(&test_file, serde_yaml_ng::to_string(&tests).unwrap()).unwrap();
    let out = Command::new(promtool_bin())
        .args(["test", "rules"])
        .arg(&test_file)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    ok("promtool test rules", out);
}

/// `helm package` carries the linked files' contents (not links), so the packaged chart
/// renders exactly what the directory does; and Kubernetes older than 1.30 is refused.
#[test]
fn the_packaged_chart_renders_like_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let chart = chart();
    ok(
        "helm package",
        helm(
            &[
                "package",
                chart.to_str().unwrap(),
                "-d",
                tmp.path().to_str().unwrap(),
            ],
            &offline(),
        ),
    );
    let tgz = tmp.path().join("trainplace-0.1.0.tgz");
    let listing = Command::new("tar").arg("tvzf").arg(&tgz).output().unwrap();
    let listing = text(&listing.stdout);
    for file in [
        "trainplace/files/policies/default.yaml",
        "trainplace/files/policies/instances.yaml",
        "trainplace/files/validating-admission-policies.yaml",
    ] {
        let line = listing
            .lines()
            .find(|l| l.ends_with(file))
            .unwrap_or_else(|| panic!("{file} packaged: {listing}"));
        assert!(line.starts_with('-'), "a regular file, not a link: {line}");
        let packed = Command::new("tar")
            .arg("xzf")
            .arg(&tgz)
            .arg("-O")
            .arg(file)
            .output()
            .unwrap();
        let source = std::fs::read(chart.join(file.trim_start_matches("trainplace/"))).unwrap();
        assert!(packed.stdout == source, "{file}: the linked file's bytes");
    }
    let args = ["-f", &ci_values("all-features-values.yaml")];
    let from_dir = golden_form(&template(&args).unwrap());
    let mut a = vec![
        "template",
        "trainplace",
        tgz.to_str().unwrap(),
        "-n",
        "trainplace",
    ];
    a.extend(args);
    let from_tgz = golden_form(&ok("helm template <tgz>", helm(&a, &offline())));
    assert!(from_dir == from_tgz, "the package renders differently");
    let err = template(&["--kube-version", "1.29.0"]).expect_err("Kubernetes 1.29 refused");
    assert!(err.contains("kubeVersion"), "{err}");
}
