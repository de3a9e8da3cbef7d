//! The advice request as users write it (CLI flags, YAML/JSON file, HTTP body) and its
//! validation into a [`Request`] the pure planner trusts. Enum-like fields stay strings
//! in the wire model so a bad value yields our error (field path + allowed values)
//! instead of a serde message.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use trainplace_catalog::Catalog;

mod fields;
mod kinds;

pub use fields::{DEFAULT_EKS_VERSION, Names};
pub use kinds::{CapacityPref, Demand, Framework, Route};

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
    /// The model's size in billions of parameters: sizes checkpoint storage
    /// (`checkpoint.rs`); without it, the job's accelerator memory bounds a checkpoint.
    pub model_params_billions: Option<f64>,
    /// What makes the job's nodes: `eksctl` (default) or `karpenter` ([`Route`]).
    pub route: Option<String>,
    /// Plan as of this instant (RFC 3339); default: the clock. Makes plans reproducible.
    pub now: Option<String>,
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
    /// See [`AdviceRequest::model_params_billions`].
    pub model_params_billions: Option<f64>,
    /// What makes the job's nodes (one route per plan).
    pub route: Route,
    /// The instant the plan is made for.
    pub now: Timestamp,
    /// The requested start when it was in the past and moved to `now`.
    pub start_moved_from: Option<Timestamp>,
}

/// Upper bound on what one request may ask for; far above any real job, it only
/// keeps arithmetic and the rendered layout bounded.
const MAX_GPUS: i64 = 16_384;
pub const DEFAULT_REGION: &str = "us-east-1";
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
        if let Some(b) = self.model_params_billions
            && !(b.is_finite() && b > 0.0 && b <= 100_000.0)
        {
            return Err(InputError::request(
                "modelParamsBillions",
                "must be a positive number of billions of parameters (at most 100000)",
            ));
        }
        let capacity = fields::capacity_pref(self.capacity.as_deref())?;
        let reservation_id = fields::reservation(&self.reservation_id, capacity)?;
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
            names: fields::names(&self.cluster_name, &self.job_name, &self.namespace)?,
            image: fields::image(&self.image)?,
            eks_version: fields::eks_version(&self.eks_version)?,
            efa_dra: self.efa_dra.unwrap_or(false),
            model_params_billions: self.model_params_billions,
            route: self.route()?,
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

    fn route(&self) -> Result<Route, InputError> {
        match self.route.as_deref() {
            None => Ok(Route::default()),
            Some(text) => Route::parse(text).ok_or_else(|| {
                InputError::request("route", format!("unknown route {text:?}"))
                    .with_allowed(Route::NAMES)
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
}

fn parse_opt(field: &str, text: Option<&str>) -> Result<Option<Timestamp>, InputError> {
    text.map(|t| parse_instant(t).map_err(|m| InputError::request(field, m)))
        .transpose()
}
