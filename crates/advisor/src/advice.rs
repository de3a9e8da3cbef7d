//! The one entry point both faces call: request + raw AWS/cluster documents in, the
//! recommendation and its artifacts out. Pure; the faces only read files or bodies.

use serde::Serialize;
use serde_json::Value;
use trainplace_engine::Policy;

use crate::artifacts::{Artifact, artifacts};
use crate::aws::{instance_types, offerings, reservations};
use crate::error::{InputError, InputSource};
use crate::inventory::{KubectlNodesJson, NodeSource};
use crate::recommend::{Facts, Recommendation, recommend};
use crate::request::AdviceRequest;

/// Raw optional inputs, as the aws CLI / kubectl print them.
#[derive(Debug, Clone, Default)]
pub struct RawFacts {
    pub offerings: Option<String>,
    pub instance_types: Option<String>,
    pub nodes: Option<String>,
    /// `aws ec2 describe-capacity-reservations` output: blocks the account holds.
    pub reservations: Option<String>,
}

impl RawFacts {
    pub fn parse(&self) -> Result<Facts, InputError> {
        Ok(Facts {
            offerings: self
                .offerings
                .as_deref()
                .map(offerings::parse_offerings)
                .transpose()?,
            instance_types: self
                .instance_types
                .as_deref()
                .map(instance_types::parse_instance_types)
                .transpose()?,
            nodes: self
                .nodes
                .as_ref()
                .map(|t| KubectlNodesJson(t.clone()).nodes())
                .transpose()?,
            reservations: self
                .reservations
                .as_deref()
                .map(reservations::parse_reservations)
                .transpose()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Advice {
    pub recommendation: Recommendation,
    pub artifacts: Vec<Artifact>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_svg: Option<String>,
}

/// The advice for `req`, planned as of its `now`, else `clock` (the caller's reading).
pub fn advise(
    req: &AdviceRequest,
    facts: &RawFacts,
    policy: &Policy,
    clock: jiff::Timestamp,
) -> Result<Advice, InputError> {
    let facts = facts.parse()?;
    let mut req = req.clone();
    region_from_offerings(&mut req, &facts)?;
    let request = req.validate(&policy.catalog, clock)?;
    let mut recommendation = recommend(&request, &policy.catalog, &facts)?;
    let groups = crate::artifacts::eksctl::nodegroup_names(&recommendation).len() as u32;
    if let Some(reason) = crate::limits::refusal(&recommendation, groups) {
        let field = match request.demand {
            crate::request::Demand::Nodes(_) => "nodes",
            crate::request::Demand::Gpus(_) => "gpus",
        };
        return Err(InputError::request(field, reason));
    }
    let bounds = crate::limits::warnings(&recommendation, groups);
    recommendation.warnings.extend(bounds);
    recommendation
        .warnings
        .extend(ultraserver_warning(&recommendation));
    let fallbacks = fallback_options(&recommendation, &request, &facts);
    recommendation.capacity_options.extend(fallbacks);
    tracing::info!(
        instance = %recommendation.instance.name,
        nodes = recommendation.shape.nodes,
        zone = %recommendation.availability_zone,
        warnings = recommendation.warnings.len(),
        "recommendation"
    );
    Ok(Advice {
        artifacts: artifacts(&recommendation, policy),
        recommendation,
        layout_svg: None,
    })
}

/// Without a region, the offerings' zones name it; with one, offerings only from other
/// regions are refused with the flag to pass (instead of being dropped unseen).
pub fn region_from_offerings(req: &mut AdviceRequest, facts: &Facts) -> Result<(), InputError> {
    let Some(offers) = facts.offerings.as_deref().filter(|o| !o.is_empty()) else {
        return Ok(());
    };
    let mut regions: Vec<&str> = offers
        .iter()
        .filter_map(|o| crate::regions::region_of(&o.availability_zone))
        .collect();
    regions.sort();
    regions.dedup();
    match (&req.region, regions.as_slice()) {
        (None, [one]) => {
            tracing::info!(region = one, "region taken from the offerings");
            req.region = Some((*one).to_string());
            Ok(())
        }
        (None, []) => Ok(()),
        (None, many) => Err(InputError::new(
            InputSource::Offerings,
            "CapacityBlockOfferings[].AvailabilityZone",
            format!(
                "offerings span regions {}: pass --region (request field region) to pick one",
                many.join(", ")
            ),
        )),
        (Some(given), found) if !found.is_empty() && !found.contains(&given.as_str()) => {
            Err(InputError::request(
                "region",
                format!(
                    "the offerings are in {} but the request says {given}: pass --region {} (or list offerings in {given})",
                    found.join(", "),
                    found[0]
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// A request from JSON, with serde's complaint turned into a field-path error.
pub fn request_from_value(v: Value) -> Result<AdviceRequest, InputError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "$".to_string() } else { path };
        InputError::new(InputSource::Request, field, e.into_inner().to_string())
    })
}

/// Keys of a JSON request body that carry documents rather than request fields. The
/// cluster inventory is `clusterNodes`: `nodes` is the request's node count.
pub const DOCUMENT_KEYS: [&str; 4] = [
    "offerings",
    "instanceTypes",
    "clusterNodes",
    "existingReservations",
];

/// Split an HTTP body into the request and the embedded aws/kubectl documents.
pub fn split_body(mut body: Value) -> Result<(AdviceRequest, RawFacts), InputError> {
    let Some(map) = body.as_object_mut() else {
        return Err(InputError::request("$", "the body must be a JSON object"));
    };
    let mut take = |k: &str| {
        map.remove(k)
            .filter(|v| !v.is_null())
            .map(|v| v.to_string())
    };
    let facts = RawFacts {
        offerings: take("offerings"),
        instance_types: take("instanceTypes"),
        nodes: take("clusterNodes"),
        reservations: take("existingReservations"),
    };
    Ok((request_from_value(body)?, facts))
}

/// When no Capacity Block fits as asked (or only held blocks were given), the other ways
/// to reserved capacity (`capacity/fallbacks.rs`), as capacity options not chosen.
fn fallback_options(
    rec: &crate::Recommendation,
    request: &crate::Request,
    facts: &Facts,
) -> Vec<crate::options::CapacityOption> {
    let no_fit = rec
        .warnings
        .iter()
        .any(|w| w.code == "no-capacity-block-fits");
    let listing = matches!(
        rec.capacity,
        crate::plan::CapacityPlan::CapacityBlock { blocks: None, .. }
    );
    if !no_fit && !listing {
        return Vec::new();
    }
    let need =
        crate::capacity::BlockNeed::of_request(&rec.instance.name, request, rec.shape.nodes, 0);
    let offers = facts.offerings.as_deref().unwrap_or_default();
    let held = facts.reservations.as_deref().unwrap_or_default();
    crate::capacity::fallbacks::fallbacks(offers, held, &need)
        .into_iter()
        .map(|f| crate::options::CapacityOption {
            kind: f.kind,
            label: f.label,
            chosen: false,
            offerings: f.offerings,
            availability_zone: None,
            start: None,
            end: None,
            usd: f.usd,
        })
        .collect()
}

/// P6e-GB200 plans: how they are sold and where their nodes go. UltraServer Capacity
/// Blocks are sold in the Dallas Local Zone, not on-demand
/// (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html>);
/// eksctl launches only self-managed nodegroups in a Local Zone
/// (`artifacts/local_zone.rs`); their instances are reclaimed from 60 minutes before the
/// end (`capacity/margin.rs`).
fn ultraserver_warning(rec: &Recommendation) -> Option<crate::warnings::Warning> {
    if !crate::capacity::margin::ultraserver_only(&rec.instance.name) {
        return None;
    }
    let nodes = match crate::artifacts::local_zone::local_zone(rec) {
        Some(zone) => format!(
            "eksctl-cluster.yaml has its nodes as a self-managed nodeGroup with localZones: [{zone}] (EKS managed nodegroups are not launched in a Local Zone) and aws-cli.sh opts the account in to the zone's group first"
        ),
        None => "the Local Zone comes with the offering chosen: rerun with the offerings (aws-cli.sh says how) for the self-managed Local Zone nodegroup".to_string(),
    };
    Some(crate::warnings::Warning {
        code: "ultraserver-blocks",
        message: format!(
            "{} is sold only as UltraServer Capacity Blocks in the Dallas Local Zone, not on-demand; {nodes}; UltraServer blocks are reclaimed from {} minutes before their end, which the checkpoint deadline allows for",
            rec.instance.name,
            crate::capacity::ULTRASERVER_RECLAIM_MINUTES
        ),
    })
}
