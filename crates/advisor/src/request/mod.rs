//! The advice request as users write it (CLI flags, YAML/JSON file, HTTP body) and its
//! validation into a [`Request`] the pure planner trusts. Enum-like fields stay strings
//! in the wire model so a bad value yields our error (field path + allowed values)
//! instead of a serde message.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use trainplace_engine::Catalog;

mod kinds;

pub use kinds::{CapacityPref, Demand, Framework};

use crate::error::InputError;
use crate::regions;
use crate::time::parse_instant;

/// The wire shape of a request. Every field is optional here; `validate` decides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdviceRequest {
    pub gpus: Option<i64>,
    pub nodes: Option<i64>,
    pub family: Option<String>,
    pub instance_type: Option<String>,
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub availability_zones: Vec<String>,
    pub duration_hours: Option<f64>,
    pub duration_days: Option<f64>,
    pub earliest_start: Option<String>,
    pub latest_end: Option<String>,
    pub budget_usd: Option<f64>,
    pub capacity: Option<String>,
    pub reservation_id: Option<String>,
    pub framework: Option<String>,
    pub cluster_name: Option<String>,
    pub job_name: Option<String>,
    pub namespace: Option<String>,
    pub image: Option<String>,
    pub eks_version: Option<String>,
    /// The cluster gives EFA through the EFA DRA driver (DRANET, Kubernetes >= 1.34,
    /// managed or self-managed node groups): pods claim EFA with a ResourceClaim of
    /// device class `efa.networking.k8s.aws` instead of `vpc.amazonaws.com/efa`.
    pub efa_dra: Option<bool>,
    /// Plan as of this instant (RFC 3339); default: the clock. Makes plans reproducible.
    pub now: Option<String>,
}

/// Names used in the artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Names {
    pub cluster: String,
    pub job: String,
    pub namespace: String,
}

/// A validated request: the only input the planner accepts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub demand: Demand,
    /// `None` = any GPU family.
    pub family: Option<String>,
    pub instance_type: Option<String>,
    pub region: String,
    pub zones: Vec<String>,
    pub job_hours: u32,
    pub earliest_start: Option<Timestamp>,
    pub latest_end: Option<Timestamp>,
    pub budget_usd: Option<f64>,
    pub capacity: CapacityPref,
    pub reservation_id: Option<String>,
    pub framework: Framework,
    pub names: Names,
    /// The job's image; `None` = the accelerator's default (`images.rs`).
    pub image: Option<String>,
    /// Kubernetes version of a new cluster.
    pub eks_version: String,
    /// EFA through the EFA DRA driver (see [`AdviceRequest::efa_dra`]).
    pub efa_dra: bool,
    /// The instant the plan is made for.
    pub now: Timestamp,
    /// The requested start when it was in the past and moved to `now`.
    pub start_moved_from: Option<Timestamp>,
}

/// Upper bound on what one request may ask for; far above any real job, it only
/// keeps arithmetic and the rendered layout bounded.
const MAX_GPUS: i64 = 16_384;
pub const DEFAULT_REGION: &str = "us-east-1";
/// Kubernetes version of a new cluster: the newest eksctl supports
/// (<https://github.com/eksctl-io/eksctl/blob/main/pkg/apis/eksctl.io/v1alpha5/types.go>,
/// `Version1_35`). Users with a cluster keep theirs.
pub const DEFAULT_EKS_VERSION: &str = "1.35";

/// A validated time window (see [`AdviceRequest::validate_at`]).
struct Window {
    earliest_start: Option<Timestamp>,
    latest_end: Option<Timestamp>,
    /// The requested start when it was in the past and moved to `now`.
    start_moved_from: Option<Timestamp>,
}

impl AdviceRequest {
    /// Validate as of the request's `now`, else `clock`: the time the caller read (the
    /// advisor reads no clock of its own, so a plan depends only on its inputs).
    pub fn validate(&self, catalog: &Catalog, clock: Timestamp) -> Result<Request, InputError> {
        let now = parse_opt("now", self.now.as_deref())?.unwrap_or(clock);
        self.validate_at(catalog, now)
    }

    /// Validate as of `now`, whatever the request's own `now` says.
    pub fn validate_at(&self, catalog: &Catalog, now: Timestamp) -> Result<Request, InputError> {
        let demand = self.demand()?;
        let (family, instance_type) = self.family_and_type(catalog)?;
        let region = self.region()?;
        let job_hours = self.job_hours()?;
        let Window {
            earliest_start,
            latest_end,
            start_moved_from,
        } = self.window(now, job_hours)?;
        if let Some(budget) = self.budget_usd
            && !(budget.is_finite() && budget > 0.0)
        {
            return Err(InputError::request(
                "budgetUsd",
                "must be a positive number",
            ));
        }
        let capacity = self.capacity_pref()?;
        let reservation_id = self.reservation(capacity)?;
        Ok(Request {
            demand,
            family,
            instance_type,
            region,
            zones: self.availability_zones.clone(),
            job_hours,
            earliest_start,
            latest_end,
            budget_usd: self.budget_usd,
            capacity,
            reservation_id,
            framework: self.framework()?,
            names: self.names()?,
            image: self.image()?,
            eks_version: self.eks_version()?,
            efa_dra: self.efa_dra.unwrap_or(false),
            now,
            start_moved_from,
        })
    }

    /// The region (default us-east-1), with every zone asked for in it.
    fn region(&self) -> Result<String, InputError> {
        let region = self
            .region
            .clone()
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        if !regions::is_known_region(&region) {
            return Err(
                InputError::request("region", format!("unknown region {region:?}"))
                    .with_allowed(regions::REGIONS.iter().copied()),
            );
        }
        for (i, zone) in self.availability_zones.iter().enumerate() {
            if !regions::is_zone_of(zone, &region) {
                return Err(InputError::request(
                    format!("availabilityZones[{i}]"),
                    format!("{zone:?} is not a zone name in {region} (expected e.g. {region}a)"),
                ));
            }
        }
        Ok(region)
    }

    /// The time window as of `now`: it must end later and hold the job; a start in
    /// the past means "as soon as possible" and moves to `now` (and says so).
    fn window(&self, now: Timestamp, job_hours: u32) -> Result<Window, InputError> {
        let mut earliest_start = parse_opt("earliestStart", self.earliest_start.as_deref())?;
        let latest_end = parse_opt("latestEnd", self.latest_end.as_deref())?;
        if let Some(end) = latest_end
            && end <= now
        {
            return Err(InputError::request(
                "latestEnd",
                format!("{end} is in the past (now {now}): give a window that ends later"),
            ));
        }
        let start_moved_from = earliest_start.filter(|s| *s < now);
        if start_moved_from.is_some() {
            earliest_start = Some(now);
        }
        if let (Some(start), Some(end)) = (earliest_start, latest_end) {
            if end <= start {
                return Err(InputError::request(
                    "latestEnd",
                    format!("latest end {end} is not after earliest start {start}"),
                ));
            }
            let window_hours = (end.as_second() - start.as_second()) / 3600;
            if window_hours < i64::from(job_hours) {
                return Err(InputError::request(
                    "latestEnd",
                    format!("the window holds {window_hours} h, the job needs {job_hours} h"),
                ));
            }
        }
        Ok(Window {
            earliest_start,
            latest_end,
            start_moved_from,
        })
    }

    fn framework(&self) -> Result<Framework, InputError> {
        match self.framework.as_deref() {
            None => Ok(Framework::PyTorchJob),
            Some(text) => Framework::parse(text).ok_or_else(|| {
                InputError::request("framework", format!("unknown framework {text:?}"))
                    .with_allowed(Framework::NAMES)
            }),
        }
    }

    fn demand(&self) -> Result<Demand, InputError> {
        let check = |field: &str, value: i64| -> Result<u32, InputError> {
            if value < 1 {
                return Err(InputError::request(
                    field,
                    format!("must be at least 1, got {value}"),
                ));
            }
            if value > MAX_GPUS {
                return Err(InputError::request(
                    field,
                    format!("must be at most {MAX_GPUS}"),
                ));
            }
            Ok(value as u32)
        };
        match (self.gpus, self.nodes) {
            (Some(_), Some(_)) => Err(InputError::request("nodes", "give gpus or nodes, not both")),
            (Some(g), None) => Ok(Demand::Gpus(check("gpus", g)?)),
            (None, Some(n)) => Ok(Demand::Nodes(check("nodes", n)?)),
            (None, None) => Err(InputError::request("gpus", "required (or nodes)")),
        }
    }

    fn family_and_type(
        &self,
        catalog: &Catalog,
    ) -> Result<(Option<String>, Option<String>), InputError> {
        let mut families: Vec<String> = catalog.instances().map(|p| p.family.clone()).collect();
        families.sort();
        families.dedup();
        let family = match self.family.as_deref().map(str::to_ascii_lowercase) {
            None => None,
            Some(f) if f == "any" => None,
            Some(f) if families.contains(&f) => Some(f),
            Some(f) => {
                let allowed = families.iter().cloned().chain(["any".to_string()]);
                return Err(
                    InputError::request("family", format!("unknown family {f:?}"))
                        .with_allowed(allowed),
                );
            }
        };
        let Some(name) = &self.instance_type else {
            return Ok((family, None));
        };
        let Some(profile) = catalog.get(name) else {
            let allowed = catalog.instances().map(|p| p.name.clone());
            return Err(InputError::request(
                "instanceType",
                format!("{name:?} is not in the instance catalog"),
            )
            .with_allowed(allowed));
        };
        if let Some(f) = &family
            && &profile.family != f
        {
            return Err(InputError::request(
                "instanceType",
                format!(
                    "{name} is family {}, the request asks for {f}",
                    profile.family
                ),
            ));
        }
        Ok((family, Some(name.clone())))
    }

    fn job_hours(&self) -> Result<u32, InputError> {
        let (field, hours) = match (self.duration_hours, self.duration_days) {
            (Some(_), Some(_)) => {
                return Err(InputError::request(
                    "durationDays",
                    "give durationHours or durationDays, not both",
                ));
            }
            (Some(h), None) => ("durationHours", h),
            (None, Some(d)) => ("durationDays", d * 24.0),
            (None, None) => {
                return Err(InputError::request(
                    "durationHours",
                    "required (or durationDays)",
                ));
            }
        };
        // Ten years: beyond any reservation AWS sells; bounds the u32 below.
        if !(hours.is_finite() && hours > 0.0 && hours <= 87_600.0) {
            return Err(InputError::request(
                field,
                "must be a positive duration of at most ten years",
            ));
        }
        Ok(hours.ceil() as u32)
    }

    fn capacity_pref(&self) -> Result<CapacityPref, InputError> {
        match self
            .capacity
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
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

    fn reservation(&self, capacity: CapacityPref) -> Result<Option<String>, InputError> {
        match (&self.reservation_id, capacity) {
            (None, CapacityPref::Odcr) => Err(InputError::request(
                "reservationId",
                "required with capacity odcr (cr-...)",
            )),
            (Some(id), CapacityPref::Odcr) => {
                let ok = id.strip_prefix("cr-").is_some_and(|hex| {
                    !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
                });
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

    fn names(&self) -> Result<Names, InputError> {
        let pick =
            |field: &str, value: &Option<String>, default: &str| -> Result<String, InputError> {
                let v = value.clone().unwrap_or_else(|| default.to_string());
                if is_dns_label(&v) {
                    Ok(v)
                } else {
                    Err(InputError::request(
                        field,
                        format!(
                            "{v:?} is not a DNS label (lowercase letters, digits, '-', at most 63)"
                        ),
                    ))
                }
            };
        Ok(Names {
            cluster: pick("clusterName", &self.cluster_name, "training")?,
            job: pick("jobName", &self.job_name, "train")?,
            namespace: pick("namespace", &self.namespace, "default")?,
        })
    }

    fn image(&self) -> Result<Option<String>, InputError> {
        match &self.image {
            Some(i) if i.trim().is_empty() || i.contains(char::is_whitespace) => Err(
                InputError::request("image", format!("{i:?} is not an image reference")),
            ),
            other => Ok(other.clone()),
        }
    }

    fn eks_version(&self) -> Result<String, InputError> {
        let v = self
            .eks_version
            .clone()
            .unwrap_or_else(|| DEFAULT_EKS_VERSION.to_string());
        let ok = v.split_once('.').is_some_and(|(a, b)| {
            a == "1" && !b.is_empty() && b.chars().all(|c| c.is_ascii_digit())
        });
        if ok {
            Ok(v)
        } else {
            Err(InputError::request(
                "eksVersion",
                format!("{v:?} is not a Kubernetes minor version like {DEFAULT_EKS_VERSION}"),
            ))
        }
    }
}

fn parse_opt(field: &str, text: Option<&str>) -> Result<Option<Timestamp>, InputError> {
    text.map(|t| parse_instant(t).map_err(|m| InputError::request(field, m)))
        .transpose()
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
