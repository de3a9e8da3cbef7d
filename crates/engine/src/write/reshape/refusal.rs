//! Why a reshape is refused: an enforced reshape finding, and the whole-node shapes
//! nearest to a size that does not fill whole nodes.

use crate::facts::policy::Mode;
use crate::judge::finding::{Finding, Rule};
use crate::judge::rules::{count, count64};
use crate::judge::verdict::Verdict;
use crate::read::annotations::RESHAPE;
use trainplace_catalog::InstanceProfile;

pub(super) fn refuse(verdict: &mut Verdict, site: &str, found: String, fix: String) {
    verdict.findings.push(Finding {
        rule: Rule::Reshape,
        mode: Mode::Enforce,
        site: site.to_string(),
        found,
        fix,
        opt_in: None,
        why: None,
    });
}

/// Why `pods x g` GPUs cannot become whole nodes, and the nearest shapes that can.
/// Never offers zero pods: below one node the only whole-node shape is one node.
pub(super) fn not_whole_nodes(
    pods: u64,
    g: u32,
    gpus: u64,
    inst: &InstanceProfile,
) -> (String, String) {
    let big = u64::from(inst.accelerators);
    let found = format!(
        "{} x {} = {gpus} GPUs do not fill whole {} nodes ({big} GPUs each).",
        count64(pods, "pod"),
        count(g, "GPU"),
        inst.name
    );
    let (down, up) = (gpus / big, gpus.div_ceil(big));
    let fix = if down == 0 {
        format!(
            "use 1 pod x {big} GPUs (the whole node), or leave the job as it is without {RESHAPE}."
        )
    } else {
        format!(
            "the nearest full-node shapes are {} x {big} GPUs ({} GPUs) and {} x {big} GPUs ({} GPUs); pick one and resubmit.",
            count64(down, "pod"),
            down * big,
            count64(up, "pod"),
            up * big
        )
    };
    (found, fix)
}
