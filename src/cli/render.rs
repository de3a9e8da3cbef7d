//! Human output of the dry-run: a compact report per object, YAML of the mutated
//! objects, unified diffs.

use std::fmt::Write;

use serde_json::Value;
use trainplace_engine::{Change, Mode, Verdict};

pub struct ObjectReport<'a> {
    pub original: &'a Value,
    pub verdict: &'a Verdict,
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
pub fn title(v: &Verdict) -> String {
    let name = if v.name.is_empty() {
        "(unnamed)"
    } else {
        &v.name
    };
    if cluster_scoped(&v.object) {
        format!("{} {name}", v.kind)
    } else {
        format!("{} {}/{}", v.kind, v.namespace, name)
    }
}

/// Kinds that have no namespace: the API server's cluster-scoped resources among what
/// manifests carry next to training jobs (core, RBAC, admission, storage, scheduling,
/// DRA, CRDs) and the training and node-provisioning CRDs that are cluster-scoped.
const CLUSTER_SCOPED: [&str; 24] = [
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "StorageClass",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "PriorityClass",
    "RuntimeClass",
    "IngressClass",
    "DeviceClass",
    "ResourceSlice",
    "ClusterTrainingRuntime",
    "NodePool",
];

/// Whether the object is of a cluster-scoped kind (Karpenter's EC2NodeClass too).
pub fn cluster_scoped(object: &Value) -> bool {
    let kind = object["kind"].as_str().unwrap_or("");
    CLUSTER_SCOPED.contains(&kind) || kind == "EC2NodeClass"
}

/// The per-object report. `with_changes` lists each change (check); mutate prints
/// the objects on stdout and this summary on stderr.
pub fn text(reports: &[ObjectReport<'_>], with_changes: bool) -> String {
    let mut s = String::new();
    for r in reports {
        let v = r.verdict;
        let status = if !v.allowed {
            "DENIED"
        } else if v.findings.iter().any(|f| f.mode == Mode::Warn) {
            "allowed with warnings"
        } else {
            "allowed"
        };
        let changes = match v.changes.len() {
            0 => "no changes".to_string(),
            1 => "1 change".to_string(),
            n => format!("{n} changes"),
        };
        let _ = writeln!(s, "{}: {status} ({changes})", title(v));
        for f in &v.findings {
            let _ = writeln!(
                s,
                "  {} [{}] {}: {}",
                f.mode.as_str(),
                f.rule.as_str(),
                f.site,
                f.found
            );
            let _ = writeln!(s, "      fix: {}", f.fix);
            if let Some(a) = f.opt_in {
                let _ = writeln!(s, "      opt in: {a}: \"true\"");
            }
            if let Some(why) = &f.why {
                let _ = writeln!(s, "      why: {why}");
            }
        }
        for n in &v.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        if with_changes {
            changes_text(&mut s, &v.changes);
        }
    }
    s
}

/// The change lines, under the template each was made in when they were made in more
/// than one (`in spec.pytorchReplicaSpecs.Worker.template.spec:`); a change to the
/// workload itself (a reshape) is listed under `in the object:`.
fn changes_text(s: &mut String, changes: &[Change]) {
    let mut sites: Vec<&str> = Vec::new();
    for c in changes {
        if !sites.contains(&c.site.as_str()) {
            sites.push(&c.site);
        }
    }
    let headed = sites.len() > 1;
    for site in sites {
        if headed {
            let name = if site.is_empty() { "the object" } else { site };
            let _ = writeln!(s, "  in {name}:");
        }
        let indent = if headed { "    " } else { "  " };
        for c in changes.iter().filter(|c| c.site == site) {
            let _ = writeln!(s, "{indent}+ {} ({})", c.what, c.why);
        }
    }
}

/// The mutated objects that may be applied, as one multi-document YAML stream that
/// kubectl reads back unchanged. Denied objects are left out: `trainplace mutate -f
/// x.yaml | kubectl apply -f -` must never apply one.
pub fn objects_yaml(verdicts: &[Verdict]) -> String {
    let mut s = String::new();
    for v in verdicts.iter().filter(|v| v.allowed) {
        s.push_str("---\n");
        s.push_str(&yaml(&v.object));
    }
    s
}

/// The objects as one `kind: List` (what `kubectl get -o json` prints for several).
pub fn objects_list_json<'a>(verdicts: impl Iterator<Item = &'a Verdict>) -> String {
    let items: Vec<&Value> = verdicts.map(|v| &v.object).collect();
    let list =
        serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items});
    serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"
}

/// `resource.group/name` per object, as `kubectl -o name` prints it: the kind in lower
/// case, the API group unless it is the core group.
pub fn names<'a>(verdicts: impl Iterator<Item = &'a Verdict>) -> String {
    let mut s = String::new();
    for v in verdicts {
        let group = v.object["apiVersion"]
            .as_str()
            .and_then(|api| api.split_once('/'))
            .map(|(group, _)| group);
        let resource = v.kind.to_lowercase();
        let _ = match group {
            Some(group) => writeln!(s, "{resource}.{group}/{}", v.name),
            None => writeln!(s, "{resource}/{}", v.name),
        };
    }
    s
}

/// What `mutate` left off stdout, for stderr; empty when every object was allowed.
pub fn withheld(verdicts: &[Verdict]) -> String {
    let denied: Vec<String> = verdicts.iter().filter(|v| !v.allowed).map(title).collect();
    if denied.is_empty() {
        return String::new();
    }
    let tail = if denied.len() == verdicts.len() {
        "stdout is empty: nothing may be applied"
    } else {
        "the other objects are on stdout"
    };
    format!(
        "not written to stdout (denied, reasons above): {}; {tail}\n",
        denied.join(", ")
    )
}

/// Any JSON value as YAML 1.1-safe text.
pub fn yaml(value: &Value) -> String {
    super::yaml::emit::document(value)
}

/// A unified diff of each object's YAML before and after.
pub fn diffs(reports: &[ObjectReport<'_>]) -> String {
    let mut s = String::new();
    for r in reports {
        if r.verdict.patch.is_empty() {
            continue;
        }
        let before = yaml(r.original);
        let after = yaml(&r.verdict.object);
        let name = title(r.verdict);
        let diff = similar::TextDiff::from_lines(&before, &after);
        let _ = write!(
            s,
            "{}",
            diff.unified_diff()
                .context_radius(3)
                .header(&format!("a/{name}"), &format!("b/{name}"))
        );
    }
    s
}
