//! Network proximity: a multi-node job's pods held under the same network nodes of the
//! EC2 network hierarchy (EKS's `topology.k8s.aws/network-node-layer-N` node labels), as
//! scheduler preferences weighted by layer, as a requirement at the policy's layer for
//! small jobs, or, for a job Kueue queues and places by those labels, as Kueue's own
//! Topology Aware Scheduling annotation.

use serde_json::{Value, json};

use crate::facts::policy::{NetworkProximity, Placement};
use crate::read::annotations::{
    KUEUE_PREFERRED_TOPOLOGY, KUEUE_REQUIRED_TOPOLOGY, NETWORK_LAYERS, chose_kueue_topology,
};
use crate::read::json::items;
use crate::write::edit::{Cursor, owned_object};
use crate::write::layout::{Edit, Plan};

use crate::read::annotations::NETWORK_LAYER_WEIGHTS as WEIGHTS;
use crate::read::json::Lookup as _;

const DEFAULT_LAYER: u8 = 3;
const DEFAULT_UP_TO_PODS: u32 = 16;

const WHY: &str = "a job runs at the speed of its longest network path, and pods under the same EC2 network nodes are fewer hops apart (EKS network topology labels: https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html)";

/// What the policy asks of one job: no placement, preferences, or a required layer
/// (1 to 4) with preferences below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Nothing,
    Preferred,
    Required(u8),
}

fn ask(policy: Option<&NetworkProximity>, pods: Option<u32>) -> Ask {
    let n = policy.cloned().unwrap_or_default();
    match n.placement.unwrap_or_default() {
        Placement::Off => Ask::Nothing,
        Placement::Preferred => Ask::Preferred,
        Placement::Required => {
            let up_to = n.required_up_to_pods.unwrap_or(DEFAULT_UP_TO_PODS);
            match pods {
                Some(p) if p <= up_to => Ask::Required(n.required_layer.unwrap_or(DEFAULT_LAYER)),
                _ => Ask::Preferred,
            }
        }
    }
}

fn label(layer: u8) -> &'static str {
    NETWORK_LAYERS[usize::from(layer.clamp(1, 4)) - 1]
}

impl Plan<'_> {
    /// Where the inventory says the job can sit, as a clause for the explanation (the
    /// write-up of `check`/`mutate --cluster` and of the webhook's live inventory).
    fn network_fit(&self) -> String {
        self.shape
            .network_fit
            .as_ref()
            .map(|f| format!("; {}", f.describe()))
            .unwrap_or_default()
    }

    fn network_ask(&self) -> Ask {
        if !self.shape.multi_pod || self.shape.identity.is_none() {
            return Ask::Nothing;
        }
        ask(
            self.eff.defaults.network_proximity.as_ref(),
            self.shape.pods,
        )
    }

    /// For a job Kueue queues, where a Kueue Topology in the cluster has the network
    /// layer labels: Kueue's topology annotation on the pod template (Kueue places the
    /// whole job at once), unless the template already carries one of Kueue's three.
    pub(in crate::write::layout) fn kueue_topology(
        &self,
        site: &mut Cursor<'_>,
        ed: &mut Edit<'_>,
    ) {
        let levels = &self.shape.kueue_layers;
        let ask = self.network_ask();
        if levels.is_empty() || ask == Ask::Nothing {
            return;
        }
        if chose_kueue_topology(site.value) {
            return;
        }
        // The most selective layer the Topology has: Kueue tries it first and climbs.
        let Some(bottom) = levels.last() else {
            return;
        };
        let (key, level, how) = match ask {
            Ask::Required(layer) if levels.contains(&label(layer)) => (
                KUEUE_REQUIRED_TOPOLOGY,
                label(layer),
                format!(
                    "Kueue admits the job only where one {} node holds all of its pods (policy: networkProximity required)",
                    label(layer)
                ),
            ),
            _ => (
                KUEUE_PREFERRED_TOPOLOGY,
                *bottom,
                format!(
                    "Kueue places the whole job under the fewest network nodes, from one {bottom} node up"
                ),
            ),
        };
        let Some(mut ann) = site
            .reborrow()
            .objects(&["metadata", "annotations"], ed.ops)
        else {
            return;
        };
        if ann.insert_missing(key, json!(level), ed.ops) {
            ed.change(
                format!("annotation {key}={level}"),
                format!("{how}; {WHY}{}", self.network_fit()),
            );
        }
    }

    /// Pod affinity over the job's pods by network layer: a required term at the
    /// policy's layer for a job small enough, and weighted preferences for every layer
    /// below it (all four when nothing is required), unless the template already names
    /// a network layer in its pod affinity, or Kueue places the job.
    pub(in crate::write::layout) fn network_proximity(
        &self,
        spec: &mut Cursor<'_>,
        ed: &mut Edit<'_>,
    ) {
        let ask = self.network_ask();
        if ask == Ask::Nothing || !self.shape.kueue_layers.is_empty() {
            return;
        }
        let Some((key, value)) = &self.shape.identity else {
            return;
        };
        let affinity = spec.value.lookup("/affinity/podAffinity");
        let required = affinity.map_or(&[][..], |a| {
            items(a, &["requiredDuringSchedulingIgnoredDuringExecution"])
        });
        let preferred = affinity.map_or(&[][..], |a| {
            items(a, &["preferredDuringSchedulingIgnoredDuringExecution"])
        });
        if !crate::budget::draw_len(
            "spec.affinity.podAffinity",
            required.len() + preferred.len(),
        ) {
            return;
        }
        let names_layer = |t: &Value| {
            t.get("topologyKey")
                .and_then(Value::as_str)
                .is_some_and(|k| NETWORK_LAYERS.contains(&k))
        };
        if required.iter().any(names_layer)
            || preferred
                .iter()
                .filter_map(|p| p.get("podAffinityTerm"))
                .any(names_layer)
        {
            return;
        }
        let below = match ask {
            Ask::Required(layer) => {
                let term = self.job_term(key, value, label(layer));
                if super::push_required(spec, "podAffinity", term, ed.ops) {
                    ed.change(
                        format!(
                            "podAffinity: pods with {key}={value}{} under one {}",
                            self.per_group(),
                            label(layer)
                        ),
                        format!("policy networkProximity requires it for jobs of this size (the pods stay Pending while no such network node has room); {WHY}{}", self.network_fit()),
                    );
                }
                layer + 1
            }
            _ => 1,
        };
        if below > 4 {
            return;
        }
        let Some(mut terms) = spec
            .reborrow()
            .objects(&["affinity", "podAffinity"], ed.ops)
            .and_then(|c| c.array("preferredDuringSchedulingIgnoredDuringExecution", ed.ops))
        else {
            return;
        };
        let layers: Vec<u8> = (below..=4).rev().collect();
        for &layer in &layers {
            terms.push(
                owned_object([
                    ("weight", WEIGHTS[usize::from(layer) - 1].into()),
                    ("podAffinityTerm", self.job_term(key, value, label(layer))),
                ]),
                ed.ops,
            );
        }
        let names: Vec<String> = layers
            .iter()
            .map(|&l| format!("layer-{l} (weight {})", WEIGHTS[usize::from(l) - 1]))
            .collect();
        ed.change(
            format!(
                "podAffinity (preferred): pods with {key}={value}{} under the same topology.k8s.aws/network-node {}",
                self.per_group(),
                names.join(", ")
            ),
            format!("{WHY}; the scheduler fills the closest network node with room, then spills up a layer instead of leaving pods Pending{}", self.network_fit()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(placement: Placement, layer: Option<u8>, up_to: Option<u32>) -> NetworkProximity {
        NetworkProximity {
            placement: Some(placement),
            required_layer: layer,
            required_up_to_pods: up_to,
        }
    }

    #[test]
    fn preferred_is_the_default_and_required_holds_only_small_jobs() {
        assert_eq!(ask(None, Some(64)), Ask::Preferred);
        let p = policy(Placement::Required, None, None);
        assert_eq!(ask(Some(&p), Some(16)), Ask::Required(3));
        assert_eq!(ask(Some(&p), Some(17)), Ask::Preferred);
        assert_eq!(ask(Some(&p), None), Ask::Preferred);
        let p = policy(Placement::Required, Some(2), Some(64));
        assert_eq!(ask(Some(&p), Some(64)), Ask::Required(2));
        let off = policy(Placement::Off, None, None);
        assert_eq!(ask(Some(&off), Some(4)), Ask::Nothing);
    }

    #[test]
    fn layers_name_the_eks_labels() {
        assert_eq!(label(1), "topology.k8s.aws/network-node-layer-1");
        assert_eq!(label(4), "topology.k8s.aws/network-node-layer-4");
    }
}
