//! What the rules read about each template, as CEL variables (the engine's
//! `classify`): devices per pod, instance types, zones, training evidence, job size,
//! opt-ins, and the policy's constants (catalog, job labels, default type, grants).

use crate::facts::policy::{OptIn, Policy};
use crate::read::annotations::{
    ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, INSTANCE_TYPE, JOB_IDENTITY_LABELS, LABEL_ARGO_WORKFLOW,
    LABEL_COMPLETION_INDEX, LABEL_RAY_CLUSTER, LABEL_RAY_SERVE, LABEL_VOLCANO_JOB, TRAINING,
};
use crate::vap::error::ExportError;
use crate::vap::sites::{instance_type_keys, zone_keys};
use crate::vap::text::{NAMESPACE, fill, grant, list, lit, selector};

/// One `spec.variables` entry.
pub(crate) struct Variable {
    pub name: &'static str,
    pub expression: String,
}

/// `accel`: exact accelerator resource names -> family and whether it is a slice.
fn accel(policy: &Policy) -> String {
    let entries: Vec<String> = policy
        .catalog
        .accelerator_resources()
        .iter()
        .filter(|r| !r.name.ends_with('*'))
        .map(|r| {
            format!(
                "{}: {{'family': {}, 'shared': {}, 'cores': {}}}",
                lit(&r.name),
                lit(&r.family),
                r.shared,
                r.cores
            )
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// The family (`family`), slice flag (`shared`) or core-count flag (`cores`) of resource
/// name `r`: exact names from `variables.accel`, then prefixes inline.
fn resource_fact(policy: &Policy, r: &str, fact: &str) -> String {
    let mut out = format!("{r} in variables.accel ? variables.accel[{r}].{fact} : ");
    for p in policy.catalog.accelerator_resources() {
        if let Some(prefix) = p.name.strip_suffix('*') {
            let value = match fact {
                "family" => lit(&p.family),
                "cores" => p.cores.to_string(),
                _ => p.shared.to_string(),
            };
            out.push_str(&format!("{r}.startsWith({}) ? {value} : ", lit(prefix)));
        }
    }
    out.push_str(if fact == "family" { r } else { "false" });
    format!("({out})")
}

/// `catalog`: instance type -> accelerators, EFA interfaces, device resource, family and
/// device cores (`acceleratorCores`, 0 when the type has none).
fn catalog(policy: &Policy) -> String {
    let c = &policy.catalog;
    let entries: Vec<String> = c
        .instances()
        .map(|i| {
            let family = c
                .family_of(&i.accelerator_resource)
                .unwrap_or(&i.accelerator_resource);
            format!(
                "{}: {{'gpus': {}, 'efa': {}, 'resource': {}, 'family': {}, 'cores': {}}}",
                lit(&i.name),
                i.accelerators,
                i.max_efa,
                lit(&i.accelerator_resource),
                lit(family),
                i.accelerator_cores.unwrap_or(0)
            )
        })
        .collect();
    format!("{{{}}}", entries.join(",\n "))
}

/// The namespace overrides' `match` as CEL over `request.namespace` and the
/// namespace's labels.
pub(crate) fn namespace_match(
    m: &crate::facts::policy::NamespaceMatch,
    origin: &str,
) -> Result<String, ExportError> {
    let mut any = Vec::new();
    if m.names.iter().any(|n| n == "*") {
        return Ok("true".into());
    }
    if !m.names.is_empty() {
        any.push(format!("{NAMESPACE} in {}", list(&m.names)));
    }
    if let Some(sel) = &m.selector {
        // No namespace object for a cluster-scoped object (a ClusterTrainingRuntime).
        let labels = "(namespaceObject != null && has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})";
        any.push(format!("({})", selector(sel, labels, origin)?));
    }
    Ok(if any.is_empty() {
        "false".into()
    } else {
        any.join(" || ")
    })
}

/// A `defaults` value as it applies to the request's namespace: the policy's, replaced
/// by each namespace override that sets it, later ones winning (`''`: none).
pub(crate) fn per_namespace(
    policy: &Policy,
    pick: impl Fn(&crate::facts::policy::Defaults) -> Option<&String>,
) -> Result<String, ExportError> {
    let mut out = lit(pick(&policy.file().defaults).map_or("", String::as_str));
    for (i, ns) in policy.namespace_overrides().iter().enumerate() {
        if let Some(v) = pick(&ns.defaults) {
            let origin = format!("namespaces[{i}]");
            out = format!(
                "({} ? {} : {out})",
                namespace_match(&ns.matches, &origin)?,
                lit(v)
            );
        }
    }
    Ok(out)
}

/// `defaultType`: the policy's `defaults.instanceType` for the request's namespace.
fn default_type(policy: &Policy) -> Result<String, ExportError> {
    per_namespace(policy, |d| d.instance_type.as_ref())
}

/// An annotation of the template, else of the object around it; `''` when unset.
fn annotation(key: &str) -> String {
    fill(
        "(has(@T@.metadata) && has(@T@.metadata.annotations) && @K@ in @T@.metadata.annotations ? @T@.metadata.annotations[@K@] : (has(object.metadata.annotations) && @K@ in object.metadata.annotations ? object.metadata.annotations[@K@] : ''))",
        &[("T", "x.site.t"), ("K", &lit(key))],
    )
}

/// Node-affinity facts for label keys `keys`, prefixed `p`: constrained (`pc`),
/// bounded (every term has an `In` on a key: `pb`), the values each term allows (`pv`).
fn affinity(keys: &[&str], p: &str) -> String {
    let keys = list(keys);
    let is_in = format!("(e.key in {keys} && e.operator == 'In')");
    let first = format!("t.matchExpressions.filter(e, {is_in})[0]");
    format!(
        "'{p}c': x.terms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in {keys})),\n '{p}b': x.terms.all(t, has(t.matchExpressions) && t.matchExpressions.exists(e, {is_in})),\n '{p}v': x.terms.filter(t, has(t.matchExpressions) && t.matchExpressions.exists(e, {is_in})).map(t, (has({first}.values) ? {first}.values : []).filter(v, t.matchExpressions.all(e, !{is_in} || (has(e.values) && v in e.values))))"
    )
}

/// `pods`: per template, what one pod holds and where it may run.
fn pods(policy: &Policy) -> String {
    let spec = "x.spec";
    let ns_type = instance_type_keys()
        .iter()
        .rev()
        .fold("''".to_string(), |acc, k| {
            let k = lit(k);
            format!("(has({spec}.nodeSelector) && {k} in {spec}.nodeSelector ? {spec}.nodeSelector[{k}] : {acc})")
        });
    let zk = list(&zone_keys());
    let anti = format!("{spec}.affinity.podAntiAffinity");
    format!(
        "variables.devices.map(x, {{'f': x.site.f, 'n': x.site.n, 'u': x.site.u, 'id': x.site.id,
 'g': [x.app.filter(r, r.key == x.res).map(r, r.n).sum() + x.init.filter(r, r.side && r.key == x.res).map(r, r.n).sum(), ([0] + x.init.filter(r, !r.side && r.key == x.res).map(r, r.n)).max()].max(),
 'efa': [x.app.map(r, r.efa).sum() + x.init.filter(r, r.side).map(r, r.efa).sum(), ([0] + x.init.filter(r, !r.side).map(r, r.efa)).max()].max(),
 'res': x.res,
 'shared': (x.app + x.init).exists(r, r.key != '' && {shared}),
 'cores': (x.app + x.init).exists(r, r.key != '' && {cores}),
 'dc': x.app.filter(r, r.n > 0 || r.efa > 0),
 'claims': has({spec}.resourceClaims) && size({spec}.resourceClaims) > 0,
 'labels': has(x.site.t.metadata) && has(x.site.t.metadata.labels) ? x.site.t.metadata.labels : {{}},
 'training': has(x.site.t.metadata) && has(x.site.t.metadata.annotations) && {tr} in x.site.t.metadata.annotations && x.site.t.metadata.annotations[{tr}] == 'true',
 'annType': {ann_type}, 'optP': {opt_p} == 'true', 'optZ': {opt_z} == 'true',
 'nsType': {ns_type},
 'ksel': (has({spec}.nodeSelector) && {spec}.nodeSelector.exists(k, k in {ksel})) || x.terms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in {ksel})),
 {it},
 {zone},
 'zpin': has({spec}.nodeSelector) && {spec}.nodeSelector.exists(k, k in {zk}),
 'zspread': has({spec}.topologySpreadConstraints) && {spec}.topologySpreadConstraints.exists(c, has(c.topologyKey) && c.topologyKey in {zk} && !(has(c.whenUnsatisfiable) && c.whenUnsatisfiable == 'ScheduleAnyway')),
 'zanti': has({spec}.affinity) && has({spec}.affinity.podAntiAffinity) && has({anti}.requiredDuringSchedulingIgnoredDuringExecution) && {anti}.requiredDuringSchedulingIgnoredDuringExecution.exists(t, has(t.topologyKey) && t.topologyKey in {zk} && size(x.site.id) == 2 && has(t.labelSelector) && ((has(t.labelSelector.matchLabels) && x.site.id[0] in t.labelSelector.matchLabels && t.labelSelector.matchLabels[x.site.id[0]] == x.site.id[1]) || (size(t.labelSelector) > 0 && has(t.matchLabelKeys) && x.site.id[0] in t.matchLabelKeys)))}})",
        shared = resource_fact(policy, "r.key", "shared"),
        cores = resource_fact(policy, "r.key", "cores"),
        tr = lit(TRAINING),
        // Karpenter's instance labels (and EKS Auto Mode's and GPU Feature Discovery's):
        // a pod that selects by them reaches the types they allow (the engine's
        // `selection`), not the annotation's or the namespace's default type; the
        // policies judge no type for it rather than the wrong one.
        ksel = list(&crate::judge::selection::selection_labels().collect::<Vec<_>>()),
        ann_type = annotation(INSTANCE_TYPE),
        opt_p = annotation(ALLOW_PARTIAL_NODE),
        opt_z = annotation(ALLOW_MULTI_AZ),
        it = affinity(&instance_type_keys(), "t"),
        zone = affinity(&zone_keys(), "z"),
    )
}

/// Catalog types named `name` (or `ml.` + a catalog type: SageMaker HyperPod).
fn named(name: &str) -> String {
    format!("variables.catalogNames.filter(n, n == {name} || 'ml.' + n == {name})")
}

/// Owner references read on a pod; a pod with more has no serving owner here.
const MAX_OWNERS: usize = 16;

/// `rayServing`: the object is a Pod whose controller is a RayCluster (the engine's
/// reading of a KubeRay serving pod, with its `ray.io/serve` label).
fn ray_serving() -> String {
    format!(
        "object.kind == 'Pod' && has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) <= {MAX_OWNERS} && object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller == true && o.kind == 'RayCluster')"
    )
}

/// `templates`: the pod facts (`p`) with the candidate instance types, the zone
/// verdict and whether the template is a training pod.
fn templates(policy: &Policy) -> Result<String, ExportError> {
    let mut training = vec![
        // Argo's workflow label is on every step's pod: it says nothing of a job.
        // Nor does a Ray cluster's on a pod KubeRay made for serving (`ray.io/serve`).
        format!(
            "(size(x.id) > 0 && x.id[0] != {} && !(x.id[0] == {} && {} in x.labels && variables.rayServing))",
            lit(LABEL_ARGO_WORKFLOW),
            lit(LABEL_RAY_CLUSTER),
            lit(LABEL_RAY_SERVE)
        ),
        format!("{} in x.labels", lit(LABEL_COMPLETION_INDEX)),
        "x.training".to_string(),
    ];
    for (i, s) in policy
        .file()
        .training_selectors
        .iter()
        .flatten()
        .enumerate()
    {
        training.push(format!(
            "({})",
            selector(s, "x.labels", &format!("trainingSelectors[{i}]"))?
        ));
    }
    Ok(format!(
        "variables.pods.map(x, {{'p': x,
 'fam': {fam},
 'dev': x.g > 0 || x.efa > 0 || x.claims,
 'train': {train},
 'types': x.nsType != '' ? {ns}
   : (x.tc && x.tb && x.tv.exists(l, size(l) > 0)) ? variables.catalogNames.filter(n, x.tv.exists(l, n in l || ('ml.' + n) in l))
   : x.annType != '' && !x.ksel ? {ann}
   : variables.defaultType != '' && !x.ksel ? ({fam} == '' || {def}.exists(n, variables.catalog[n].family == {fam}) ? {def} : variables.catalogNames.filter(n, variables.catalog[n].family == {fam} && variables.catalog[n].gpus >= x.g)) : [],
 'zmany': !x.zpin && x.zc && x.zb && x.zv.exists(l, size(l) > 0) && x.zv.exists(l, l.exists(v, v != x.zv.filter(l2, size(l2) > 0)[0][0]))}})",
        fam = resource_fact(policy, "x.res", "family"),
        train = training.join(" || "),
        ns = named("x.nsType"),
        ann = named("x.annType"),
        def = named("variables.defaultType"),
    ))
}

/// Launchers and flags of `recognize::command_size`: torchrun / deepspeed node counts,
/// and MPI's process count (when the line mentions mpi). `SEP` splits tokens as the
/// engine does (whitespace, quotes, `;`).
const LAUNCHERS: [&str; 7] = [
    "torchrun",
    "deepspeed",
    "mpirun",
    "mpiexec",
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate",
];
const SEP: &str = r#"[\s"';]"#;
/// Node-count flags, with the unique prefixes argparse accepts (`--nnode`, `--num_n`).
const NODE_FLAGS: &str = "--nn[a-z]*|--num_n[a-z_]*|--num-n[a-z-]*|--num[_-]machines";
const PROCESS_FLAGS: &str = "-np|-n|--np";

/// `podLine`, `podFlag`: the first device container's command line, and its first
/// size flag with its value (the Kubernetes regex library's `find`).
fn pod_command(policy: &Policy) -> (String, String) {
    let c = "variables.pods[0].dc[0].c";
    let line = format!(
        "object.kind == 'Pod' && size(variables.pods) == 1 && size(variables.pods[0].dc) > 0 ? ((has({c}.command) ? {c}.command : []) + (has({c}.args) ? {c}.args : [])).join(' ') : ''"
    );
    if !policy.recognizers().command_line.unwrap_or(true) {
        return (line, "''".into());
    }
    let flag = |flags: &str| lit(&format!("(^|{SEP})({flags})(=|{SEP}+)[^\\s\"';]+"));
    let flag_text = format!(
        "{list}.exists(l, variables.podLine.contains(l)) ? variables.podLine.find(variables.podLine.contains('mpi') ? {all} : {node}) : ''",
        list = list(&LAUNCHERS),
        all = flag(&format!("{NODE_FLAGS}|{PROCESS_FLAGS}")),
        node = flag(NODE_FLAGS),
    );
    (line, flag_text)
}

/// The job size a launcher flag says: a node count (the maximum of `MIN:MAX`), or
/// processes over the pod's GPUs; not a number = several pods.
fn flag_size() -> String {
    let value = lit("[^\\s\"';=]+$");
    let node = lit(&format!("(^|{SEP})({NODE_FLAGS})(=|{SEP})"));
    format!(
        "(variables.podFlag.matches({node}) ? (variables.podFlag.find({value}).find('[^:]*$').matches('^0*[01]$') ? 0 : 1) : (variables.podFlag.find({value}).matches('^[0-9]{{1,9}}$') && int(variables.podFlag.find({value})) <= [variables.pods[0].g, 1].max() ? 0 : 1))"
    )
}

/// `podEnv`, `podSize`: a bare Pod's job size from its first device container's
/// launcher env (`recognize::env_size`), then its command line: -1 unknown, 0 one
/// pod, 1 several.
fn pod_size(policy: &Policy) -> (String, String) {
    let env = "object.kind == 'Pod' && size(variables.pods) == 1 && size(variables.pods[0].dc) > 0 && has(variables.pods[0].dc[0].c.env) ? variables.pods[0].dc[0].c.env : []".to_string();
    let value_from = policy.file().recognizers.env_value_from.unwrap_or(true);
    // The kubelet gives a container the last entry of a name.
    let named = |name: &str| format!("variables.podEnv.filter(e, e.name == {})", lit(name));
    let last = |list: &str| format!("{list}[size({list}) - 1]");
    let (nn, ws, np) = (
        named("PET_NNODES"),
        named("WORLD_SIZE"),
        named("PET_NPROC_PER_NODE"),
    );
    let (nn1, ws1, np1) = (last(&nn), last(&ws), last(&np));
    // `PET_*` counts only when the container runs torchrun, the one launcher that reads
    // it (`recognize::env_size`): a command-line token named torchrun or
    // torch.distributed.run/launch.
    let torchrun = format!(
        "variables.podLine.matches({})",
        lit(r#"(^|[\s"'`;|&/])(torchrun|torch[.]distributed[.](run|launch))($|[\s"'`;|&])"#)
    );
    // A pod runs at most one rank per accelerator it holds.
    let per = format!(
        "[[{torchrun} && size({np}) > 0 && has({np1}.value) && {np1}.value.matches('^[0-9]{{1,9}}$') ? int({np1}.value) : variables.pods[0].g, 1].max(), [variables.pods[0].g, 1].max()].min()"
    );
    let standalone = lit(&format!("(^|{SEP})--stan[a-z]*($|{SEP})"));
    // A launcher's flag wins over its env.
    let size = format!(
        "object.kind != 'Pod' || size(variables.pods) != 1 || size(variables.pods[0].dc) == 0 ? -1
: variables.podLine.contains('torch') && variables.podLine.matches({standalone}) ? 0
: variables.podFlag != '' ? {flag}
: {torchrun} && size({nn}) > 0 && has({nn1}.value) ? ({nn1}.value.matches('^(.*:)?[ \\t]*[+]?(0+|0*1)[ \\t]*$') ? 0 : 1)
: {value_from} && (({torchrun} && size({nn}) > 0 && has({nn1}.valueFrom)) || (size({ws}) > 0 && has({ws1}.valueFrom))) ? 1
: size({ws}) > 0 && has({ws1}.value) && {ws1}.value.matches('^[0-9]{{1,9}}$') ? (int({ws1}.value) > {per} ? 1 : 0)
: -1",
        flag = flag_size()
    );
    (env, size)
}

/// Job labels the engine reads on a pod (Ray and Volcano only when their
/// recognisers are on), and on templates (all).
fn job_labels(policy: &Policy, pods: bool) -> String {
    let on = policy.recognizers();
    let labels: Vec<&str> = JOB_IDENTITY_LABELS
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| {
            !pods
                || match *k {
                    LABEL_RAY_CLUSTER => on.ray.unwrap_or(true),
                    LABEL_VOLCANO_JOB => on.volcano.unwrap_or(true),
                    _ => true,
                }
        })
        .collect();
    list(&labels)
}

pub(crate) fn grant_of(policy: &Policy, opt: OptIn) -> String {
    let o = policy.file().opt_ins.as_ref();
    grant(o.and_then(|o| match opt {
        OptIn::AllowPartialNode => o.allow_partial_node.as_ref(),
        OptIn::AllowMultiAz => o.allow_multi_az.as_ref(),
        OptIn::Skip => o.skip.as_ref(),
        OptIn::Reshape => o.reshape.as_ref(),
    }))
}

/// Whether the requester may skip trainplace (`trainplace.io/skip: "true"`, granted).
pub(crate) fn skip_granted(policy: &Policy) -> String {
    grant_of(policy, OptIn::Skip)
}

/// Every variable, in evaluation order.
pub(crate) fn variables(policy: &Policy) -> Result<Vec<Variable>, ExportError> {
    let (env, size) = pod_size(policy);
    let (line, flag) = pod_command(policy);
    let v = |name, expression| Variable { name, expression };
    let names: Vec<&str> = policy
        .catalog
        .instances()
        .map(|i| i.name.as_str())
        .collect();
    Ok(vec![
        v("accel", accel(policy)),
        v("catalog", catalog(policy)),
        v("catalogNames", list(&names)),
        v("jobLabels", job_labels(policy, false)),
        v("podJobLabels", job_labels(policy, true)),
        v("defaultType", default_type(policy)?),
        v(
            "grantPartialNode",
            grant_of(policy, OptIn::AllowPartialNode),
        ),
        v("grantMultiAz", grant_of(policy, OptIn::AllowMultiAz)),
        v("runtimeSpecs", crate::vap::sites::runtime_specs()),
        v("trains", crate::vap::controllers::trains()),
        v("sites", crate::vap::sites::sites()),
        v("containers", crate::vap::sites::containers(&policy.catalog)),
        v("devices", crate::vap::sites::devices()),
        v(
            "tooLarge",
            crate::vap::bounds::too_large(&["sites"], Some("devices")),
        ),
        v("pods", pods(policy)),
        v("rayServing", ray_serving()),
        v("templates", templates(policy)?),
        v("podEnv", env),
        v("podLine", line),
        v("podFlag", flag),
        v("podSize", size),
        // -1: a template's count is unknown (judged as many pods).
        v(
            "total",
            "variables.pods.exists(x, (x.g > 0 || x.efa > 0) && x.u) ? -1 : variables.pods.filter(x, x.g > 0 || x.efa > 0).map(x, x.n).sum()".into(),
        ),
    ])
}
