//! The engine's answer for one object: allowed or not, findings, notes, the changes
//! made and the JSON Patch that makes them.

use serde::Serialize;
use serde_json::Value;

use crate::facts::policy::Mode;
use crate::facts::requester::Requester;
use crate::judge::finding::Finding;
use crate::judge::plan::Change;
use crate::read::json::str_at;
use crate::read::workload::Kind;

/// The engine's answer for one object.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    #[serde(skip)]
    pub kind_class: Kind,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub allowed: bool,
    pub findings: Vec<Finding>,
    /// Informational lines shown as warnings (e.g. a kind we pass through).
    pub notes: Vec<String>,
    pub changes: Vec<Change>,
    pub patch: json_patch::Patch,
    /// The object after the patch.
    pub object: Value,
}

impl Verdict {
    /// An allowing verdict with nothing found yet, named after the object.
    pub fn empty(object: &Value, kind: Kind, who: &Requester<'_>) -> Self {
        let text = |v: Option<&str>| v.unwrap_or("").to_string();
        Verdict {
            kind: text(object.get("kind").and_then(Value::as_str)),
            kind_class: kind,
            name: text(meta_str(object, "name").or_else(|| meta_str(object, "generateName"))),
            namespace: text(meta_str(object, "namespace").or(Some(who.namespace))),
            allowed: true,
            findings: Vec::new(),
            notes: Vec::new(),
            changes: Vec::new(),
            patch: json_patch::Patch(Vec::new()),
            object: Value::Null,
        }
    }

    /// One finding per cause: templates that fail a rule the same way (the Master and
    /// the Worker of one job) give one finding naming every site.
    pub(crate) fn fold_repeats(&mut self) {
        let mut folded: Vec<Finding> = Vec::with_capacity(self.findings.len());
        for f in std::mem::take(&mut self.findings) {
            match folded.iter_mut().find(|g| {
                g.rule == f.rule
                    && g.mode == f.mode
                    && g.found == f.found
                    && g.fix == f.fix
                    && g.opt_in == f.opt_in
            }) {
                Some(g) => {
                    g.site.push_str(" and ");
                    g.site.push_str(&f.site);
                }
                None => folded.push(f),
            }
        }
        self.findings = folded;
    }

    /// What the client sees as warnings: `warn` findings and notes.
    pub fn warnings(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.mode == Mode::Warn)
            .map(Finding::message)
            .chain(self.notes.iter().cloned())
            .collect()
    }

    /// Why the object is denied: `enforce` findings, each its lead line and why.
    pub fn reasons(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.mode == Mode::Enforce)
            .map(Finding::denial)
            .collect()
    }
}

fn meta_str<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    str_at(obj, &["metadata", key])
}
