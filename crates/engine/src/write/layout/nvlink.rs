//! The layout step for instances whose NVLink domain spans several of them (GB200
//! NVL72): one pod per instance still holds all of its GPUs, and the job's pods are
//! held in one NVLink domain (clique), so every rank reaches every other over NVLink.

use super::steps::push_required;
use super::{Edit, Plan};
use crate::read::annotations::LABEL_CLIQUE;
use crate::write::edit::Cursor;

impl Plan<'_> {
    /// Required pod affinity on `nvidia.com/gpu.clique` over the job's pods, when the
    /// job fits one NVLink domain and nothing holds it in one yet.
    pub(super) fn clique_affinity(&self, spec: &mut Cursor<'_>, ed: &mut Edit<'_>) {
        let (Some(domain), Some(pods)) = (self.instance.nvlink_domain(), self.shape.pods) else {
            return;
        };
        // A job larger than one domain cannot be held in one: its pods would stay Pending.
        if !self.shape.multi_pod || self.shape.clique_held || !self.whole_node() || pods > domain {
            return;
        }
        let Some((key, value)) = &self.shape.identity else {
            return;
        };
        let term = self.job_term(key, value, LABEL_CLIQUE);
        if push_required(spec, "podAffinity", term, ed.ops) {
            ed.change(
                format!(
                    "podAffinity: pods with {key}={value}{} in one {LABEL_CLIQUE}",
                    self.per_group()
                ),
                format!(
                    "{}'s NVLink domain spans up to {domain} instances: {pods} pods in one domain reach each other over NVLink (with the ComputeDomain's IMEX channel), not EFA",
                    self.instance.name
                ),
            );
        }
    }
}
