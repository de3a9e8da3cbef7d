//! The recommended layout, written into a pod template: only what is missing, never
//! overwriting a value the user set, appending after the user's list entries so every
//! existing entry keeps its position. Each change is recorded with its reason.

mod nvlink;
mod steps;

use serde_json::Value;

use crate::facts::policy::{Effective, Mutations};
use crate::judge::judgement::Judgement;
use crate::judge::plan::{Change, Plan};
use crate::read::annotations::MUTATED;
use crate::write::edit::{Cursor, Ops};

/// The most text the `trainplace.io/mutated` annotation carries. The API server
/// rejects an object whose annotations together pass 256 KiB
/// (<https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set>),
/// so the explanation must never be what pushes a pod over.
pub const MUTATED_TEXT_LIMIT: usize = 16 * 1024;

/// The `trainplace.io/mutated` text for `changes`: one line per reason, naming every
/// change made for it (`what; what: why`), so a pod of many containers repeats no
/// reason. Past [`MUTATED_TEXT_LIMIT`] the remaining reasons are counted, not written.
pub fn mutated_text(changes: &[Change]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in changes {
        match groups.iter_mut().find(|(why, _)| *why == c.why) {
            Some((_, whats)) => whats.push(&c.what),
            None => groups.push((&c.why, vec![&c.what])),
        }
    }
    let mut text = String::new();
    let mut omitted = 0;
    for (why, whats) in &groups {
        let line_len = whats.iter().map(|w| w.len() + 2).sum::<usize>() + why.len() + 1;
        if omitted > 0 || text.len() + line_len > MUTATED_TEXT_LIMIT {
            omitted += whats.len();
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&whats.join("; "));
        text.push_str(": ");
        text.push_str(why);
    }
    if omitted > 0 {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "... and {omitted} more changes; `trainplace mutate -f` on the object lists every one"
        ));
    }
    text
}

const SHM_VOLUME: &str = "trainplace-shm";

impl Judgement<'_> {
    /// Write the layout into the template under `site`; returns the changes made.
    /// Without a layout (the instance type or the device count unknown), the zone hold
    /// alone: a multi-pod job whose size and identity are read is held in one zone
    /// whatever its type.
    pub fn write(&self, eff: &Effective<'_>, site: Cursor<'_>, ops: &mut Ops) -> Vec<Change> {
        if let Some(plan) = self.plan(eff) {
            return plan.apply(site, ops);
        }
        let mut out = Vec::new();
        if let Some(mut spec) = site.get("spec")
            && eff.on(|m| m.zone_affinity)
        {
            steps::zone_hold(self.shape(), &mut spec, &mut Edit { ops, out: &mut out });
        }
        out
    }
}

impl<'a> Plan<'a> {
    fn on(&self, pick: impl Fn(&Mutations) -> Option<bool>) -> bool {
        self.eff.on(pick)
    }

    fn whole_node(&self) -> bool {
        self.shape.per_pod == self.instance.accelerators && !self.shape.shared
    }

    /// Apply the layout to the pod template at `site`, recording each edit in `ops`.
    pub fn apply(&self, mut site: Cursor<'_>, ops: &mut Ops) -> Vec<Change> {
        let mut out = Vec::new();
        if site.value.get("spec").is_none() {
            return out;
        }
        let mut ed = Edit { ops, out: &mut out };
        self.kueue_topology(&mut site, &mut ed);
        let Some(mut spec) = site.get("spec") else {
            return out;
        };
        // Network proximity is switched by `defaults.networkProximity`, not a mutation.
        let steps: [(Switch, Step<'a>); 12] = [
            (|m| m.efa, Plan::efa),
            (|m| m.host_ipc, Plan::host_ipc),
            (|m| m.ipc_lock, Plan::ipc_lock),
            (|m| m.shm, Plan::shm),
            (|m| m.nccl_env, Plan::nccl_env),
            (|m| m.torchrun_env, Plan::torchrun_env),
            (|m| m.tolerations, Plan::tolerations),
            (|m| m.pin_instance_type, Plan::pin_instance),
            (|m| m.zone_affinity, Plan::zone_affinity),
            (|m| m.zone_affinity, Plan::clique_affinity),
            (|_| None, Plan::network_proximity),
            (|m| m.node_anti_affinity, Plan::anti_affinity),
        ];
        for (switch, step) in steps {
            if self.on(switch) {
                step(self, &mut spec, &mut ed);
            }
        }
        out
    }

    /// How many EFA interfaces the plan gives a pod that asked for none: all of the
    /// node's to a whole-node pod; its share (proportional to its GPUs, when that is
    /// at least one) to a pod of a multi-pod job that takes part of a node, so its
    /// cross-node traffic does not fall back to TCP.
    pub fn added_efa(&self) -> Option<u32> {
        // Where nodes grant no `vpc.amazonaws.com/efa` (EFA through DRA) adding it would
        // leave the pod Pending: the rules say how to claim EFA instead.
        if !(self.on(|m| m.efa)
            && self.shape.efa == 0
            && self.instance.has_efa()
            && self.shape.efa_resource_absent.is_none()
            && !self.containers.is_empty())
        {
            return None;
        }
        if self.whole_node() {
            return Some(self.instance.max_efa);
        }
        let share = crate::judge::rules::efa_share_floor(self.instance, self.shape.per_pod);
        (self.shape.multi_pod && self.shape.per_pod < self.instance.accelerators && share > 0)
            .then_some(share)
    }

    pub fn adds_efa(&self) -> bool {
        self.added_efa().is_some()
    }
}

type Step<'a> = fn(&Plan<'a>, &mut Cursor<'_>, &mut Edit<'_>);
/// Reads whether a mutation is switched on in policy.
type Switch = fn(&Mutations) -> Option<bool>;

/// The ops being recorded and the change lines being written, together.
struct Edit<'a> {
    ops: &'a mut Ops,
    out: &'a mut Vec<Change>,
}

impl Edit<'_> {
    fn change(&mut self, what: String, why: String) {
        self.out.push(Change::new(what, why));
    }
}

/// Write the `trainplace.io/mutated` annotation (see [`mutated_text`]) on the object
/// at `pointer` inside `site`.
pub(crate) fn write_mutated(site: &mut Value, pointer: &str, changes: &[Change], ops: &mut Ops) {
    let text = mutated_text(changes);
    if let Some(mut ann) = Cursor::root(site, pointer).objects(&["metadata", "annotations"], ops) {
        ann.set(MUTATED, Value::String(text), ops);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(what: &str, why: &str) -> Change {
        Change::new(what, why)
    }

    #[test]
    fn each_reason_is_written_once_with_every_change_made_for_it() {
        let text = mutated_text(&[
            change("hostIPC=true", "layout"),
            change("container a: capability IPC_LOCK", "memlock"),
            change("container b: capability IPC_LOCK", "memlock"),
        ]);
        assert_eq!(
            text,
            "hostIPC=true: layout\ncontainer a: capability IPC_LOCK; container b: capability IPC_LOCK: memlock"
        );
    }

    #[test]
    fn past_the_limit_the_remaining_changes_are_counted() {
        let long = "x".repeat(MUTATED_TEXT_LIMIT / 4);
        let changes: Vec<Change> = (0..8)
            .map(|i| change(&format!("change {i}"), &format!("{long} {i}")))
            .collect();
        let text = mutated_text(&changes);
        assert!(
            text.len() <= MUTATED_TEXT_LIMIT + 100,
            "{} bytes",
            text.len()
        );
        assert!(text.starts_with("change 0: "));
        assert!(
            text.ends_with(
                "... and 5 more changes; `trainplace mutate -f` on the object lists every one"
            ),
            "{}",
            &text[text.len() - 120..]
        );
    }
}
