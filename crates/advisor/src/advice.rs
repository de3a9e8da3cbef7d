//! The one entry point both faces call: request + raw AWS/cluster documents in, the
//! recommendation and its artifacts out. Pure; the faces only read files or bodies.

use serde::Serialize;
use serde_json::Value;
use trainplace_engine::Policy;

use crate::artifacts::{Artifact, artifacts};
use crate::aws::{instance_types, offerings};
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

pub fn advise(
    req: &AdviceRequest,
    facts: &RawFacts,
    policy: &Policy,
) -> Result<Advice, InputError> {
    let request = req.validate(&policy.catalog)?;
    let facts = facts.parse()?;
    let recommendation = recommend(&request, &policy.catalog, &facts)?;
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
pub const DOCUMENT_KEYS: [&str; 3] = ["offerings", "instanceTypes", "clusterNodes"];

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
    };
    Ok((request_from_value(body)?, facts))
}
