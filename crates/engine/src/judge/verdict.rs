//! The engine's answer for one object: allowed or not, findings, notes, the changes
//! made and the JSON Patch that makes them.

use serde::Serialize;
use serde_json::Value;

use crate::facts::policy::Mode;
use crate::facts::requester::Requester;
use crate::judge::finding::Finding;
use crate::judge::plan::Change;
use crate::read::json::{at_pointer, str_at};
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
    /// Where the JSON Patch writes; [`Verdict::json_patch`] gives it with its values.
    #[serde(skip)]
    pub patch: Patch,
    /// The object after the patch.
    pub object: Value,
}

/// Add or replace: the only operations the engine writes (replace only for its own
/// annotation and a reshape's rewritten fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Replace,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Replace => "replace",
        }
    }
}

/// A review's JSON Patch as the places it writes, in the order written. The value of
/// each operation is not kept here: it is the laid-out object's at that place
/// ([`Verdict::object`]), which already holds whatever later edits added inside it, so
/// no value is copied until the patch is written, and then once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch(pub(crate) Vec<(Op, String)>);

impl Patch {
    /// Whether every operation writes a pod template's metadata
    /// (`.../template/metadata...`).
    pub(crate) fn only_template_metadata(&self) -> bool {
        self.0
            .iter()
            .all(|(_, path)| path.contains("/template/metadata"))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Each operation with its value, read from `object` (the object as laid out).
    /// `Err` names an operation whose place `object` does not hold, which the engine
    /// never records (its edits only add, and a replaced place takes the operations
    /// inside it along).
    pub fn operations<'a>(
        &'a self,
        object: &'a Value,
    ) -> impl Iterator<Item = Result<(Op, &'a str, &'a Value), &'a str>> {
        self.0.iter().map(move |(op, path)| {
            at_pointer(object, path)
                .map(|value| (*op, path.as_str(), value))
                .ok_or(path.as_str())
        })
    }

    /// The patch as `json_patch` operations, values copied from `object`.
    pub fn to_json_patch(&self, object: &Value) -> json_patch::Patch {
        json_patch::Patch(
            self.operations(object)
                .filter_map(Result::ok)
                .filter_map(|(op, path, value)| {
                    // Every path here was built from escaped tokens, so parsing succeeds.
                    let path = json_patch::jsonptr::PointerBuf::parse(path).ok()?;
                    let value = value.clone();
                    Some(match op {
                        Op::Add => json_patch::PatchOperation::Add(json_patch::AddOperation {
                            path,
                            value,
                        }),
                        Op::Replace => {
                            json_patch::PatchOperation::Replace(json_patch::ReplaceOperation {
                                path,
                                value,
                            })
                        }
                    })
                })
                .collect(),
        )
    }
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
            patch: Patch::default(),
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
                    g.site.push_str(crate::judge::finding::SITES_JOINED);
                    g.site.push_str(&f.site);
                }
                None => folded.push(f),
            }
        }
        self.findings = folded;
    }

    /// The JSON Patch from the object as sent to [`Verdict::object`].
    pub fn json_patch(&self) -> json_patch::Patch {
        self.patch.to_json_patch(&self.object)
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
