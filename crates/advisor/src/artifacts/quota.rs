//! The vCPU quota check of `aws-cli.sh` (the limits and their sources: `limits.rs`).

use crate::recommend::Recommendation;

/// On-Demand nodes (and an ODCR's) count against the account's vCPU quota for their
/// family: stop before creating anything when it is lower than the job needs
/// (`limits.rs`).
pub fn quota_check(rec: &Recommendation, out: &mut Vec<String>) {
    let t = &rec.instance.name;
    let (Some(per_node), Some((code, name))) =
        (crate::limits::vcpus(t), crate::limits::vcpu_quota(t))
    else {
        return;
    };
    let need = per_node * rec.shape.nodes;
    out.push(format!(
        "# {{STEP}} vCPU quota: {} x {t} need {need} vCPUs of \"{name}\" ({code}).",
        rec.shape.nodes
    ));
    out.push(format!(
        "HAVE=$(aws service-quotas get-service-quota --region \"$REGION\" --service-code ec2 --quota-code {code} --query Quota.Value --output text); if [ \"${{HAVE%.*}}\" -lt {need} ]; then echo \"quota {code} ({name}) is $HAVE vCPUs; the job needs {need}: request an increase first\" >&2; exit 1; fi"
    ));
}
