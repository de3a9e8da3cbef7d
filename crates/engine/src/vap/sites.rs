//! Where each kind keeps its pod templates (the engine's `workload::locate`), and what
//! each container of a template asks for (`podspec`), as CEL variables:
//!
//! - `sites`: one entry per template: `t` (the `{metadata, spec}`), `n` (pods it
//!   makes: replicas x the Job's active pods), `u` (the count is unknown: judged as many pods),
//!   `f` (the field, for messages), `id` (the job label the operator puts on its pods,
//!   `[key, value]` or `[]`). The controllers beyond the core ones: `controllers`.
//! - `containers`: per site, each container's accelerator resource name (`key`, `''`
//!   for none) and whether an init container is a sidecar (`side`).
//! - `devices`: the same with the device counts (`n`, `efa`) read as the scheduler
//!   reads them, and the required node-affinity terms (`terms`).

use crate::read::annotations::{LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, RES_EFA, ZONE_KEYS};
use crate::vap::controllers;
use crate::vap::ident::{active_pods, workload_id};
use crate::vap::text::lit;
use trainplace_catalog::Catalog;

const POD_ID: &str = "((has(object.metadata.labels) && variables.podJobLabels.exists(k, k in object.metadata.labels)) ? [variables.podJobLabels.filter(k, k in object.metadata.labels)[0], object.metadata.labels[variables.podJobLabels.filter(k, k in object.metadata.labels)[0]]] : [])";

/// Kubeflow's replica-spec maps (PyTorchJob, MPIJob, PaddleJob, TFJob, XGBoostJob,
/// JAXJob): one template per role.
fn replica_specs(field: &str) -> String {
    let m = format!("object.spec.{field}");
    let t = format!("{m}[role].template");
    let replicas = format!("(has({m}[role].replicas) ? {m}[role].replicas : 1)");
    // An elastic PyTorchJob's Workers are judged at `elasticPolicy.maxReplicas` (the
    // engine's `operators::kubeflow`).
    let n = if field == "pytorchReplicaSpecs" {
        let max = "object.spec.elasticPolicy.maxReplicas";
        format!(
            "(role == 'Worker' && has(object.spec.elasticPolicy) && has({max}) && {max} > {replicas} ? {max} : {replicas})"
        )
    } else {
        replicas
    };
    format!(
        "(has({m}) ? {m}.filter(role, has({m}[role].template)).map(role, {{'t': {t}, 'n': {n}, 'u': false, 'f': 'spec.{field}.' + role + '.template.spec', 'id': {id}}}) : [])",
        id = workload_id(&t, "training.kubeflow.org/job-name")
    )
}

fn job() -> String {
    let t = "object.spec.template";
    format!(
        "(has(object.spec.template) ? [{{'t': {t}, 'n': {n}, 'u': false, 'f': 'spec.template.spec', 'id': {id}}}] : [])",
        n = active_pods("object.spec"),
        id = workload_id(t, "batch.kubernetes.io/job-name")
    )
}

fn jobset() -> String {
    let t = "r.template.spec.template";
    format!(
        "(has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.filter(r, has(r.template) && has(r.template.spec) && has(r.template.spec.template)).map(r, {{'t': {t}, 'n': (has(r.replicas) ? r.replicas : 1) * {n}, 'u': false, 'f': 'spec.replicatedJobs[' + r.name + '].template.spec.template.spec', 'id': {id}}}) : [])",
        n = active_pods("r.template.spec"),
        id = workload_id(t, "jobset.sigs.k8s.io/jobset-name")
    )
}

/// A LeaderWorkerSet's job is one group: the leader and `size - 1` workers.
fn leader_worker_set() -> String {
    let w = "object.spec.leaderWorkerTemplate";
    let label = "leaderworkerset.sigs.k8s.io/name";
    let leader = format!("{w}.leaderTemplate");
    let worker = format!("{w}.workerTemplate");
    format!(
        "(has({w}) ? (has({leader}) ? [{{'t': {leader}, 'n': 1, 'u': false, 'f': 'spec.leaderWorkerTemplate.leaderTemplate.spec', 'id': {lid}}}] : []) + (has({worker}) ? [{{'t': {worker}, 'n': [(has({w}.size) ? {w}.size : 1) - (has({leader}) ? 1 : 0), 0].max(), 'u': false, 'f': 'spec.leaderWorkerTemplate.workerTemplate.spec', 'id': {wid}}}] : []) : [])",
        lid = workload_id(&leader, label),
        wid = workload_id(&worker, label),
    )
}

/// `runtimeSpecs`: the pod specs a TrainJob's runtime patches give the `node` job, in
/// the order the engine merges them (others' patches, then trainplace's own).
pub(crate) fn runtime_specs() -> String {
    let has_node = "has(p.trainingRuntimeSpec) && has(p.trainingRuntimeSpec.template) && has(p.trainingRuntimeSpec.template.spec) && has(p.trainingRuntimeSpec.template.spec.replicatedJobs) && p.trainingRuntimeSpec.template.spec.replicatedJobs.exists(j, has(j.name) && j.name == 'node') && has(p.trainingRuntimeSpec.template.spec.replicatedJobs.filter(j, has(j.name) && j.name == 'node')[0].template.spec.template.spec)";
    let node_spec = "p.trainingRuntimeSpec.template.spec.replicatedJobs.filter(j, has(j.name) && j.name == 'node')[0].template.spec.template.spec";
    let ours = format!(
        "(has(p.manager) && p.manager == {})",
        lit(crate::write::trainjob::MANAGER)
    );
    let patches = "object.spec.runtimePatches";
    format!(
        "object.kind == 'TrainJob' && has(object.spec.runtimePatches) ? {patches}.filter(p, !{ours} && {has_node}).map(p, {node_spec}) + {patches}.filter(p, {ours} && {has_node}).map(p, {node_spec}) : []"
    )
}

/// A TrainJob has no template: the pod is `spec.trainer` (devices, env, command) on
/// the layout of `runtimeSpecs` (the last spec that sets `nodeSelector`, node
/// affinity or pod anti-affinity wins; the engine merges them), as the engine's
/// `synthetic_pod`.
fn train_job() -> String {
    let tr = "object.spec.trainer";
    let field = |f: &str| format!("(has({tr}.{f}) ? {tr}.{f} : [])");
    // The value of a (dotted) field in the last spec that sets it.
    let last_set = |f: &str| {
        let mut guard = Vec::new();
        let mut path = String::from("s");
        for part in f.split('.') {
            path = format!("{path}.{part}");
            guard.push(format!("has({path})"));
        }
        let guard = guard.join(" && ");
        format!(
            "(variables.runtimeSpecs.exists(s, {guard}) ? variables.runtimeSpecs.filter(s, {guard})[size(variables.runtimeSpecs.filter(s, {guard})) - 1].{f} : {{}})"
        )
    };
    let affinity = format!(
        "{{'nodeAffinity': {}, 'podAntiAffinity': {}}}",
        last_set("affinity.nodeAffinity"),
        last_set("affinity.podAntiAffinity")
    );
    format!(
        "(has(object.spec.trainer) ? [{{'t': {{'metadata': {{'labels': has(object.metadata.name) ? {{'jobset.sigs.k8s.io/jobset-name': object.metadata.name}} : {{}}, 'annotations': has(object.metadata.annotations) ? object.metadata.annotations : {{}}}},
   'spec': {{'containers': [{{'name': 'node', 'resources': has({tr}.resourcesPerNode) ? {tr}.resourcesPerNode : {{}}, 'env': {env}, 'command': {command}, 'args': {args}}}], 'nodeSelector': {ns}, 'affinity': {aff}}}}},
  'n': has({tr}.numNodes) ? {tr}.numNodes : 2, 'u': !has({tr}.numNodes), 'f': 'spec.trainer',
  'id': has(object.metadata.name) ? ['jobset.sigs.k8s.io/jobset-name', object.metadata.name] : []}}] : [])",
        env = field("env"),
        command = field("command"),
        args = field("args"),
        ns = last_set("nodeSelector"),
        aff = affinity,
    )
}

/// `sites`: the templates of the object under review (a Volcano Job is told from a
/// batch Job by its API group).
pub(crate) fn sites() -> String {
    format!(
        "object.kind == 'Pod' ? [{{'t': object, 'n': 1, 'u': false, 'f': 'spec', 'id': {pod}}}]\n: object.kind == 'Job' && object.apiVersion.startsWith('batch.volcano.sh/') ? {volcano}\n: object.kind == 'Job' ? {job}\n: object.kind == 'JobSet' ? {jobset}\n: object.kind == 'PyTorchJob' ? {pt}\n: object.kind == 'MPIJob' ? {mpi}\n: object.kind == 'PaddleJob' ? {paddle}\n: object.kind == 'TFJob' ? {tf}\n: object.kind == 'XGBoostJob' ? {xgb}\n: object.kind == 'JAXJob' ? {jax}\n: object.kind == 'LeaderWorkerSet' ? {lws}\n: object.kind == 'TrainJob' ? {tj}\n: object.kind == 'HyperPodPyTorchJob' ? {hp}\n: object.kind in ['TrainingRuntime', 'ClusterTrainingRuntime'] ? {rt}\n: object.kind in ['RayCluster', 'RayJob', 'RayService'] ? ({ray})\n: []",
        pod = POD_ID,
        volcano = controllers::volcano(),
        job = job(),
        jobset = jobset(),
        pt = replica_specs("pytorchReplicaSpecs"),
        mpi = replica_specs("mpiReplicaSpecs"),
        paddle = replica_specs("paddleReplicaSpecs"),
        tf = replica_specs("tfReplicaSpecs"),
        xgb = replica_specs("xgbReplicaSpecs"),
        jax = replica_specs("jaxReplicaSpecs"),
        lws = leader_worker_set(),
        tj = train_job(),
        hp = controllers::hyperpod(),
        rt = controllers::runtime(),
        ray = controllers::ray_kinds(),
    )
}

/// The accelerator resource a resource map `m` names with a count above zero (a zero
/// request of one name beside another hides nothing): exact names in catalog order,
/// then prefixes (`nvidia.com/mig-*`); `''` when none.
fn accel_key(catalog: &Catalog, m: &str) -> String {
    let mut out = String::new();
    for r in catalog.accelerator_resources() {
        match r.name.strip_suffix('*') {
            Some(prefix) => out.push_str(&format!(
                "{m}.exists(k, k.startsWith({p}) && string({m}[k]) != '0') ? {m}.filter(k, k.startsWith({p}) && string({m}[k]) != '0')[0] : ",
                p = lit(prefix)
            )),
            None => out.push_str(&format!(
                "{n} in {m} && string({m}[{n}]) != '0' ? {n} : ",
                n = lit(&r.name)
            )),
        }
    }
    out.push_str("''");
    format!("({out})")
}

/// `containers`: per site, the accelerator key of each container.
pub(crate) fn containers(catalog: &Catalog) -> String {
    let key = format!(
        "(has(c.resources) && has(c.resources.limits) && {l} != '' ? {l} : (has(c.resources) && has(c.resources.requests) ? {r} : ''))",
        l = accel_key(catalog, "c.resources.limits"),
        r = accel_key(catalog, "c.resources.requests"),
    );
    let rec = format!(
        "{{'c': c, 'key': {key}, 'side': has(c.restartPolicy) && c.restartPolicy == 'Always'}}"
    );
    format!(
        "variables.sites.map(s, {{'site': s,\n 'app': (has(s.t.spec) && has(s.t.spec.containers)) ? s.t.spec.containers.map(c, {rec}) : [],\n 'init': (has(s.t.spec) && has(s.t.spec.initContainers)) ? s.t.spec.initContainers.map(c, {rec}) : []}})"
    )
}

/// A device count: limits, else requests (the engine requires them equal).
fn quantity(c: &str, key: &str) -> String {
    format!(
        "int(string(has({c}.resources.limits) && {key} in {c}.resources.limits ? {c}.resources.limits[{key}] : {c}.resources.requests[{key}]))"
    )
}

fn efa(c: &str) -> String {
    let e = lit(RES_EFA);
    format!(
        "((has({c}.resources) && ((has({c}.resources.limits) && {e} in {c}.resources.limits) || (has({c}.resources.requests) && {e} in {c}.resources.requests))) ? {q} : 0)",
        q = quantity(c, &e)
    )
}

/// `devices`: per site, each container's counts, the accelerator name the pod is judged
/// under (the first a container asks for: names are never added to each other), and the
/// node-affinity terms.
pub(crate) fn devices() -> String {
    let rec = format!(
        "{{'c': r.c, 'key': r.key, 'side': r.side, 'n': r.key == '' ? 0 : {q}, 'efa': {e}}}",
        q = quantity("r.c", "r.key"),
        e = efa("r.c")
    );
    let na = "x.site.t.spec.affinity.nodeAffinity";
    let req = format!("{na}.requiredDuringSchedulingIgnoredDuringExecution");
    format!(
        "variables.containers.map(x, {{'site': x.site, 'app': x.app.map(r, {rec}), 'init': x.init.map(r, {rec}),\n 'res': ((x.app + x.init).filter(r, r.key != '').map(r, r.key) + [''])[0],\n 'spec': has(x.site.t.spec) ? x.site.t.spec : {{}},\n 'terms': (has(x.site.t.spec) && has(x.site.t.spec.affinity) && has(x.site.t.spec.affinity.nodeAffinity) && has({req}) && has({req}.nodeSelectorTerms)) ? {req}.nodeSelectorTerms : []}})"
    )
}

/// The instance-type and zone label keys, for the facts stage.
pub(crate) fn instance_type_keys() -> [&'static str; 2] {
    [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA]
}

pub(crate) fn zone_keys() -> [&'static str; 3] {
    ZONE_KEYS
}
