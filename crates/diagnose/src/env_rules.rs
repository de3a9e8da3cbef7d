//! Environment the user set that the aws-ofi-nccl version in use makes stale, and settings
//! that pin NCCL's choices (NCCL_PROTO, NCCL_TOPO_FILE, NCCL_P2P_DISABLE).
//! Rules from the aws-ofi-nccl release notes (<https://github.com/aws/aws-ofi-nccl/releases>) and AWS EFA docs.

use crate::context::LogContext;
use crate::env::{EnvSetting, EnvSource};
use crate::finding::{Evidence, Finding, Severity};
use crate::nccl_log::LogSummary;
use crate::version::Version;

const PLUGIN_DEFAULTS_FROM: Version = Version::new(1, 16, 0);
const NO_FI_FROM: Version = Version::new(1, 7, 0);
const LIBFABRIC_NO_FI_FROM: Version = Version::new(1, 18, 0);

pub(crate) fn check(
    summary: &LogSummary,
    ctx: &LogContext,
    ofi_flag: Option<Version>,
) -> Vec<Finding> {
    let ofi = ofi_flag.or_else(|| summary.ofi_version());
    let libfabric = summary
        .libfabric_version
        .as_deref()
        .and_then(Version::parse_lenient);
    let evidence = |setting: &EnvSetting| Evidence::new(setting.line, &setting.raw);
    let mut findings = Vec::new();
    for setting in &summary.env {
        let finding = match setting.source {
            EnvSource::User => user_setting(setting, ctx, ofi, libfabric),
            EnvSource::Plugin => plugin_setting(setting, ctx),
        };
        if let Some(finding) = finding {
            findings.push(finding.with_evidence([evidence(setting)]));
        }
    }
    findings
}

fn stale(name: &str, why: String, fix: &str) -> Option<Finding> {
    Some(Finding::new(
        Severity::Warning,
        "stale-env",
        format!("{name} is set by the user but {why}"),
        fix.to_string(),
    ))
}

fn version_unknown(name: &str, needed_for: &str) -> Option<Finding> {
    Some(Finding::new(
        Severity::Info,
        "stale-env",
        format!(
            "{name} is set by the user; it is needed only for {needed_for}, and the plugin version is unknown"
        ),
        "Pass --aws-ofi-nccl-version, or keep NCCL_DEBUG=INFO so the log shows the \
         `NET/OFI Initializing aws-ofi-nccl` line."
            .into(),
    ))
}

fn user_setting(
    setting: &EnvSetting,
    ctx: &LogContext,
    ofi: Option<Version>,
    libfabric: Option<Version>,
) -> Option<Finding> {
    let name = setting.name.as_str();
    let remove = format!("Remove {name} from the pod spec.");
    match name {
        "RDMAV_FORK_SAFE" => stale(
            name,
            "it should never be set: aws-ofi-nccl sets FI_EFA_FORK_SAFE=1 itself".into(),
            &remove,
        ),
        "FI_PROVIDER" => match ofi {
            Some(v) if v >= Version::new(1, 6, 0) => stale(
                name,
                format!("aws-ofi-nccl {v} selects the EFA provider itself (needed only up to 1.5)"),
                &remove,
            ),
            Some(_) => None,
            None => version_unknown(name, "aws-ofi-nccl <= 1.5"),
        },
        "FI_EFA_USE_DEVICE_RDMA" => match ofi {
            Some(v) if (v.major, v.minor) == (1, 6) => None,
            Some(v) => stale(
                name,
                format!("it is needed only with aws-ofi-nccl 1.6.x on p4/p5, and {v} is in use"),
                &remove,
            ),
            None => version_unknown(name, "aws-ofi-nccl 1.6.x on p4/p5"),
        },
        "FI_EFA_FORK_SAFE" => Some(Finding::new(
            Severity::Info,
            "stale-env",
            "FI_EFA_FORK_SAFE is set by the user; aws-ofi-nccl sets it itself".into(),
            remove,
        )),
        "FI_EFA_USE_HUGE_PAGE" => Some(Finding::new(
            Severity::Info,
            "stale-env",
            "FI_EFA_USE_HUGE_PAGE is set by the user; set it to 0 only when fork fails with ENOMEM"
                .into(),
            "Keep it only if the job forks and failed with ENOMEM without it.".into(),
        )),
        other if other.starts_with("FI_") => match (ofi, libfabric) {
            (Some(v), Some(lf)) if v >= NO_FI_FROM && lf >= LIBFABRIC_NO_FI_FROM => stale(
                name,
                format!("aws-ofi-nccl {v} with libfabric {lf} needs no FI_* variables"),
                &remove,
            ),
            _ => None,
        },
        "NCCL_BUFFSIZE" | "NCCL_P2P_NET_CHUNKSIZE" => tuned_by_plugin(setting, ctx, ofi?, remove),
        "NCCL_PROTO" => nccl_proto_forced(setting, ofi, true),
        "NCCL_TOPO_FILE" => topo_file(setting, ctx, ofi, true),
        "NCCL_P2P_DISABLE" if setting.value.trim() == "1" => Some(Finding::new(
            Severity::Warning,
            "p2p-disabled",
            "NCCL_P2P_DISABLE=1 is set: GPUs in one pod cannot use NVLink or PCIe P2P and fall \
             back to SHM"
                .into(),
            remove,
        )),
        _ => None,
    }
}

/// A buffer size aws-ofi-nccl tunes itself (>= 1.16, on the P types it knows): a user
/// value overrides that tuning, a warning unless it is the plugin's own value.
fn tuned_by_plugin(
    setting: &EnvSetting,
    ctx: &LogContext,
    ofi: Version,
    remove: String,
) -> Option<Finding> {
    // Plugin >= 1.16 tunes buffer sizes on p4d, p4de, p5* and p6*: the P types we know.
    let tuned_type = ctx.instance.is_some_and(|i| {
        ["p4d", "p4de", "p5", "p5e", "p5en", "p6-b200"]
            .contains(&i.name.split('.').next().unwrap_or(""))
    });
    if ofi < PLUGIN_DEFAULTS_FROM || !tuned_type {
        return None;
    }
    let name = setting.name.as_str();
    let plugin_value = if name == "NCCL_BUFFSIZE" {
        "8388608"
    } else {
        "524288"
    };
    let severity = if setting.value == plugin_value {
        Severity::Info
    } else {
        Severity::Warning
    };
    Some(Finding::new(
        severity,
        "stale-env",
        format!(
            "{name}={} is set by the user; aws-ofi-nccl {ofi} sets {plugin_value} on {} \
             itself, and a user value overrides its tuning",
            setting.value,
            ctx.name()
        ),
        remove,
    ))
}

fn plugin_setting(setting: &EnvSetting, ctx: &LogContext) -> Option<Finding> {
    match setting.name.as_str() {
        "NCCL_PROTO" => nccl_proto_forced(setting, None, false),
        "NCCL_TOPO_FILE" => topo_file(setting, ctx, None, false),
        _ => None,
    }
}

fn nccl_proto_forced(setting: &EnvSetting, ofi: Option<Version>, by_user: bool) -> Option<Finding> {
    let value = &setting.value;
    if !by_user {
        return Some(Finding::new(
            Severity::Info,
            "nccl-proto-forced",
            format!(
                "NCCL_PROTO={value} was set by aws-ofi-nccl because the EFA provider lacks \
                 in-order delivery on this type (expected on p4d/p4de)"
            ),
            "Nothing to fix.".into(),
        ));
    }
    let stale = match ofi {
        Some(v) if value.eq_ignore_ascii_case("simple") && v >= Version::new(1, 6, 0) => format!(
            "; NCCL_PROTO=simple was needed only up to aws-ofi-nccl 1.5, and {v} forces it \
             itself where the provider needs it"
        ),
        _ => String::new(),
    };
    Some(Finding::new(
        Severity::Warning,
        "nccl-proto-forced",
        format!(
            "NCCL_PROTO={value} is forced by the user: NCCL cannot pick LL/LL128 for small \
             messages{stale}"
        ),
        "Remove NCCL_PROTO and let NCCL and the plugin choose.".into(),
    ))
}

fn topo_file(
    setting: &EnvSetting,
    ctx: &LogContext,
    ofi: Option<Version>,
    by_user: bool,
) -> Option<Finding> {
    let value = &setting.value;
    if !by_user {
        return Some(Finding::new(
            Severity::Info,
            "nccl-topo-file",
            format!(
                "NCCL_TOPO_FILE={value} was set by aws-ofi-nccl for {} (expected)",
                ctx.name()
            ),
            "Nothing to fix.".into(),
        ));
    }
    let why = match ctx.instance {
        Some(instance) if instance.plugin_topo_file => match ofi {
            Some(v) if v >= PLUGIN_DEFAULTS_FROM => format!(
                "aws-ofi-nccl {v} ships and sets the topology file for {} itself; a user file \
                 overrides it",
                instance.name
            ),
            _ => format!(
                "{} does need a topology file; make sure this one is the plugin's file for it",
                instance.name
            ),
        },
        Some(instance) => format!(
            "{} needs no topology file (the plugin ships one only for p4d, p4de and \
             g5.48xlarge); a wrong file makes NCCL misjudge GPU/NIC locality",
            instance.name
        ),
        None => "a file for another instance type makes NCCL misjudge GPU/NIC locality \
                 (instance type unknown)"
            .into(),
    };
    Some(Finding::new(
        Severity::Warning,
        "nccl-topo-file",
        format!("NCCL_TOPO_FILE={value} is set by the user: {why}"),
        "Remove NCCL_TOPO_FILE and let aws-ofi-nccl >= 1.16 set it where needed.".into(),
    ))
}
