//! `aws ec2 describe-capacity-reservations --output json`: the Capacity Blocks the
//! account already holds (`advise --existing-reservations FILE`), offered before
//! buying new ones. Only `ReservationType: capacity-block` entries that still hold or
//! will hold capacity (`active`, `scheduled`, `payment-pending`) count.
//! <https://docs.aws.amazon.com/cli/latest/reference/ec2/describe-capacity-reservations.html>

use jiff::Timestamp;
use serde_json::Value;

use super::{Entry, top_array};
use crate::error::{InputError, InputSource};
use crate::time::parse_instant;

/// One Capacity Block the account holds.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldBlock {
    pub id: String,
    pub instance_type: String,
    pub availability_zone: String,
    pub instance_count: u32,
    pub start: Timestamp,
    pub end: Timestamp,
    pub state: String,
}

const KEY: &str = "CapacityReservations";
const HOLDING: [&str; 3] = ["active", "scheduled", "payment-pending"];

pub fn parse_reservations(text: &str) -> Result<Vec<HeldBlock>, InputError> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| InputError::new(InputSource::Reservations, "$", format!("not JSON: {e}")))?;
    let mut out = Vec::new();
    for (i, v) in top_array(&doc, KEY, InputSource::Reservations)?
        .iter()
        .enumerate()
    {
        let e = Entry::new(v, KEY, i, InputSource::Reservations)?;
        // Plain ODCRs have no end to plan against; ended or failed blocks hold nothing.
        if e.opt("ReservationType").and_then(Value::as_str) != Some("capacity-block") {
            continue;
        }
        let state = e.str("State")?;
        if !HOLDING.contains(&state) {
            continue;
        }
        let time = |field: &str| -> Result<Timestamp, InputError> {
            parse_instant(e.str(field)?).map_err(|m| e.err(field, m))
        };
        let start = time("StartDate")?;
        let end = time("EndDate")?;
        if end <= start {
            return Err(e.err("EndDate", "is not after StartDate"));
        }
        out.push(HeldBlock {
            id: e.str("CapacityReservationId")?.to_string(),
            instance_type: e.str("InstanceType")?.to_string(),
            availability_zone: e.str("AvailabilityZone")?.to_string(),
            instance_count: e.u32("TotalInstanceCount")?,
            start,
            end,
            state: state.to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_capacity_blocks_that_hold_capacity_are_read() {
        let text = r#"{"CapacityReservations":[
            {"CapacityReservationId":"cr-1","InstanceType":"p5.48xlarge","AvailabilityZone":"us-east-1a","TotalInstanceCount":8,
             "State":"scheduled","StartDate":"2026-12-01T11:30:00+00:00","EndDate":"2026-12-08T11:30:00+00:00","ReservationType":"capacity-block"},
            {"CapacityReservationId":"cr-2","InstanceType":"p5.48xlarge","AvailabilityZone":"us-east-1a","TotalInstanceCount":8,
             "State":"expired","StartDate":"2026-11-01T11:30:00+00:00","EndDate":"2026-11-08T11:30:00+00:00","ReservationType":"capacity-block"},
            {"CapacityReservationId":"cr-3","InstanceType":"p5.48xlarge","AvailabilityZone":"us-east-1a","TotalInstanceCount":8,
             "State":"active","ReservationType":"default"}]}"#;
        let held = parse_reservations(text).unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].id, "cr-1");
        assert_eq!(held[0].instance_count, 8);
        let err = parse_reservations(&text.replace("\"TotalInstanceCount\":8,", "")).unwrap_err();
        assert_eq!(err.field, "CapacityReservations[0].TotalInstanceCount");
        let err = parse_reservations("{\"CapacityBlockOfferings\": []}").unwrap_err();
        assert_eq!(err.field, "CapacityReservations");
    }
}
