//! Validation rules for one training pod template, evaluated on the mutated template
//! (what the validating webhook sees after the mutating one ran).

mod efa;
mod impossible;
mod input;
mod multi_az;
mod partial_node;
mod pod_settings;
mod words;

pub(crate) use efa::efa_share_floor;
pub(crate) use input::opted_in;
pub use input::{OptInState, RuleInput, Unheld, opt_in_state};
pub use partial_node::MEASURED;
pub(crate) use partial_node::path_cost;
pub(crate) use pod_settings::shm_memory;
pub use words::{count, count64};

use crate::facts::policy::Mode;
use crate::judge::classify::Target;
use crate::judge::finding::{Finding, Rule};
use impossible::impossible;
use multi_az::multi_az;
use partial_node::partial_node;
use pod_settings::{device_claims, host_network};

pub fn check(input: &RuleInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let site = input.view.base.clone();
    match &input.shape.target {
        Target::Known(instance, _) => {
            impossible(input, instance, &mut out);
            partial_node(input, instance, &mut out);
        }
        Target::Unknown(name, src) => out.push(Finding {
            rule: Rule::UnknownInstanceType,
            mode: input.eff.mode_unknown_instance_type(),
            site: site.clone(),
            found: format!(
                "instance type {name:?} (from {}) is not in the instance catalog; no layout was applied.",
                src.describe()
            ),
            fix: "use a type from `trainplace policy instances`, or add it to an InstanceCatalog file in the policy directory.".into(),
            opt_in: None,
            why: None,
        }),
        Target::Several(types) => {
            out.push(Finding {
                rule: Rule::UnknownInstanceType,
                mode: Mode::Warn,
                site: site.clone(),
                found: format!(
                    "its node selection allows several instance types ({}); no layout was applied.",
                    types.join(", ")
                ),
                fix: "pin one instance type so every pod gets the same GPU and EFA count.".into(),
                opt_in: None,
                why: None,
            });
            // The pods may land on any of them: the layout must hold on every one, so
            // each listed type is judged and what fails on any is reported.
            // Advice that depends on the one type (EFA counts) waits until it is pinned.
            let mut on_any = Vec::new();
            for name in types {
                if let Some(instance) = input.eff.policy.catalog.get(name) {
                    impossible(input, instance, &mut on_any);
                    partial_node(input, instance, &mut on_any);
                }
            }
            out.extend(on_any.into_iter().filter(|f| f.rule != Rule::EfaCount));
        }
        Target::None => out.push(Finding {
            rule: Rule::UnknownInstanceType,
            mode: input.eff.mode_unknown_instance_type(),
            site: site.clone(),
            found: "training pod selects no instance type the catalog knows (none, or a node selection that reaches no catalog type); no layout was applied.".into(),
            fix: format!(
                "set nodeSelector {}, or annotation {}, or a policy defaults.instanceType; add the types a node selection reaches to the catalog (trainplace policy instances).",
                crate::read::annotations::LABEL_INSTANCE_TYPE,
                crate::read::annotations::INSTANCE_TYPE
            ),
            opt_in: None,
            why: None,
        }),
    }
    device_claims(input, &mut out);
    multi_az(input, &mut out);
    host_network(input, &mut out);
    // `off` means the rule is not evaluated at all: no finding, no metric, no audit row.
    out.retain(|f| f.mode != Mode::Off);
    out
}
