//! The policy as it applies to one namespace: its overrides merged over the defaults.

use kube_core::{Selector, SelectorExt};

use super::{Effective, NamespaceOverride, Policy};
use crate::facts::requester::Requester;

impl Policy {
    /// The policy as it applies to one namespace.
    pub fn effective(&self, who: &Requester<'_>) -> Effective<'_> {
        let mut defaults = self.file.defaults.clone();
        let mut modes = self.file.rules.clone();
        let mut mutations = self.file.mutations.clone();
        for (ns, sel) in self
            .namespace_overrides()
            .iter()
            .zip(&self.namespace_selectors)
        {
            if !self.namespace_matches(ns, sel.as_ref(), who) {
                continue;
            }
            merge_opt(&mut defaults.instance_type, &ns.defaults.instance_type);
            merge_opt(&mut defaults.shm_size, &ns.defaults.shm_size);
            merge_opt(
                &mut defaults.aws_ofi_nccl_version,
                &ns.defaults.aws_ofi_nccl_version,
            );
            merge_opt(&mut defaults.node_pools, &ns.defaults.node_pools);
            merge_opt(&mut defaults.efa_through_dra, &ns.defaults.efa_through_dra);
            merge_opt(
                &mut defaults.capacity_block_horizon,
                &ns.defaults.capacity_block_horizon,
            );
            merge_opt(&mut defaults.zone, &ns.defaults.zone);
            merge_opt(
                &mut defaults.network_proximity,
                &ns.defaults.network_proximity,
            );
            merge_opt(&mut modes.partial_node, &ns.rules.partial_node);
            merge_opt(&mut modes.multi_az, &ns.rules.multi_az);
            merge_opt(
                &mut modes.unknown_instance_type,
                &ns.rules.unknown_instance_type,
            );
            merge_opt(&mut modes.device_claims, &ns.rules.device_claims);
            merge_opt(
                &mut modes.capacity_block_ends,
                &ns.rules.capacity_block_ends,
            );
            let m = &ns.mutations;
            merge_opt(&mut mutations.efa, &m.efa);
            merge_opt(&mut mutations.host_ipc, &m.host_ipc);
            merge_opt(&mut mutations.ipc_lock, &m.ipc_lock);
            merge_opt(&mut mutations.shm, &m.shm);
            merge_opt(&mut mutations.nccl_env, &m.nccl_env);
            merge_opt(&mut mutations.tolerations, &m.tolerations);
            merge_opt(&mut mutations.pin_instance_type, &m.pin_instance_type);
            merge_opt(&mut mutations.zone_affinity, &m.zone_affinity);
            merge_opt(&mut mutations.node_anti_affinity, &m.node_anti_affinity);
            merge_opt(&mut mutations.torchrun_env, &m.torchrun_env);
        }
        let plugin_version = defaults
            .aws_ofi_nccl_version
            .as_deref()
            .and_then(|v| semver::Version::parse(v).ok())
            .unwrap_or_else(|| self.plugin_version.clone());
        Effective {
            policy: self,
            defaults,
            modes,
            mutations,
            plugin_version,
        }
    }

    fn namespace_matches(
        &self,
        ns: &NamespaceOverride,
        sel: Option<&Selector>,
        who: &Requester<'_>,
    ) -> bool {
        let by_name = ns
            .matches
            .names
            .iter()
            .any(|n| n == who.namespace || n == "*");
        let by_label = match (sel, who.namespace_labels) {
            (Some(sel), Some(labels)) => sel.matches(labels),
            _ => false,
        };
        by_name || by_label
    }
}

fn merge_opt<T: Clone>(base: &mut Option<T>, over: &Option<T>) {
    if over.is_some() {
        base.clone_from(over);
    }
}
