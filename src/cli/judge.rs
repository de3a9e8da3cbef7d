//! One way to judge documents for `check`, `mutate` and `audit`: who submitted each
//! object (its namespace, that namespace's labels, the user's groups) and the verdict.
//! An object the engine cannot read is a denial with an `invalid-object` finding,
//! never dropped.

use std::collections::BTreeMap;

use serde_json::Value;
use trainplace_engine::{
    Claims, Finding, Kind, Mode, Policy, Requester, Rule, Snapshot, Verdict, evaluate,
};

use super::input::Document;

/// What the command line says about whoever submitted the documents.
#[derive(Debug, Clone, Copy)]
pub struct Submitter<'a> {
    /// Namespace of objects whose metadata names none (`kubectl apply -n`).
    pub default_namespace: &'a str,
    /// `--namespace-labels`: used for every namespace; else the inventory's labels.
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
    pub groups: &'a [String],
    pub inventory: Option<&'a Snapshot>,
    /// The time to judge time-bound rules at (Capacity Block ends).
    pub now: Option<jiff::Timestamp>,
}

impl<'a> Submitter<'a> {
    /// The requester of `object`: its own namespace, or the default one.
    pub fn requester(&self, object: &'a Value) -> Requester<'a> {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(self.default_namespace);
        Requester {
            namespace,
            namespace_labels: self
                .namespace_labels
                .or_else(|| self.inventory?.namespace_labels(namespace)),
            groups: self.groups,
            inventory: self.inventory,
            // Offline there are no admission-mark keys: nothing is marked or trusted.
            marks: None,
            now: self.now,
            claims: None,
            // Offline there is no UPDATE: every object is judged as submitted.
            updating: None,
        }
    }
}

/// Evaluate every document, in order. DRA ResourceClaimTemplates, ResourceClaims and
/// ComputeDomains among them count the devices of the pods that claim them, as the
/// cluster would once all are applied.
pub fn judge(docs: &[Document], policy: &Policy, submitter: &Submitter<'_>) -> Vec<Verdict> {
    let mut claims = Claims::default();
    claims.add(docs.iter().map(|d| &d.object), submitter.default_namespace);
    docs.iter()
        .map(|d| {
            let mut who = submitter.requester(&d.object);
            who.claims = Some(&claims);
            // A Deployment, StatefulSet, ReplicaSet, DaemonSet or CronJob is judged by the
            // engine as what its controller makes, as the webhook judges it.
            evaluate(&d.object, policy, &who).unwrap_or_else(|e| invalid(d, &who, &e.to_string()))
        })
        .collect()
}

/// The verdict on an object the engine cannot read: denied, naming the field.
fn invalid(d: &Document, who: &Requester<'_>, message: &str) -> Verdict {
    let mut v = Verdict::empty(&d.object, Kind::Other, who);
    v.allowed = false;
    v.findings.push(Finding {
        rule: Rule::InvalidObject,
        mode: Mode::Enforce,
        site: format!("document {}", d.doc),
        found: message.to_string(),
        fix: "correct the field named above.".into(),
        opt_in: None,
        why: None,
    });
    v.object = d.object.clone();
    v
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn submitter<'a>(
        labels: Option<&'a BTreeMap<String, String>>,
        groups: &'a [String],
    ) -> Submitter<'a> {
        Submitter {
            default_namespace: "default",
            namespace_labels: labels,
            groups,
            inventory: None,
            now: None,
        }
    }

    #[test]
    fn namespace_comes_from_the_object_else_the_default() {
        let groups = ["system:authenticated".to_string()];
        let s = submitter(None, &groups);
        let named = json!({"kind": "Pod", "metadata": {"name": "a", "namespace": "team-a"}});
        let unnamed = json!({"kind": "Pod", "metadata": {"name": "b"}});
        assert_eq!(s.requester(&named).namespace, "team-a");
        assert_eq!(s.requester(&unnamed).namespace, "default");
        let other = Submitter {
            default_namespace: "research",
            ..s
        };
        assert_eq!(other.requester(&unnamed).namespace, "research");
        assert_eq!(other.requester(&named).groups, groups);
    }

    #[test]
    fn labels_given_on_the_command_line_win_over_the_inventory() {
        let labels = BTreeMap::from([("team".to_string(), "a".to_string())]);
        let inventory = Snapshot::build(
            &[],
            &[],
            &[json!({"metadata": {"name": "default", "labels": {"team": "b"}}})],
        );
        let object = json!({"kind": "Pod", "metadata": {"name": "a"}});
        let mut s = submitter(None, &[]);
        s.inventory = Some(&inventory);
        assert_eq!(s.requester(&object).namespace_labels.unwrap()["team"], "b");
        s.namespace_labels = Some(&labels);
        assert_eq!(s.requester(&object).namespace_labels.unwrap()["team"], "a");
    }

    #[test]
    fn an_unreadable_object_is_denied_not_dropped() {
        let docs = [Document {
            doc: 2,
            object: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": "eight"}}}]}}),
        }];
        let verdicts = judge(&docs, &Policy::embedded(), &submitter(None, &[]));
        assert_eq!(verdicts.len(), 1);
        let v = &verdicts[0];
        assert!(!v.allowed);
        assert_eq!(v.findings[0].rule, Rule::InvalidObject);
        assert_eq!(v.findings[0].site, "document 2");
        assert_eq!(v.namespace, "default");
    }
}
