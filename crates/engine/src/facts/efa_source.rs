//! Where a node's EFA interfaces come from: the EFA device plugin's extended resource
//! `vpc.amazonaws.com/efa`, or the EFA DRA driver (DRANET, Kubernetes >= 1.34), whose
//! nodes advertise no such resource. Adding it to a pod there leaves the pod Pending.
//! <https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html>

use crate::facts::inventory::Snapshot;
use crate::facts::policy::Effective;
use trainplace_catalog::InstanceProfile;

/// Why nodes of `p` cannot grant `vpc.amazonaws.com/efa`, when so: the policy says the
/// cluster gives EFA through DRA, or the cluster's nodes of the type advertise none.
pub(crate) fn efa_resource_absent(
    p: &InstanceProfile,
    eff: &Effective<'_>,
    inventory: Option<&Snapshot>,
) -> Option<String> {
    if !p.has_efa() {
        return None;
    }
    if eff.defaults.efa_through_dra == Some(true) {
        return Some("the policy says this cluster gives EFA through the EFA DRA driver (defaults.efaThroughDra)".into());
    }
    (inventory?.advertises_efa(&p.name) == Some(false)).then(|| {
        format!(
            "the cluster's {} nodes advertise no {} (EFA through the EFA DRA driver, or no EFA device plugin)",
            p.name,
            crate::read::annotations::RES_EFA
        )
    })
}
