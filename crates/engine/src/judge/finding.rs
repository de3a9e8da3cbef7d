//! Findings: what a rule found, the fix, and the opt-in that would allow it.

use serde::Serialize;

use crate::facts::policy::Mode;

/// Rules, as they appear in messages and metric labels (a bounded set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    PartialNode,
    MultiAz,
    ImpossibleRequest,
    UnknownInstanceType,
    OptOutRefused,
    Reshape,
    InvalidObject,
    /// An EFA count that runs but is not the pod's share of the node (warning).
    EfaCount,
    /// `hostNetwork` without `ClusterFirstWithHostNet` (warning: runs, DNS breaks).
    HostNetworkDns,
    /// A memory-backed /dev/shm larger than the container's memory limit (warning).
    ShmMemory,
    /// Layout parts left out because the namespace's Pod Security level forbids them.
    PodSecurity,
    /// A training pod whose devices come through DRA claims trainplace cannot count.
    DeviceClaims,
    /// A job expected to outlive the Capacity Block it can only run on.
    CapacityBlockEnds,
    /// A multi-node NVLink job (GB200) whose IMEX channel wiring is missing or wrong.
    NvlinkDomain,
    /// An object whose lists are past the bounds trainplace judges within (`judge::bounds`).
    TooLarge,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::PartialNode => "partial-node",
            Rule::MultiAz => "multi-az",
            Rule::ImpossibleRequest => "impossible-request",
            Rule::UnknownInstanceType => "unknown-instance-type",
            Rule::OptOutRefused => "opt-out-refused",
            Rule::Reshape => "reshape",
            Rule::InvalidObject => "invalid-object",
            Rule::EfaCount => "efa-count",
            Rule::HostNetworkDns => "host-network-dns",
            Rule::ShmMemory => "shm-memory",
            Rule::PodSecurity => "pod-security",
            Rule::DeviceClaims => "device-claims",
            Rule::CapacityBlockEnds => "capacity-block-ends",
            Rule::NvlinkDomain => "nvlink-domain",
            Rule::TooLarge => "too-large",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: Rule,
    pub mode: Mode,
    /// Where in the object: `spec`, `spec.containers[0]`, `pytorchReplicaSpecs.Worker`.
    pub site: String,
    pub found: String,
    pub fix: String,
    /// The annotation that would allow this, when one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opt_in: Option<&'static str>,
    /// Why it matters, for the pod's own hardware: a second line after the lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// How [`Verdict::fold_repeats`](crate::judge::verdict::Verdict) joins the sites of
/// templates that fail a rule the same way.
pub(crate) const SITES_JOINED: &str = " and ";

/// Each template site a finding's `site` names (one, or several folded into one).
pub(crate) fn sites(site: &str) -> impl Iterator<Item = &str> {
    site.split(SITES_JOINED)
}

impl Finding {
    /// Each template site the finding names (one, or several folded into one finding).
    pub(crate) fn sites(&self) -> impl Iterator<Item = &str> {
        sites(&self.site)
    }

    /// The lead (rule, where, what, fix, opt-in), then why it matters when the rule
    /// says, on one line: warnings travel in HTTP `Warning` headers, which the API server
    /// drops when they hold a control character such as a newline
    /// (<https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/apimachinery/pkg/util/net/http.go>,
    /// `NewWarningHeader`).
    pub fn message(&self) -> String {
        match &self.why {
            Some(why) => format!("{} Why: {why}", self.lead()),
            None => self.lead(),
        }
    }

    /// A denial's form: the lead on a line of its own, then why, indented (a denial's
    /// status message may span lines; kubectl prints it as it is).
    pub fn denial(&self) -> String {
        match &self.why {
            Some(why) => format!("{}\n  Why: {why}", self.lead()),
            None => self.lead(),
        }
    }

    /// One self-contained line: rule, where, what, fix, opt-in.
    pub fn lead(&self) -> String {
        let mut m = format!(
            "[{}] {}: {} Fix: {}",
            self.rule.as_str(),
            self.site,
            self.found,
            self.fix
        );
        if let Some(a) = self.opt_in {
            m.push_str(&format!(" Opt in: {a}: \"true\"."));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_one_line_and_a_denial_leads_with_its_own() {
        let f = Finding {
            rule: Rule::PartialNode,
            mode: Mode::Warn,
            site: "spec".into(),
            found: "8 pods x 1 GPU.".into(),
            fix: "use 1 pod x 8 GPUs.".into(),
            opt_in: Some("trainplace.io/allow-partial-node"),
            why: Some("ranks talk over EFA.".into()),
        };
        // The API server drops a Warning header holding a control character.
        assert!(
            !f.message().chars().any(char::is_control),
            "{}",
            f.message()
        );
        assert!(f.message().ends_with(" Why: ranks talk over EFA."));
        let denial = f.denial();
        let lines: Vec<&str> = denial.lines().collect();
        assert_eq!(lines.len(), 2, "{denial}");
        assert!(
            lines[0].starts_with(
                "[partial-node] spec: 8 pods x 1 GPU. Fix: use 1 pod x 8 GPUs. Opt in:"
            )
        );
    }
}
