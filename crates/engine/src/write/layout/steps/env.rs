//! Environment: the catalog's NCCL (or Neuron) variables, NCCL_DEBUG on request, and
//! torchrun's process count.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::spec::{container, container_name};
use crate::read::annotations::NCCL_DEBUG;
use crate::read::json::items;
use crate::read::podspec::{command_line, env_entry};
use crate::write::edit::Cursor;
use crate::write::layout::{Edit, Plan};

impl Plan<'_> {
    pub(in crate::write::layout) fn nccl_env(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let mut wanted: Vec<(&str, &str, Cow<'_, str>)> = Vec::new();
        // The catalog's rules name the accelerator family they serve: NCCL env on
        // NVIDIA instances, Neuron collectives' env on Trainium.
        let efa = self.shape.efa > 0 || self.adds_efa();
        let catalog = &self.eff.policy.catalog;
        for rule in catalog.nccl_env(self.instance, &self.eff.plugin_version, efa) {
            wanted.push((&rule.name, &rule.value, Cow::Borrowed(&rule.source)));
        }
        if let Some(level) = &self.nccl_debug {
            wanted.push((
                "NCCL_DEBUG",
                level,
                Cow::Owned(format!("annotation {NCCL_DEBUG}")),
            ));
            wanted.push((
                "NCCL_DEBUG_SUBSYS",
                "INIT,GRAPH,ENV,NET",
                Cow::Owned(format!(
                    "annotation {NCCL_DEBUG}: the subsystems that show transports and env"
                )),
            ));
        }
        for &i in &self.containers {
            for (name, value, why) in &wanted {
                let set = items(spec.value, &["containers"])
                    .get(i)
                    .is_some_and(|c| env_entry(c, name).is_some());
                if !set {
                    push_env(spec, i, name, value, why, ed);
                }
            }
        }
    }

    pub(in crate::write::layout) fn torchrun_env(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        for &i in &self.containers {
            let Some(c) = items(spec.value, &["containers"]).get(i) else {
                continue;
            };
            // One look through the env: does it use PET_ variables, and is the count set?
            let (mut uses_pet, mut count_set) = (false, false);
            for name in items(c, &["env"])
                .iter()
                .filter_map(|e| e.get("name").and_then(Value::as_str))
            {
                uses_pet |= name.starts_with("PET_");
                count_set |= name == "PET_NPROC_PER_NODE";
            }
            let cmd = command_line(c);
            let cmd_sets = cmd.contains("--nproc_per_node") || cmd.contains("--nproc-per-node");
            if !uses_pet || cmd_sets || count_set {
                continue;
            }
            let n = container_accels(c, &self.shape.accel_resource).unwrap_or(self.shape.per_pod);
            // Not set (looked at above), so no second look through the env.
            push_env(
                spec,
                i,
                "PET_NPROC_PER_NODE",
                &n.to_string(),
                "torchrun starts one process per GPU in the pod",
                ed,
            );
        }
    }
}

fn container_accels(c: &Value, res: &str) -> Option<u32> {
    let r = c.get("resources")?;
    let v = r
        .get("limits")
        .and_then(|m| m.get(res))
        .or_else(|| r.get("requests")?.get(res))?;
    crate::read::quantity::parse_count(v).ok()
}

/// Append `name=value` to container `i`'s env, which has no `name` yet.
fn push_env(
    spec: &mut Cursor<'_>,
    i: usize,
    name: &str,
    value: &str,
    why: &str,
    ed: &mut Edit<'_>,
) {
    let cname = container_name(spec.value, i);
    if let Some(mut env) = container(spec, i).and_then(|c| c.array("env", ed.ops)) {
        env.push(json!({"name": name, "value": value}), ed.ops);
        ed.change(
            format!("container {cname}: env {name}={value}"),
            why.to_string(),
        );
    }
}
