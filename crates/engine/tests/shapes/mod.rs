//! Hostile shapes: AdmissionReviews in which one field a tenant controls grows until
//! the body reaches a target size. Shared by `work_bounds.rs` (counted work) and the
//! `hostile_shapes` example (answer time in a release build).

use serde_json::{Value, json};

/// The object kinds a shape is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    Pod,
    Job,
    PyTorchJob,
    TrainJob,
}

/// One field grown to a size: its name, the kind it lives in, and how `n` elements of
/// it are written into the object.
pub struct Shape {
    pub name: &'static str,
    pub on: On,
    grow: fn(&mut Value, usize),
}

/// A GPU training pod template (no apiVersion or kind: those are the workload's).
fn template() -> Value {
    json!({"metadata": {"labels": {"app": "train"}},
        "spec": {"containers": [{"name": "trainer", "image": "pytorch:2.5",
            "command": ["torchrun"], "args": ["--nnodes=4", "--nproc-per-node=8", "train.py"],
            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
            "resources": {"limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}})
}

fn trainjob() -> Value {
    json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "big", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 4, "command": ["torchrun"], "args": ["train.py"],
                "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}}}}})
}

/// The object a shape grows, before growing.
fn base(on: On) -> Value {
    let meta = json!({"name": "big", "namespace": "ml"});
    match on {
        On::Pod => {
            let mut pod = template();
            pod["apiVersion"] = json!("v1");
            pod["kind"] = json!("Pod");
            pod["metadata"]["name"] = json!("big");
            pod["metadata"]["namespace"] = json!("ml");
            pod
        }
        On::Job => json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completions": 4, "parallelism": 4, "completionMode": "Indexed",
                "template": template()}}),
        On::PyTorchJob => json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": meta, "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 3, "template": template()}}}}),
        On::TrainJob => trainjob(),
    }
}

/// The pod template a field grows in (the Worker's for a PyTorchJob).
fn pod_of(object: &mut Value) -> &mut Value {
    if object.pointer("/spec/template").is_some() {
        return &mut object["spec"]["template"];
    }
    if object.pointer("/spec/pytorchReplicaSpecs").is_some() {
        return &mut object["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
    }
    object
}

fn container(object: &mut Value) -> &mut Value {
    &mut pod_of(object)["spec"]["containers"][0]
}

fn list(n: usize, each: impl Fn(usize) -> Value) -> Value {
    Value::Array((0..n).map(each).collect())
}

fn env(o: &mut Value, n: usize) {
    container(o)["env"] = list(
        n,
        |i| json!({"name": format!("VAR_{i:06}"), "value": format!("v{i:06}")}),
    );
}
fn args(o: &mut Value, n: usize) {
    container(o)["args"] = list(n, |i| json!(format!("--opt-{i:06}=x")));
}
fn command(o: &mut Value, n: usize) {
    let mut cmd = vec![json!("torchrun")];
    cmd.extend((0..n).map(|i| json!(format!("--c{i:06}"))));
    container(o)["command"] = Value::Array(cmd);
}
fn shell_line(o: &mut Value, n: usize) {
    // One `bash -c` string of many launcher invocations and assignments.
    let line: String = (0..n)
        .map(|i| format!("N{i:06}=2; torchrun --nnodes=$N{i:06} t.py; "))
        .collect();
    container(o)["command"] = json!(["bash", "-c", line]);
}
/// Shell words the reading rewrites: quotes inside words, backslashes, continued lines,
/// subshells, and a variable that names the launcher.
fn shell_words(o: &mut Value, n: usize) {
    let line: String = (0..n)
        .map(|i| format!("L{i:06}=torch\"run\"; (${{L{i:06}}} --nn\\odes=2 \\\n t.py); "))
        .collect();
    container(o)["command"] = json!(["bash", "-c", line]);
}
/// A variable naming the launcher, 4 KiB long, used as the command word of every
/// command: each use reads its value again.
fn var_command_words(o: &mut Value, n: usize) {
    container(o)["env"] = json!([{"name": "L", "value": format!("torchrun {}", "x".repeat(4096))}]);
    container(o)["command"] = json!(["bash", "-c", "$L; ".repeat(n)]);
}
/// A TensorFlow `TF_CONFIG` listing `n` workers (parsed as JSON up to a bound).
fn tf_config(o: &mut Value, n: usize) {
    let workers: Vec<String> = (0..n).map(|i| format!("w{i:06}.tf:2222")).collect();
    let config = json!({"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}});
    container(o)["env"] = json!([{"name": "TF_CONFIG", "value": config.to_string()}]);
}
fn containers(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["containers"] = list(
        n,
        |i| json!({"name": format!("c{i:06}"), "image": "busybox"}),
    );
}
fn init_containers(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["initContainers"] = list(
        n,
        |i| json!({"name": format!("i{i:06}"), "image": "busybox"}),
    );
}
fn tolerations(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["tolerations"] = list(
        n,
        |i| json!({"key": format!("k{i:06}"), "operator": "Exists", "effect": "NoSchedule"}),
    );
}
fn volumes(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["volumes"] = list(n, |i| json!({"name": format!("v{i:06}"), "emptyDir": {}}));
}
/// Volumes named as trainplace names its /dev/shm volume, and each next free name.
fn shm_volumes(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["volumes"] = list(n, |i| {
        let name = match i {
            0 => "trainplace-shm".to_string(),
            i => format!("trainplace-shm-{i}"),
        };
        json!({"name": name, "emptyDir": {}})
    });
}
fn volume_mounts(o: &mut Value, n: usize) {
    container(o)["volumeMounts"] = list(
        n,
        |i| json!({"name": format!("v{i:06}"), "mountPath": format!("/m/{i:06}")}),
    );
}
const ZONE: &str = "topology.kubernetes.io/zone";
fn node_terms(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(n, |i| json!({"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": [format!("zone-{i:06}")]}]}))}}});
}
fn zone_values(o: &mut Value, n: usize) {
    // Two `In` lists on the zone in one term: the zones allowed are their intersection.
    let half = list(n / 2, |i| json!(format!("zone-{i:06}")));
    pod_of(o)["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": half},
            {"key": ZONE, "operator": "In", "values": half}]}]}}});
}
fn pod_affinity(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        list(n, |i| json!({"topologyKey": ZONE, "labelSelector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": [format!("a{i:06}"), "train"]}]}}))}});
}
fn spread(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["topologySpreadConstraints"] = list(n, |i| {
        json!({"maxSkew": 1, "topologyKey": format!("k{i:06}"), "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}}})
    });
}
fn claims(o: &mut Value, n: usize) {
    pod_of(o)["spec"]["resourceClaims"] = list(
        n,
        |i| json!({"name": format!("c{i:06}"), "resourceClaimTemplateName": format!("t{i:06}")}),
    );
}
fn annotations(o: &mut Value, n: usize) {
    let target = match o.get("kind").and_then(Value::as_str) {
        Some("TrainJob") => o,
        _ => pod_of(o),
    };
    let map: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("example.com/a{i:06}"), json!(format!("v{i:06}"))))
        .collect();
    target["metadata"]["annotations"] = Value::Object(map);
}
/// `$(VAR)` references in args to an env as long as the bound allows (each name
/// looked up in the container's env).
fn var_refs(o: &mut Value, n: usize) {
    // As many names as the env bound lets through (past it the pod is too-large and
    // nothing is looked up); the references grow with the body.
    let vars = trainplace_engine::bounds::MAX_ENV;
    container(o)["env"] = list(vars, |i| json!({"name": format!("V{i:06}"), "value": "4"}));
    container(o)["args"] = list(n, |i| json!(format!("$(V{:06})$(V000000)", i % vars)));
}
/// `$(VAR)` references that amplify: one 4 KiB value referenced from every arg.
fn var_amplify(o: &mut Value, n: usize) {
    container(o)["env"] = json!([{"name": "BIG", "value": "x".repeat(4096)}]);
    container(o)["args"] = list(n, |_| json!("$(BIG)$(BIG)"));
}
/// Unclosed references: `$(` with no `)` after it, which a scan for `)` per `$(`
/// reads to the end of the string each time.
fn var_unclosed(o: &mut Value, n: usize) {
    container(o)["args"] = json!(["$(".repeat(n)]);
}

fn trainer(o: &mut Value) -> &mut Value {
    &mut o["spec"]["trainer"]
}
fn trainer_env(o: &mut Value, n: usize) {
    trainer(o)["env"] = list(
        n,
        |i| json!({"name": format!("VAR_{i:06}"), "value": format!("v{i:06}")}),
    );
}
fn trainer_args(o: &mut Value, n: usize) {
    trainer(o)["args"] = list(n, |i| json!(format!("--opt-{i:06}=x")));
}
fn trainer_var_refs(o: &mut Value, n: usize) {
    let vars = trainplace_engine::bounds::MAX_ENV;
    trainer(o)["env"] = list(vars, |i| json!({"name": format!("V{i:06}"), "value": "4"}));
    trainer(o)["args"] = list(n, |i| json!(format!("$(V{:06})$(V000000)", i % vars)));
}
/// A runtime patch for the `node` job with `spec` as its pod spec.
fn patch(i: usize, spec: Value) -> Value {
    json!({"manager": format!("tenant.example.com/m{i:06}"), "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": spec}}}}]}}}})
}
fn patches_many(o: &mut Value, n: usize) {
    o["spec"]["runtimePatches"] = list(n, |i| {
        patch(
            i,
            json!({"tolerations": [{"key": format!("k{i:06}"), "operator": "Exists"}],
                "volumes": [{"name": format!("v{i:06}"), "emptyDir": {}}]}),
        )
    });
}
/// Two patches whose lists (built by `each`) hold half the elements each, the second
/// overlapping the first: every element of one is looked for in the other.
fn two_patches(o: &mut Value, n: usize, field: &str, each: fn(usize) -> Value) {
    let half = n / 2;
    let first = list(half, each);
    let second = list(half, |i| each(i + half / 2));
    let spec = |l: Value| -> Value {
        if field == "env" {
            json!({"containers": [{"name": "node", "env": l}]})
        } else {
            json!({ field: l })
        }
    };
    o["spec"]["runtimePatches"] = json!([patch(0, spec(first)), patch(1, spec(second))]);
}
fn patch_tolerations(o: &mut Value, n: usize) {
    two_patches(
        o,
        n,
        "tolerations",
        |i| json!({"key": format!("k{i:06}"), "operator": "Exists", "effect": "NoSchedule"}),
    );
}
fn patch_volumes(o: &mut Value, n: usize) {
    two_patches(
        o,
        n,
        "volumes",
        |i| json!({"name": format!("v{i:06}"), "emptyDir": {}}),
    );
}
fn patch_env(o: &mut Value, n: usize) {
    two_patches(
        o,
        n,
        "env",
        |i| json!({"name": format!("E{i:06}"), "value": "1"}),
    );
}
fn patch_node_terms(o: &mut Value, n: usize) {
    let spec = |from: usize| {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(n / 2, |i| json!({"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": [format!("zone-{:06}", i + from)]}]}))}}}})
    };
    o["spec"]["runtimePatches"] = json!([patch(0, spec(0)), patch(1, spec(n / 4))]);
}

macro_rules! shapes {
    ($($on:ident: $($grow:ident)*;)*) => {
        vec![$($(Shape { name: stringify!($grow), on: On::$on, grow: $grow },)*)*]
    };
}

/// Every shape: each list or string field a tenant controls, on each kind it lives in.
pub fn all() -> Vec<Shape> {
    shapes! {
        Pod: containers init_containers env args command shell_line shell_words
            var_command_words tolerations volumes
            shm_volumes volume_mounts node_terms zone_values pod_affinity spread claims annotations
            var_refs var_amplify var_unclosed tf_config;
        Job: env args tolerations volumes shm_volumes zone_values annotations var_refs;
        PyTorchJob: env command tolerations volume_mounts node_terms spread var_refs;
        TrainJob: trainer_env trainer_args trainer_var_refs annotations patches_many
            patch_tolerations patch_volumes patch_env patch_node_terms;
    }
}

impl Shape {
    /// The object with `n` elements of the field.
    pub fn object(&self, n: usize) -> Value {
        let mut o = base(self.on);
        (self.grow)(&mut o, n);
        o
    }

    /// An AdmissionReview (CREATE) whose body is close to `bytes` long.
    pub fn review(&self, bytes: usize) -> Vec<u8> {
        let probe = 2_000;
        let small = serde_json::to_vec(&admission(self.object(probe))).expect("JSON");
        let empty = serde_json::to_vec(&admission(self.object(0))).expect("JSON");
        let per = (small.len() - empty.len()).max(1) as f64 / probe as f64;
        let n = ((bytes.saturating_sub(empty.len())) as f64 / per) as usize;
        serde_json::to_vec(&admission(self.object(n))).expect("JSON")
    }

    pub fn label(&self) -> String {
        format!("{:?}/{}", self.on, self.name)
    }
}

/// The CREATE review of `object` in namespace `ml`.
pub fn admission(object: Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or("Pod").to_string();
    let api = object["apiVersion"].as_str().unwrap_or("v1").to_string();
    let (group, version) = api.rsplit_once('/').unwrap_or(("", &api));
    let resource = format!("{}s", kind.to_lowercase());
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": "big", "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": object}})
}
