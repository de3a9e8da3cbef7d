//! What one pod template asks for, as strict mode reads it: every extended resource
//! outside the `kubernetes.io` domains that the policy does not list as no accelerator
//! is an accelerator, whatever its name; the count a pod holds of each is the larger of
//! its app containers' and native sidecars' sum (init containers with `restartPolicy:
//! Always` run beside the app for the pod's life) and its largest plain init container:
//! the scheduler's effective request. A container's count is the larger of its limits
//! and its requests: the API server requires an extended resource's limits and equal
//! requests, but a name in a `kubernetes.io` domain may be requested alone (a DRA
//! class's name, which the scheduler allocates devices for from the request).
//! <https://github.com/kubernetes/kubernetes/blob/v1.34.0/pkg/apis/core/validation/validation.go>
//! <https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers>

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::policy::Policy;
use crate::read::devices::DRA_EXTENDED_PREFIX;
use crate::read::json::Lookup as _;
use crate::read::json::items;
use crate::read::quantity::parse_count;
use trainplace_catalog::Counts;

/// Whether `resource` is an accelerator for strict mode: any extended resource outside
/// the `kubernetes.io` domains, and a DRA device class's devices asked for by name
/// (`deviceclass.resource.kubernetes.io/<class>`) unless the catalog says the class
/// counts no accelerator (EFA, IMEX channels); the policy's `nonAcceleratorResources`
/// excepted. No catalog type offers a class's name whole, so such a pod is refused: a
/// ResourceClaim with `allocationMode: All` is what strict mode can judge whole.
pub(crate) fn is_accelerator(resource: &str, policy: &Policy) -> bool {
    let Some((domain, _)) = resource.split_once('/') else {
        return false;
    };
    if policy.non_accelerator(resource) {
        return false;
    }
    if let Some(class) = resource.strip_prefix(DRA_EXTENDED_PREFIX) {
        return policy
            .catalog
            .device_class(class)
            .is_none_or(|d| d.counts == Counts::Accelerator);
    }
    domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io")
}

/// The accelerators one template holds, by resource name (counts above zero only).
pub(crate) fn held(
    spec: &Value,
    field: &str,
    policy: &Policy,
) -> Result<BTreeMap<String, u64>, ObjectError> {
    let mut app: BTreeMap<String, u64> = BTreeMap::new();
    let mut init: BTreeMap<String, u64> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        let containers = items(spec, &[list]);
        if !crate::budget::draw_len("spec.containers", containers.len()) {
            break;
        }
        for (i, c) in containers.iter().enumerate() {
            // App containers and native sidecars run together: their counts add up.
            let sum = list == "containers"
                || c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
            let into = if sum { &mut app } else { &mut init };
            let mut own: BTreeMap<&str, u64> = BTreeMap::new();
            for which in ["limits", "requests"] {
                let Some(asked) = c
                    .lookup(&format!("/resources/{which}"))
                    .and_then(Value::as_object)
                else {
                    continue;
                };
                if !crate::budget::draw_len("resources.limits", asked.len()) {
                    break;
                }
                for (name, q) in asked {
                    if !is_accelerator(name, policy) {
                        continue;
                    }
                    let n = parse_count(q).map_err(|e| {
                        ObjectError::bad(
                            format!("{field}.{list}[{i}].resources.{which}[{name}]"),
                            e,
                        )
                    })?;
                    let slot = own.entry(name).or_default();
                    *slot = (*slot).max(u64::from(n));
                }
            }
            for (name, n) in own {
                let slot = into.entry(name.to_string()).or_default();
                *slot = if sum { *slot + n } else { (*slot).max(n) };
            }
        }
    }
    for (name, n) in init {
        let slot = app.entry(name).or_default();
        *slot = (*slot).max(n);
    }
    app.retain(|_, n| *n > 0);
    Ok(app)
}
