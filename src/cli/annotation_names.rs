//! A `trainplace.io/` annotation trainplace does not read is most likely a misspelt one
//! (`allow-partial-nodes`), which the engine would silently ignore: the CLI warns and
//! names the closest annotation it does read.

use serde_json::Value;
use trainplace_engine::annotations as a;

/// What trainplace reads or writes under its prefix: the annotations, and the labels
/// that name a job (written by users on pods no operator labels).
const KNOWN: [&str; 13] = [
    a::ALLOW_PARTIAL_NODE,
    a::ALLOW_MULTI_AZ,
    a::SKIP,
    a::INSTANCE_TYPE,
    a::SHM_SIZE,
    a::NCCL_DEBUG,
    a::RESHAPE,
    a::TRAINING,
    a::EXPECTED_DURATION,
    a::MUTATED,
    ADMITTED,
    a::LABEL_JOB,
    a::LABEL_RENDEZVOUS,
];

/// The signed admission mark (the engine's `mark::ADMITTED`, not exported).
const ADMITTED: &str = "trainplace.io/admitted";

const PREFIX: &str = "trainplace.io/";

/// One warning per unknown `trainplace.io/` annotation anywhere in the object (its own
/// metadata and every pod template's), naming where it is and the closest known name.
pub fn warnings(object: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(object, "", &mut out);
    out
}

fn walk(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                if key == "annotations"
                    && path.ends_with("metadata")
                    && let Value::Object(annotations) = child
                {
                    for name in annotations.keys() {
                        if let Some(message) = unknown(name, &here) {
                            out.push(message);
                        }
                    }
                } else {
                    walk(child, &here, out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn unknown(name: &str, at: &str) -> Option<String> {
    let rest = name.strip_prefix(PREFIX)?;
    if KNOWN.contains(&name) {
        return None;
    }
    let (best, distance) = KNOWN
        .iter()
        .map(|k| (*k, strsim::levenshtein(rest, &k[PREFIX.len()..])))
        .min_by_key(|(_, d)| *d)?;
    let close = distance <= 3.max(rest.len() / 3);
    Some(if close {
        format!(
            "{at}: {name} is not an annotation trainplace reads, so it has no effect; did you mean {best}?"
        )
    } else {
        format!(
            "{at}: {name} is not an annotation trainplace reads, so it has no effect (the annotations: docs/annotations.md)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_misspelt_annotation_names_the_closest_one() {
        let pod = json!({"kind": "Pod", "metadata": {"annotations": {
            "trainplace.io/allow-partial-nodes": "true",
            "trainplace.io/allow-multi-az": "true",
            "example.com/other": "x"}}});
        assert_eq!(
            warnings(&pod),
            [
                "metadata.annotations: trainplace.io/allow-partial-nodes is not an annotation trainplace reads, so it has no effect; did you mean trainplace.io/allow-partial-node?"
            ]
        );
    }

    #[test]
    fn templates_are_read_and_far_names_get_no_guess() {
        let job = json!({"kind": "Job", "spec": {"template": {"metadata": {"annotations": {
            "trainplace.io/completely-different-thing": "1",
            "trainplace.io/shmsize": "1Gi"}}}}});
        let w = warnings(&job);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with(
            "spec.template.metadata.annotations: trainplace.io/completely-different-thing"
        ));
        assert!(w[0].ends_with("(the annotations: docs/annotations.md)"));
        assert!(w[1].ends_with("did you mean trainplace.io/shm-size?"));
    }
}
