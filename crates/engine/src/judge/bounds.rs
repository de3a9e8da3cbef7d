//! The sizes past which trainplace refuses an object as too large to judge, the same
//! in the engine and in the exported policies, so both walk lists of bounded length.
//! The API server evaluates a policy's walk over a list in time that grows with the
//! square of its length (measured: docs/performance.md), so a policy may only walk a
//! list whose size it has read first. No real training object comes near these; a
//! hostile one is refused (`too-large`), not walked.
//!
//! Three levels, each read only after the one before holds:
//! 1. the object's own lists of templates (replicated jobs, tasks, worker groups,
//!    runtime patches...);
//! 2. each template's containers, and each container's resource names: every
//!    template, since no one can tell whether it asks for an accelerator before
//!    reading them;
//! 3. in precise mode, a template that asks for devices: each container's env (the
//!    launcher's job size), its required node-selector terms, their expressions and
//!    values, its topology spread constraints and required pod anti-affinity terms.
//!    Strict mode reads none of these but the terms, which it bounds itself
//!    (`judge::strict`).

use serde_json::Value;

use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::RES_EFA;
use crate::read::json::Lookup as _;
use crate::read::json::items;
use crate::read::templates::{Template, every_template};
use crate::read::workload::{Kind, Site};
use trainplace_catalog::Catalog;

/// Entries of one of an object's lists of templates (level 1).
pub const MAX_TEMPLATES: usize = 64;
/// Containers and init containers of one pod template.
pub const MAX_CONTAINERS: usize = 64;
/// Resource names in one container's limits, or in its requests.
pub const MAX_LIMITS: usize = 32;
/// Env entries of one container of a template that asks for devices.
pub const MAX_ENV: usize = 512;
/// Required node-selector terms of one template.
pub const MAX_TERMS: usize = 32;
/// Match expressions of one term.
pub const MAX_EXPRESSIONS: usize = 32;
/// Values of one match expression.
pub const MAX_VALUES: usize = 64;
/// Topology spread constraints, and required pod anti-affinity terms, of one template.
pub const MAX_SPREAD: usize = 32;

/// The lists of templates each kind keeps: kind, the API group prefix that tells it
/// from another kind of that name (`None`: any), and the field's path.
pub const TEMPLATE_LISTS: [(&str, Option<&str>, &str); 15] = [
    ("JobSet", None, "spec.replicatedJobs"),
    ("Job", Some("batch.volcano.sh/"), "spec.tasks"),
    ("PyTorchJob", None, "spec.pytorchReplicaSpecs"),
    ("MPIJob", None, "spec.mpiReplicaSpecs"),
    ("PaddleJob", None, "spec.paddleReplicaSpecs"),
    ("TFJob", None, "spec.tfReplicaSpecs"),
    ("XGBoostJob", None, "spec.xgbReplicaSpecs"),
    ("JAXJob", None, "spec.jaxReplicaSpecs"),
    ("TrainJob", None, "spec.runtimePatches"),
    ("HyperPodPyTorchJob", None, "spec.replicaSpecs"),
    ("TrainingRuntime", None, "spec.template.spec.replicatedJobs"),
    (
        "ClusterTrainingRuntime",
        None,
        "spec.template.spec.replicatedJobs",
    ),
    ("RayCluster", None, "spec.workerGroupSpecs"),
    ("RayJob", None, "spec.rayClusterSpec.workerGroupSpecs"),
    ("RayService", None, "spec.rayClusterConfig.workerGroupSpecs"),
];

/// Inside each of a TrainJob's runtime patches: the replicated jobs it patches.
pub const PATCH_JOBS: &str = "trainingRuntimeSpec.template.spec.replicatedJobs";

/// The fix a too-large finding gives (also in the exported policy).
pub const FIX: &str = "split the object, or shorten the list to the bound; a training pod needs a handful of containers and resource names and a few dozen env entries. Ask the platform team if a real workload needs more.";

/// The number of entries of the list or map at the dotted `path` of `v`.
fn len_at(v: &Value, path: &str) -> usize {
    let mut at = v;
    for part in path.split('.') {
        match at.get(part) {
            Some(next) => at = next,
            None => return 0,
        }
    }
    match at {
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        _ => 0,
    }
}

fn found(site: String, what: String) -> Finding {
    Finding {
        rule: Rule::TooLarge,
        mode: crate::facts::policy::Mode::Enforce,
        site,
        found: format!(
            "{what}; trainplace judges only objects within its bounds (docs/security.md, Shapes and bounds)."
        ),
        fix: FIX.into(),
        opt_in: None,
        why: None,
    }
}

/// The most bytes an object's annotations hold together, keys and values: the API
/// server's own limit (`TotalAnnotationSizeLimitB` in apimachinery's object meta
/// validation). An object past it is never stored, so its validation runs before any
/// validating policy and the exported policies need not repeat this bound; the engine
/// reads it first because a mutating review comes before that validation, and a TrainJob's
/// node pod carries a copy of the annotations.
/// <https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set>
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// Level 0: annotations past what the API server stores.
fn annotations(object: &Value) -> Option<Finding> {
    let map = object.lookup("/metadata/annotations")?.as_object()?;
    let mut bytes = 0usize;
    for (k, v) in map {
        bytes += k.len() + v.as_str().map_or(0, str::len);
        if bytes > MAX_ANNOTATION_BYTES {
            return Some(found(
                "metadata.annotations".into(),
                format!(
                    "{} entries holding more than {MAX_ANNOTATION_BYTES} bytes of keys and values, past what the API server stores (it refuses this object whatever trainplace answers)",
                    map.len()
                ),
            ));
        }
    }
    None
}

/// Level 1: a list of templates past [`MAX_TEMPLATES`].
fn template_lists(object: &Value) -> Option<Finding> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let api = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    for (k, group, path) in TEMPLATE_LISTS {
        if k != kind || group.is_some_and(|g| !api.starts_with(g)) {
            continue;
        }
        let n = len_at(object, path);
        if n > MAX_TEMPLATES {
            return Some(found(
                path.into(),
                format!("{n} entries (at most {MAX_TEMPLATES})"),
            ));
        }
        if kind == "TrainJob" {
            for p in items(object, &["spec", "runtimePatches"]) {
                let n = len_at(p, PATCH_JOBS);
                if n > MAX_TEMPLATES {
                    return Some(found(
                        format!("spec.runtimePatches[].{PATCH_JOBS}"),
                        format!("{n} entries (at most {MAX_TEMPLATES})"),
                    ));
                }
            }
        }
    }
    None
}

fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    items(spec, &["containers"])
        .iter()
        .chain(items(spec, &["initContainers"]))
}

/// Level 2: a template's containers, and each container's resource names.
fn template_shape(spec: &Value, field: &str) -> Option<Finding> {
    let n = items(spec, &["containers"]).len() + items(spec, &["initContainers"]).len();
    if n > MAX_CONTAINERS {
        return Some(found(
            field.into(),
            format!("{n} containers and init containers (at most {MAX_CONTAINERS})"),
        ));
    }
    for c in containers(spec) {
        for which in ["limits", "requests"] {
            let n = c
                .get("resources")
                .and_then(|r| r.get(which))
                .and_then(Value::as_object)
                .map_or(0, serde_json::Map::len);
            if n > MAX_LIMITS {
                return Some(found(
                    field.into(),
                    format!("{n} resource names in one container's {which} (at most {MAX_LIMITS})"),
                ));
            }
        }
    }
    None
}

/// A count that is not zero (an unreadable one counts: the API server refuses it).
fn nonzero(q: &Value) -> bool {
    crate::read::quantity::parse_count(q).map_or(true, |n| n > 0)
}

/// Whether a template asks for devices as the precise policies read it: a catalog
/// accelerator or EFA in a container's limits or requests, or a DRA claim. Walks at
/// most [`MAX_CONTAINERS`] x [`MAX_LIMITS`] names (level 2 holds).
fn asks_for_devices(spec: &Value, catalog: &Catalog) -> bool {
    if !items(spec, &["resourceClaims"]).is_empty() {
        return true;
    }
    let accelerators = catalog.accelerator_resources();
    let device = |k: &str| {
        k == RES_EFA
            || accelerators.iter().any(|r| match r.name.strip_suffix('*') {
                Some(prefix) => k.starts_with(prefix),
                None => k == r.name,
            })
    };
    containers(spec).any(|c| {
        ["/resources/limits", "/resources/requests"]
            .iter()
            .filter_map(|p| c.lookup(p).and_then(Value::as_object))
            .any(|m| m.iter().any(|(k, q)| device(k) && nonzero(q)))
    })
}

/// What is past the bounds in a template's required node-selector terms: their count,
/// then any term's expressions, then any expression's values (strict mode reads them
/// too, `judge::strict`).
pub(crate) fn node_terms_past(spec: &Value) -> Option<String> {
    let terms = items(
        spec,
        &[
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        ],
    );
    if terms.len() > MAX_TERMS {
        let n = terms.len();
        return Some(format!(
            "{n} required node-selector terms (at most {MAX_TERMS})"
        ));
    }
    let exprs = || terms.iter().map(|t| items(t, &["matchExpressions"]));
    if let Some(n) = exprs().map(<[Value]>::len).find(|n| *n > MAX_EXPRESSIONS) {
        return Some(format!(
            "{n} match expressions in one node-selector term (at most {MAX_EXPRESSIONS})"
        ));
    }
    exprs()
        .flatten()
        .map(|e| items(e, &["values"]).len())
        .find(|n| *n > MAX_VALUES)
        .map(|n| format!("{n} values in one node-selector expression (at most {MAX_VALUES})"))
}

/// Level 3: the lists precise mode reads on a template that asks for devices.
fn device_lists(spec: &Value, field: &str) -> Option<Finding> {
    for c in containers(spec) {
        let n = items(c, &["env"]).len();
        if n > MAX_ENV {
            return Some(found(
                field.into(),
                format!("{n} env entries in one container (at most {MAX_ENV})"),
            ));
        }
    }
    if let Some(what) = node_terms_past(spec) {
        return Some(found(field.into(), what));
    }
    let spread = items(spec, &["topologySpreadConstraints"]).len();
    let anti = items(
        spec,
        &[
            "affinity",
            "podAntiAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        ],
    )
    .len();
    for (n, what) in [
        (spread, "topology spread constraints"),
        (anti, "required pod anti-affinity terms"),
    ] {
        if n > MAX_SPREAD {
            return Some(found(
                field.into(),
                format!("{n} {what} (at most {MAX_SPREAD})"),
            ));
        }
    }
    None
}

/// A template's pod spec (`null` when it has none).
fn spec_of<'t>(t: &'t Template<'_>) -> &'t Value {
    static NULL: Value = Value::Null;
    t.value.get("spec").unwrap_or(&NULL)
}

/// A TrainJob's trainer env and runtime patches, each pod spec on its own, before they
/// are merged into the node pod (which copies them): the same bounds, so a list past
/// them costs no merge. Only the engine merges patches' containers; the exported policies read
/// nothing of them but node selection, which the merged pod's bounds cover.
fn patch_specs(object: &Value, catalog: &Catalog, strict: bool) -> Option<Finding> {
    if object.get("kind").and_then(Value::as_str) != Some("TrainJob") {
        return None;
    }
    // The trainer's own env, before the node pod copies it (precise mode reads it when
    // the trainer asks for devices, as the policies read `spec.trainer.env`).
    if !strict && let Some(trainer) = object.lookup("/spec/trainer") {
        let resources = trainer
            .get("resourcesPerNode")
            .cloned()
            .unwrap_or(Value::Null);
        let asks = serde_json::json!({"containers": [{"resources": resources}]});
        let env = items(trainer, &["env"]).len();
        if env > MAX_ENV && asks_for_devices(&asks, catalog) {
            return Some(found(
                "spec.trainer".into(),
                format!("{env} env entries in one container (at most {MAX_ENV})"),
            ));
        }
    }
    let field = format!("spec.runtimePatches[].{PATCH_JOBS}[].template.spec.template.spec");
    for p in items(object, &["spec", "runtimePatches"]) {
        let jobs = p
            .lookup("/trainingRuntimeSpec/template/spec/replicatedJobs")
            .and_then(Value::as_array);
        for job in jobs.into_iter().flatten() {
            let Some(spec) = job.lookup("/template/spec/template/spec") else {
                continue;
            };
            let f = template_shape(spec, &field).or_else(|| {
                if strict {
                    None
                } else {
                    device_lists(spec, &field)
                }
            });
            if f.is_some() {
                return f;
            }
        }
    }
    None
}

/// The finding on an object past the bounds, if it is: its lists of templates, then
/// each template's containers, then (precise mode) the lists of the templates that
/// ask for devices. `node_pod` assembles a TrainJob's node pod, once its patches are
/// known to be few.
pub(crate) fn too_large(
    object: &Value,
    kind: Kind,
    sites: &[Site],
    node_pod: impl FnOnce() -> Option<Value>,
    catalog: &Catalog,
    strict: bool,
) -> Option<Finding> {
    if let Some(f) = annotations(object) {
        return Some(f);
    }
    if let Some(f) = template_lists(object) {
        return Some(f);
    }
    if let Some(f) = patch_specs(object, catalog, strict) {
        return Some(f);
    }
    let templates = every_template(object, kind, sites, node_pod());
    for t in &templates {
        if let Some(f) = template_shape(spec_of(t), &t.field) {
            return Some(f);
        }
    }
    if strict {
        return None;
    }
    templates.iter().find_map(|t| {
        let spec = spec_of(t);
        asks_for_devices(spec, catalog)
            .then(|| device_lists(spec, &t.field))
            .flatten()
    })
}
