//! Buying the chosen Capacity Blocks in `aws-cli.sh`: nothing is bought unless every block
//! the plan needs can be bought, and nothing at all without the user's explicit word.
//!
//! 1. Blocks bought by an earlier run are found by their tags (`describe-capacity-reservations`:
//!    `purchase-capacity-block` takes no client token,
//!    <https://docs.aws.amazon.com/cli/latest/reference/ec2/purchase-capacity-block.html>), so
//!    a rerun never buys one twice.
//! 2. Every offering still to buy is read again (`describe-capacity-block-offerings`, with
//!    `--all-availability-zones` so Local Zone offerings are listed,
//!    <https://docs.aws.amazon.com/cli/latest/reference/ec2/describe-capacity-block-offerings.html>):
//!    when one is gone, the script stops before the first purchase. A bought block cannot
//!    be cancelled (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html>),
//!    so buying one block of two that then cannot be completed leaves paid nodes the job
//!    cannot use.
//! 3. The account's quotas the plan needs are checked (the caller puts those lines first).
//! 4. The script buys only when `CONFIRM_PURCHASE_USD` holds the plan's upfront fee, as
//!    printed: an exported yes cannot buy a plan of another size by accident.
//! 5. A purchase that answers no reservation id (`None`, or nothing) stops the script; when it
//!    stops for any reason after the first purchase, it says which blocks were bought and
//!    which were not.
//!
//! There is a gap between the read and the purchase, and a block can sell in it: the
//! read narrows that window to seconds, it does not close it. The docs say so.

use crate::capacity::BlockPlan;
use crate::recommend::Recommendation;

use super::eksctl::reservation_placeholder;
use super::offering_queries::offering_query;
use super::reservation_tag::{RESERVATION_TAG, reservation_tag_value};

/// States of a bought Capacity Block that still holds, or will hold, its capacity
/// (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-view.html>):
/// a block in one of them is not bought again; `payment-failed` and `expired` are.
pub const LIVE_BLOCK_STATES: &str = "payment-pending,scheduled,active";

/// Tag naming which of the plan's blocks (1-based, as the nodegroup `-cbN`) a bought
/// Capacity Block is.
pub const BLOCK_TAG: &str = "trainplace.io/block";

/// The variable that must hold the plan's upfront fee (`%.2f`) for the script to buy.
pub const CONFIRM_VAR: &str = "CONFIRM_PURCHASE_USD";

/// The plan's upfront fee as `CONFIRM_PURCHASE_USD` must spell it.
pub fn fee_text(plan: &BlockPlan) -> String {
    format!("{:.2}", plan.total_fee_usd)
}

/// Lines that find the blocks an earlier run bought: `CR_i` holds each one's id, or is
/// empty / `None`.
pub fn bought_lines(rec: &Recommendation, plan: &BlockPlan, out: &mut Vec<String>) {
    let plan_tag = reservation_tag_value(rec);
    out.push(format!(
        "# {{STEP}} Blocks an earlier run of this plan bought (tag {RESERVATION_TAG}={plan_tag}, state {LIVE_BLOCK_STATES}): reused, never bought twice."
    ));
    for (i, o) in plan.offerings.iter().enumerate() {
        let slot = i + 1;
        let query = format!(
            "CapacityReservations[?Tags[?Key=='{RESERVATION_TAG}' && Value=='{plan_tag}'] && Tags[?Key=='{BLOCK_TAG}' && Value=='{slot}']].CapacityReservationId | [0]"
        );
        out.push(format!(
            "CR_{i}=$(aws ec2 describe-capacity-reservations --region \"$REGION\" --filters Name=instance-type,Values={} Name=availability-zone,Values={} Name=state,Values={LIVE_BLOCK_STATES} --query \"{query}\" --output text)",
            rec.instance.name, o.availability_zone
        ));
        out.push(format!("if [ \"$CR_{i}\" = None ]; then CR_{i}=; fi"));
    }
    out.push(String::new());
}

/// Lines that read every offering still to buy again and stop, before any purchase, when
/// one is no longer sold.
pub fn recheck_lines(rec: &Recommendation, plan: &BlockPlan, out: &mut Vec<String>) {
    out.push(format!(
        "# {{STEP}} Read every offering still to buy again: buy none unless all {} are still for sale.",
        plan.offerings.len()
    ));
    out.push("GONE=".into());
    for (i, o) in plan.offerings.iter().enumerate() {
        let slot = i + 1;
        // Queried as sold: its count (or UltraServer) and its own length.
        let what = offering_query(rec, o.instance_count, o.duration_hours);
        out.push(format!(
            "if [ -z \"$CR_{i}\" ] && [ \"$(aws ec2 describe-capacity-block-offerings --region \"$REGION\" {what} --query \"length(CapacityBlockOfferings[?CapacityBlockOfferingId=='{id}'])\" --output text)\" != 1 ]; then GONE=\"$GONE block {slot} ({id})\"; fi",
            id = o.id
        ));
    }
    out.push(format!(
        "if [ -n \"$GONE\" ]; then echo \"no longer for sale:$GONE. Nothing was bought by this run; {}: list the offerings again and choose anew (trainplace advise ... --offerings)\" >&2; exit 1; fi",
        already_bought_text(plan)
    ));
    out.push(String::new());
}

/// Shell text (inside double quotes) naming the blocks an earlier run bought.
fn already_bought_text(plan: &BlockPlan) -> String {
    let parts: Vec<String> = (0..plan.offerings.len())
        .map(|i| format!("${{CR_{i}:-none}}"))
        .collect();
    format!("bought before this run: {}", parts.join(" "))
}

/// The confirmation gate, then each purchase: tagged, its id checked, written into
/// eksctl-cluster.yaml; a stop after the first purchase says what was and was not bought.
pub fn buy_lines(rec: &Recommendation, plan: &BlockPlan, out: &mut Vec<String>) {
    let plan_tag = reservation_tag_value(rec);
    let fee = fee_text(plan);
    let n = plan.offerings.len();
    let empties: Vec<String> = (0..n).map(|i| format!("[ -z \"$CR_{i}\" ]")).collect();
    out.push(format!(
        "# {{STEP}} Buy the chosen block(s) in {} (upfront ${fee}, non-refundable), tagged for Karpenter; only with {CONFIRM_VAR}={fee}.",
        plan.availability_zone
    ));
    out.push(format!(
        "if {{ {}; }} && [ \"${{{CONFIRM_VAR}:-}}\" != {fee} ]; then echo 'Capacity Blocks cannot be cancelled or refunded once bought. To buy this plan'\"'\"'s {n} block(s) for USD {fee} upfront, run again with {CONFIRM_VAR}={fee}' >&2; exit 1; fi",
        empties.join(" || ")
    ));
    out.push("BOUGHT=".into());
    out.push(format!(
        "LEFT=\"{}\"",
        (1..=n).map(|s| s.to_string()).collect::<Vec<_>>().join(" ")
    ));
    out.push("trap 'if [ -n \"$LEFT\" ]; then echo \"stopped: blocks bought:${BOUGHT:- none}; blocks not bought: $LEFT\" >&2; fi' EXIT".into());
    for (i, o) in plan.offerings.iter().enumerate() {
        let slot = i + 1;
        let var = format!("CR_{i}");
        let tags = format!(
            "ResourceType=capacity-reservation,Tags=[{{Key={RESERVATION_TAG},Value={plan_tag}}},{{Key={BLOCK_TAG},Value={slot}}},{{Key=trainplace.io/offering,Value={}}}]",
            o.id
        );
        out.push(format!(
            "if [ -z \"${var}\" ]; then {var}=$(aws ec2 purchase-capacity-block --region \"$REGION\" --capacity-block-offering-id {} --instance-platform Linux/UNIX --tag-specifications '{tags}' --query CapacityReservation.CapacityReservationId --output text); if [ -z \"${var}\" ] || [ \"${var}\" = None ]; then echo 'the purchase of block {slot} ({}) answered no reservation id: check the account (describe-capacity-reservations) before running again' >&2; exit 1; fi; else echo \"block {slot} of this plan is already bought: ${var}\"; fi",
            o.id, o.id
        ));
        out.push(format!(
            "BOUGHT=\"$BOUGHT {slot}:${var}\"; LEFT=\"${{LEFT#{slot}}}\"; LEFT=\"${{LEFT# }}\""
        ));
        // Portable (no `sed -i`): BSD and GNU sed differ there. A no-op once replaced.
        out.push(format!(
            "sed \"s/{}/${var}/\" eksctl-cluster.yaml > eksctl-cluster.yaml.new && mv eksctl-cluster.yaml.new eksctl-cluster.yaml",
            reservation_placeholder(&o.id)
        ));
    }
    out.push("trap - EXIT".into());
}
