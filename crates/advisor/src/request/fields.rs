//! The request's plain fields: capacity preference, reservation id, names, image and
//! Kubernetes version, each checked on its own.

use serde::Serialize;

use super::kinds::CapacityPref;
use crate::error::InputError;

/// Names used in the artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Names {
    pub cluster: String,
    pub job: String,
    pub namespace: String,
}

/// Kubernetes version of a new cluster: the newest eksctl supports
/// (<https://github.com/eksctl-io/eksctl/blob/main/pkg/apis/eksctl.io/v1alpha5/types.go>,
/// `Version1_35`). Users with a cluster keep theirs.
pub const DEFAULT_EKS_VERSION: &str = "1.35";

/// The capacity preference (default auto).
pub(super) fn capacity_pref(text: Option<&str>) -> Result<CapacityPref, InputError> {
    match text.map(str::to_ascii_lowercase).as_deref() {
        None | Some("auto") => Ok(CapacityPref::Auto),
        Some("on-demand") => Ok(CapacityPref::OnDemand),
        Some("odcr") => Ok(CapacityPref::Odcr),
        Some("capacity-block") => Ok(CapacityPref::CapacityBlock),
        Some(other) => Err(InputError::request(
            "capacity",
            format!("unknown capacity preference {other:?}"),
        )
        .with_allowed(["auto", "on-demand", "odcr", "capacity-block"])),
    }
}

/// The ODCR id: required with capacity odcr, refused with any other.
pub(super) fn reservation(
    reservation_id: &Option<String>,
    capacity: CapacityPref,
) -> Result<Option<String>, InputError> {
    match (reservation_id, capacity) {
        (None, CapacityPref::Odcr) => Err(InputError::request(
            "reservationId",
            "required with capacity odcr (cr-...)",
        )),
        (Some(id), CapacityPref::Odcr) => {
            let ok = id
                .strip_prefix("cr-")
                .is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()));
            if ok {
                Ok(Some(id.clone()))
            } else {
                Err(InputError::request(
                    "reservationId",
                    format!("{id:?} is not a capacity reservation id (cr- followed by hex)"),
                ))
            }
        }
        (Some(_), _) => Err(InputError::request(
            "reservationId",
            "only used with capacity odcr",
        )),
        (None, _) => Ok(None),
    }
}

/// The cluster, job and namespace names (defaults training, train, default): DNS labels.
pub(super) fn names(
    cluster: &Option<String>,
    job: &Option<String>,
    namespace: &Option<String>,
) -> Result<Names, InputError> {
    let pick = |field: &str, value: &Option<String>, default: &str| -> Result<String, InputError> {
        let v = value.clone().unwrap_or_else(|| default.to_string());
        if is_dns_label(&v) {
            Ok(v)
        } else {
            Err(InputError::request(
                field,
                format!("{v:?} is not a DNS label (lowercase letters, digits, '-', at most 63)"),
            ))
        }
    };
    Ok(Names {
        cluster: pick("clusterName", cluster, "training")?,
        job: pick("jobName", job, "train")?,
        namespace: pick("namespace", namespace, "default")?,
    })
}

/// The job's image, when given: one reference without spaces.
pub(super) fn image(image: &Option<String>) -> Result<Option<String>, InputError> {
    match image {
        Some(i) if i.trim().is_empty() || i.contains(char::is_whitespace) => Err(
            InputError::request("image", format!("{i:?} is not an image reference")),
        ),
        other => Ok(other.clone()),
    }
}

/// The Kubernetes minor version of a new cluster (default [`DEFAULT_EKS_VERSION`]).
pub(super) fn eks_version(version: &Option<String>) -> Result<String, InputError> {
    let v = version
        .clone()
        .unwrap_or_else(|| DEFAULT_EKS_VERSION.to_string());
    let ok = v
        .split_once('.')
        .is_some_and(|(a, b)| a == "1" && !b.is_empty() && b.chars().all(|c| c.is_ascii_digit()));
    if ok {
        Ok(v)
    } else {
        Err(InputError::request(
            "eksVersion",
            format!("{v:?} is not a Kubernetes minor version like {DEFAULT_EKS_VERSION}"),
        ))
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
