//! The pipeline: parse -> locate templates -> classify -> plan + apply -> rules ->
//! verdict. Synchronous and pure; the same call serves webhook, CLI and advisor.

use serde::Serialize;
use serde_json::Value;

use crate::annotations::{ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, MUTATED, SKIP};
use crate::classify::{Class, Target, classify};
use crate::edit::{Cursor, Ops};
use crate::error::ObjectError;
use crate::finding::{Finding, Rule};
use crate::layout::{Change, Plan, shm_size};
use crate::podspec::PodView;
use crate::policy::{Mode, OptIn, Policy, Requester};
use crate::rules::{OptInState, RuleInput, check, opt_in_state};
use crate::workload::{Kind, locate};

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
    /// What the client sees as warnings: `warn` findings and notes.
    pub fn warnings(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.mode == Mode::Warn)
            .map(Finding::message)
            .chain(self.notes.iter().cloned())
            .collect()
    }

    /// Why the object is denied: `enforce` findings.
    pub fn reasons(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.mode == Mode::Enforce)
            .map(Finding::message)
            .collect()
    }
}

fn meta_str<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")?.get(key)?.as_str()
}

fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// Evaluate one object against the policy (the object is cloned; see [`evaluate_owned`]).
pub fn evaluate(
    object: &Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, ObjectError> {
    evaluate_owned(object.clone(), policy, who)
}

/// Evaluate an object the caller owns: the layout is written into it in place and
/// each edit is recorded as a JSON Patch operation (no clone, no tree diff).
pub fn evaluate_owned(
    mut object: Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, ObjectError> {
    if !object.is_object() {
        return Err(ObjectError::NotAnObject);
    }
    let (kind_class, sites) = locate(&object)?;
    let eff = policy.effective(who);
    let mut verdict = Verdict {
        kind: object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        kind_class,
        name: meta_str(&object, "name")
            .or_else(|| meta_str(&object, "generateName"))
            .unwrap_or("")
            .to_string(),
        namespace: meta_str(&object, "namespace")
            .unwrap_or(who.namespace)
            .to_string(),
        allowed: true,
        findings: Vec::new(),
        notes: Vec::new(),
        changes: Vec::new(),
        patch: json_patch::Patch(Vec::new()),
        object: Value::Null,
    };
    if let Kind::Other(k) = &verdict.kind_class {
        verdict.notes.push(format!(
            "trainplace does not handle {k}; passed through unchanged."
        ));
        verdict.object = object;
        return Ok(verdict);
    }
    let skip = annotation(&object, SKIP) == Some("true");
    let skip_state = opt_in_state(skip, OptIn::Skip, &eff, who);
    if skip_state == OptInState::Granted {
        verdict.notes.push(format!(
            "{SKIP}: \"true\": trainplace left this object alone."
        ));
        verdict.object = object;
        return Ok(verdict);
    }
    let mut ops = Ops::default();
    let mut any_training = false;
    for site in &sites {
        let missing = || ObjectError::bad(&site.field, "missing");
        let original = object.pointer(&site.pointer).ok_or_else(missing)?;
        let view = PodView::read(original, &site.field)?;
        let shape = match classify(&view, &site.hints, &eff) {
            Class::NotTraining(_) => continue,
            Class::Training(shape) => shape,
        };
        any_training = true;
        let opt =
            |key: &str| view.annotation(key).or_else(|| annotation(&object, key)) == Some("true");
        let partial_opt_in =
            opt_in_state(opt(ALLOW_PARTIAL_NODE), OptIn::AllowPartialNode, &eff, who);
        let multi_az_opt_in = opt_in_state(opt(ALLOW_MULTI_AZ), OptIn::AllowMultiAz, &eff, who);
        let plan = match &shape.target {
            Target::Known(instance, source) => {
                let shm = shm_size(&view, &eff, instance).map_err(|e| {
                    ObjectError::bad(
                        format!("metadata.annotations[{}]", crate::annotations::SHM_SIZE),
                        e,
                    )
                })?;
                Some(Plan::new(&view, &shape, instance, *source, &eff, shm))
            }
            _ => None,
        };
        // Rules judge the template as the validating webhook will see it after this
        // mutation; of what they read, only the EFA count changes.
        let mut after = (*shape).clone();
        if let (Some(plan), Target::Known(instance, _)) = (&plan, &shape.target)
            && plan.adds_efa()
        {
            after.efa = instance.max_efa;
        }
        verdict.findings.extend(check(&RuleInput {
            view: &view,
            shape: &after,
            eff: &eff,
            partial_opt_in,
            multi_az_opt_in,
        }));
        let Some(plan) = plan else { continue };
        let site_value = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
        let changes = plan.apply(Cursor::root(site_value, &site.pointer), &mut ops);
        if !changes.is_empty() {
            record(
                object.pointer_mut(&site.pointer).ok_or_else(missing)?,
                &site.pointer,
                &changes,
                &mut ops,
            );
            verdict.changes.extend(changes);
        }
    }
    if skip && any_training {
        verdict.findings.push(Finding {
            rule: Rule::OptOutRefused,
            mode: Mode::Enforce,
            site: "metadata.annotations".into(),
            found: format!("{SKIP}: \"true\" is not permitted for namespace {} or your groups.", verdict.namespace),
            fix: "remove the annotation, or ask the platform team to grant the opt-out in policy (optIns.skip).".into(),
            opt_in: None,
        });
    }
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
    verdict.patch = ops.into_patch();
    verdict.object = object;
    Ok(verdict)
}

/// Write the `trainplace.io/mutated` annotation on the template: one line per change.
fn record(site: &mut Value, pointer: &str, changes: &[Change], ops: &mut Ops) {
    let text = changes
        .iter()
        .map(|c| format!("{}: {}", c.what, c.why))
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(mut ann) = Cursor::root(site, pointer).objects(&["metadata", "annotations"], ops) {
        ann.set(MUTATED, Value::String(text), ops);
    }
}
