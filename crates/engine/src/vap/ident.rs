//! The job label a template's pods will carry, as CEL `[key, value]` (`[]` when
//! unknown): one of the job labels already on the template, else what the kind's
//! controller puts on its pods (the engine's `workload::site`). Leaf module.

use crate::vap::text::{fill, lit};

const TEMPLATE_ID: &str = "((has(@T@.metadata) && has(@T@.metadata.labels) && @L@.exists(k, k in @T@.metadata.labels)) ? [@L@.filter(k, k in @T@.metadata.labels)[0], @T@.metadata.labels[@L@.filter(k, k in @T@.metadata.labels)[0]]] : @F@)";

/// A label of `labels` (a CEL list) on template `template`, else `fallback`.
pub(crate) fn template_id(template: &str, labels: &str, fallback: &str) -> String {
    fill(
        TEMPLATE_ID,
        &[("T", template), ("L", labels), ("F", fallback)],
    )
}

/// A job label on the template, else `label` with the workload's name.
pub(crate) fn workload_id(template: &str, label: &str) -> String {
    template_id(
        template,
        "variables.jobLabels",
        &format!(
            "(has(object.metadata.name) ? [{}, object.metadata.name] : [])",
            lit(label)
        ),
    )
}

/// The pods a Job spec runs at once, as the Job controller computes them (the engine's
/// `workload::active_pods`): `parallelism`, never more than `completions` when set.
pub(crate) fn active_pods(spec: &str) -> String {
    let p = format!("(has({spec}.parallelism) ? {spec}.parallelism : 1)");
    format!("(has({spec}.completions) ? [{p}, {spec}.completions].min() : {p})")
}
