//! Capacity Blocks the cluster's GPU nodes belong to, and when they end. Read from what
//! the platform already has: Karpenter's EC2NodeClass `status.capacityReservations[]`
//! (`kubectl get ec2nodeclasses -o json`) and the aws CLI's
//! `aws ec2 describe-capacity-reservations --output json` (for EKS managed node groups,
//! whose nodes say only `eks.amazonaws.com/capacityType: CAPACITY_BLOCK`).
//!
//! AWS timings: 40 minutes before a block ends EC2 sends an EventBridge warning that its
//! instances begin to terminate 10 minutes later, i.e. 30 minutes before the end
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html>);
//! EKS suggests scaling node groups to zero more than 30 minutes before the end
//! (<https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html>).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::read::json::{items, str_at};

/// EC2 begins reclaiming a block's instances this long before its end time.
pub const RECLAIM_BEFORE_END: SignedDuration = SignedDuration::from_mins(30);

/// One Capacity Block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub end: Timestamp,
    /// `active`, or `expiring` once EC2's reclaim window has begun (Karpenter's word).
    pub state: String,
}

impl Reservation {
    /// When EC2 starts terminating its instances.
    pub fn reclaim_at(&self) -> Timestamp {
        self.before_end(RECLAIM_BEFORE_END)
    }

    /// `lead` before the end; an end near the clock's first instant (a hand-edited
    /// file) cannot go earlier, so it stays at the end instead of overflowing.
    pub fn before_end(&self, lead: SignedDuration) -> Timestamp {
        self.end.checked_sub(lead).unwrap_or(self.end)
    }

    pub fn expiring(&self) -> bool {
        self.state == "expiring"
    }
}

/// Capacity Blocks by id.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    by_id: BTreeMap<String, Reservation>,
}

impl Reservations {
    /// Blocks from a `kubectl get ec2nodeclasses -o json` list (or one EC2NodeClass).
    pub fn add_ec2nodeclasses(&mut self, list: &Value) {
        let classes: Vec<&Value> = match list.get("items") {
            Some(_) => items(list, &["items"]).iter().collect(),
            None => vec![list],
        };
        for class in classes {
            for r in items(class, &["status", "capacityReservations"]) {
                if str_at(r, &["reservationType"]) != Some("capacity-block") {
                    continue;
                }
                self.insert(
                    str_at(r, &["id"]),
                    str_at(r, &["instanceType"]),
                    str_at(r, &["availabilityZone"]),
                    str_at(r, &["endTime"]),
                    str_at(r, &["state"]).unwrap_or("active"),
                );
            }
        }
    }

    /// Blocks from `aws ec2 describe-capacity-reservations --output json`.
    pub fn add_describe_output(&mut self, output: &Value) {
        for r in items(output, &["CapacityReservations"]) {
            if str_at(r, &["ReservationType"]) != Some("capacity-block") {
                continue;
            }
            let state = match str_at(r, &["State"]) {
                Some("active") => "active",
                // scheduled/payment-pending blocks hold no nodes yet; ended ones none.
                _ => continue,
            };
            self.insert(
                str_at(r, &["CapacityReservationId"]),
                str_at(r, &["InstanceType"]),
                str_at(r, &["AvailabilityZone"]),
                str_at(r, &["EndDate"]),
                state,
            );
        }
    }

    fn insert(
        &mut self,
        id: Option<&str>,
        instance_type: Option<&str>,
        zone: Option<&str>,
        end: Option<&str>,
        state: &str,
    ) {
        let (Some(id), Some(end)) = (id, end.and_then(|e| e.parse::<Timestamp>().ok())) else {
            return;
        };
        self.by_id.insert(
            id.to_string(),
            Reservation {
                id: id.to_string(),
                instance_type: instance_type.unwrap_or("").to_string(),
                zone: zone.unwrap_or("").to_string(),
                end,
                state: state.to_string(),
            },
        );
    }

    /// Add the blocks of another source (the server's describe-capacity-reservations
    /// file on top of the watched EC2NodeClasses). A block Karpenter already calls
    /// `expiring` stays so: EC2's describe output still says `active` then.
    pub fn extend(&mut self, other: &Reservations) {
        for r in other.iter() {
            match self.by_id.get(&r.id) {
                Some(have) if have.expiring() => {}
                _ => {
                    self.by_id.insert(r.id.clone(), r.clone());
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn get(&self, id: &str) -> Option<&Reservation> {
        self.by_id.get(id)
    }

    /// The block of an instance type (in a zone, when given) that ends first.
    pub fn first_ending(&self, instance_type: &str, zone: Option<&str>) -> Option<&Reservation> {
        self.by_id
            .values()
            .filter(|r| r.instance_type == instance_type && zone.is_none_or(|z| r.zone == z))
            .min_by_key(|r| r.end)
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Reservation> {
        self.by_id.values()
    }
}

#[cfg(test)]
mod edge_tests {
    use super::*;
    use serde_json::json;

    /// A hand-edited end date at the clock's first representable instant neither
    /// overflows nor moves earlier.
    #[test]
    fn an_end_at_the_first_instant_does_not_overflow() {
        let mut r = Reservations::default();
        r.add_describe_output(&json!({"CapacityReservations": [
            {"CapacityReservationId": "cr-min", "InstanceType": "p5.48xlarge",
             "AvailabilityZone": "us-east-1a", "State": "active",
             "ReservationType": "capacity-block", "EndDate": "-009999-01-02T02:00:00Z"}
        ]}));
        let block = r.get("cr-min").expect("parsed");
        assert_eq!(block.reclaim_at(), block.end);
        assert_eq!(block.before_end(SignedDuration::from_mins(40)), block.end);
    }
}
