//! `aws ec2 describe-instance-types` output: which types the region offers and what
//! AWS says they have, to cross-check the catalog.

use serde::Serialize;
use serde_json::Value;
use trainplace_catalog::InstanceProfile;

use super::{Entry, top_array};
use crate::error::{InputError, InputSource};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsInstanceType {
    pub name: String,
    /// GPUs (`GpuInfo.Gpus[].Count`) or Neuron devices (`NeuronInfo.NeuronDevices[].Count`).
    pub accelerators: Option<u32>,
    pub max_efa: u32,
}

const KEY: &str = "InstanceTypes";

pub fn parse_instance_types(text: &str) -> Result<Vec<AwsInstanceType>, InputError> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| InputError::new(InputSource::InstanceTypes, "$", format!("not JSON: {e}")))?;
    top_array(&doc, KEY, InputSource::InstanceTypes)?
        .iter()
        .enumerate()
        .map(|(i, v)| one(&Entry::new(v, KEY, i, InputSource::InstanceTypes)?))
        .collect()
}

fn one(e: &Entry<'_>) -> Result<AwsInstanceType, InputError> {
    let name = e.str("InstanceType")?.to_string();
    let accelerators = match (e.child("GpuInfo"), e.child("NeuronInfo")) {
        (Some(gpu), _) => Some(sum_counts(&gpu, "Gpus")?),
        (None, Some(neuron)) => Some(sum_counts(&neuron, "NeuronDevices")?),
        (None, None) => None,
    };
    let net = e
        .child("NetworkInfo")
        .ok_or_else(|| e.err("NetworkInfo", "missing"))?;
    let efa_supported = match net.opt("EfaSupported") {
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(net.err("EfaSupported", "must be true or false")),
        None => false,
    };
    let max_efa = match (efa_supported, net.child("EfaInfo")) {
        (false, _) => 0,
        (true, Some(info)) => info.u32("MaximumEfaInterfaces")?,
        (true, None) => return Err(net.err("EfaInfo", "missing while EfaSupported is true")),
    };
    Ok(AwsInstanceType {
        name,
        accelerators,
        max_efa,
    })
}

fn sum_counts(e: &Entry<'_>, key: &str) -> Result<u32, InputError> {
    let Some(Value::Array(items)) = e.opt(key) else {
        return Err(e.err(key, "must be an array"));
    };
    items.iter().enumerate().try_fold(0u32, |acc, (i, item)| {
        let entry = Entry {
            value: item,
            path: format!("{}.{key}[{i}]", e.path),
            source: e.source,
        };
        Ok(acc + entry.u32("Count")?)
    })
}

/// Where AWS disagrees with the catalog, in words; empty when they agree.
pub fn disagreements(aws: &AwsInstanceType, profile: &InstanceProfile) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = aws.accelerators
        && n != profile.accelerators
    {
        out.push(format!(
            "{}: aws reports {n} accelerators, the catalog {}",
            aws.name, profile.accelerators
        ));
    }
    if aws.max_efa != profile.max_efa {
        out.push(format!(
            "{}: aws reports MaximumEfaInterfaces {}, the catalog {}",
            aws.name, aws.max_efa, profile.max_efa
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainplace_catalog::Catalog;

    #[test]
    fn fixture_parses_and_agrees_with_catalog() {
        let text = include_str!("../../fixtures/instance-types.json");
        let types = parse_instance_types(text).unwrap();
        let catalog = Catalog::embedded();
        let p5 = types.iter().find(|t| t.name == "p5.48xlarge").unwrap();
        assert_eq!(p5.accelerators, Some(8));
        assert_eq!(p5.max_efa, 32);
        for t in &types {
            let profile = catalog.get(&t.name).unwrap();
            assert!(disagreements(t, profile).is_empty(), "{t:?}");
        }
    }

    #[test]
    fn missing_efa_count_is_named() {
        let text = r#"{"InstanceTypes":[{"InstanceType":"p5.48xlarge","NetworkInfo":{"EfaSupported":true}}]}"#;
        let err = parse_instance_types(text).unwrap_err();
        assert_eq!(err.field, "InstanceTypes[0].NetworkInfo.EfaInfo");
    }
}
