//! `aws ec2 describe-capacity-block-offerings` output.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use super::{Entry, top_array};
use crate::error::{InputError, InputSource};
use crate::time::parse_instant;

/// One Capacity Block offering, as sold.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Offering {
    pub id: String,
    pub instance_type: String,
    pub availability_zone: String,
    pub instance_count: u32,
    pub start: Timestamp,
    pub end: Timestamp,
    pub duration_hours: u32,
    /// Parsed from the CLI's string `UpfrontFee`.
    pub upfront_fee: f64,
    pub currency: String,
    /// A block the account already holds (`--existing-reservations`): `id` is its
    /// reservation id, there is nothing to buy and no fee to pay.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

impl Offering {
    /// The fee in cents, for exact comparisons and ties.
    pub fn fee_cents(&self) -> u64 {
        (self.upfront_fee * 100.0).round() as u64
    }
}

const KEY: &str = "CapacityBlockOfferings";

/// Parse the CLI's JSON text: one answer; an array of answers (the `offerings.json`
/// `aws-cli.sh` writes, one answer per block size, a single JSON document); or several
/// answers one after another (what earlier versions of the script appended).
pub fn parse_offerings(text: &str) -> Result<Vec<Offering>, InputError> {
    let mut out = Vec::new();
    let mut docs = 0;
    for doc in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let doc = doc
            .map_err(|e| InputError::new(InputSource::Offerings, "$", format!("not JSON: {e}")))?;
        match doc.as_array() {
            Some(answers) => {
                for (i, answer) in answers.iter().enumerate() {
                    out.extend(from_value(answer).map_err(|mut e| {
                        e.field = format!("[{i}].{}", e.field);
                        e
                    })?);
                }
            }
            None => out.extend(from_value(&doc)?),
        }
        docs += 1;
    }
    if docs == 0 {
        return Err(InputError::new(
            InputSource::Offerings,
            "$",
            "not JSON: empty",
        ));
    }
    Ok(out)
}

pub fn from_value(doc: &Value) -> Result<Vec<Offering>, InputError> {
    top_array(doc, KEY, InputSource::Offerings)?
        .iter()
        .enumerate()
        .map(|(i, v)| one(&Entry::new(v, KEY, i, InputSource::Offerings)?))
        .collect()
}

fn one(e: &Entry<'_>) -> Result<Offering, InputError> {
    let time = |field: &str| -> Result<Timestamp, InputError> {
        parse_instant(e.str(field)?).map_err(|m| e.err(field, m))
    };
    // Fields in the CLI's own order, so the first problem reported is the first one seen.
    let id = e.str("CapacityBlockOfferingId")?.to_string();
    let instance_type = e.str("InstanceType")?.to_string();
    let availability_zone = e.str("AvailabilityZone")?.to_string();
    let instance_count = e.u32("InstanceCount")?;
    if instance_count == 0 {
        return Err(e.err("InstanceCount", "must be at least 1"));
    }
    let start = time("StartDate")?;
    let end = time("EndDate")?;
    if end <= start {
        return Err(e.err("EndDate", "is not after StartDate"));
    }
    let duration_hours = e.u32("CapacityBlockDurationHours")?;
    let fee_text = e.str("UpfrontFee")?;
    let upfront_fee: f64 = fee_text
        .parse()
        .ok()
        .filter(|f: &f64| f.is_finite() && *f >= 0.0)
        .ok_or_else(|| e.err("UpfrontFee", format!("{fee_text:?} is not an amount")))?;
    Ok(Offering {
        id,
        instance_type,
        availability_zone,
        instance_count,
        start,
        end,
        duration_hours,
        upfront_fee,
        currency: e.str("CurrencyCode")?.to_string(),
        held: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_parses() {
        let text = include_str!("../../fixtures/capacity-block-offerings.json");
        let offers = parse_offerings(text).unwrap();
        assert!(offers.len() >= 6);
        assert!(offers.iter().all(|o| o.currency == "USD"));
    }

    #[test]
    fn malformed_offering_names_index_and_field() {
        let text = r#"{"CapacityBlockOfferings":[
            {"CapacityBlockOfferingId":"cb-1","InstanceType":"p5.48xlarge","AvailabilityZone":"us-east-1a",
             "InstanceCount":2,"StartDate":"2026-12-01T11:30:00+00:00","EndDate":"2026-12-02T11:30:00+00:00",
             "CapacityBlockDurationHours":24,"UpfrontFee":"2641.92","CurrencyCode":"USD","Tenancy":"default"},
            {"CapacityBlockOfferingId":"cb-2","InstanceType":"p5.48xlarge","AvailabilityZone":"us-east-1a",
             "InstanceCount":2,"StartDate":"2026-12-01T11:30:00+00:00","EndDate":"2026-12-02T11:30:00+00:00",
             "CapacityBlockDurationHours":24,"UpfrontFee":"lots","CurrencyCode":"USD","Tenancy":"default"}]}"#;
        let err = parse_offerings(text).unwrap_err();
        assert_eq!(err.field, "CapacityBlockOfferings[1].UpfrontFee");
        let err = parse_offerings(&text.replace("\"InstanceCount\":2,", "")).unwrap_err();
        assert_eq!(err.field, "CapacityBlockOfferings[0].InstanceCount");
        assert_eq!(err.message, "missing");
        let err = parse_offerings("{\"Offerings\":[]}").unwrap_err();
        assert_eq!(err.field, "CapacityBlockOfferings");
        let err = parse_offerings("[").unwrap_err();
        assert_eq!(err.field, "$");
    }
}
