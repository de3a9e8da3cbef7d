//! The `describe-capacity-block-offerings` queries of `aws-cli.sh`: by instance type and
//! count, or by UltraServer type and count for P6e-GB200, in the request's window.

use crate::capacity::{BlockPlan, block_sizes};
use crate::recommend::Recommendation;

/// The offerings file the script writes when it has to stop for a choice.
pub const OFFERINGS_FILE: &str = "offerings.json";

/// The offerings to list: the chosen blocks' sizes (a plan with blocks), or, while none
/// is chosen, the job's block sizes and smaller counts into `offerings.json`.
pub fn list_offerings(
    rec: &Recommendation,
    block_hours: u32,
    blocks: Option<&BlockPlan>,
    held: bool,
    out: &mut Vec<String>,
) {
    let counts: Vec<u32> = match blocks {
        // Held blocks: nothing to list or buy.
        Some(_) if held => Vec::new(),
        Some(plan) => plan.offerings.iter().map(|o| o.instance_count).collect(),
        // Smaller counts too, so blocks of one AZ that together cover the ask are
        // listed for the chooser to combine.
        None => crate::capacity::fallbacks::listing_counts(
            &block_sizes(rec.shape.nodes).unwrap_or_default(),
        ),
    };
    if !held {
        out.push("# {STEP} Capacity Block offerings for this shape (the advisor picks with --offerings FILE).".into());
    }
    let mut seen = Vec::new();
    let listing = blocks.is_none();
    // Listing: one JSON document, an array of the answers (one per block size), written
    // to a temporary file and moved into place whole, so jq or `--offerings` never reads
    // a half-written file.
    let tmp = format!("{OFFERINGS_FILE}.tmp");
    if listing {
        out.push(format!("rm -f {OFFERINGS_FILE}"));
        out.push(format!("printf '[' > {tmp}"));
    }
    for n in counts {
        // Smaller UltraServers are separate NVLink domains: the job's pods keep to one
        // (nvidia.com/gpu.clique), so only the UltraServer that holds it is listed.
        if ultraserver(rec, n).is_some() && n < rec.shape.nodes {
            continue;
        }
        let what = offering_query(rec, n, block_hours);
        if seen.contains(&what) {
            continue;
        }
        if listing && !seen.is_empty() {
            out.push(format!("printf ',' >> {tmp}"));
        }
        seen.push(what.clone());
        let to_file = if listing {
            format!(" >> {tmp}")
        } else {
            String::new()
        };
        out.push(format!(
            "aws ec2 describe-capacity-block-offerings --region \"$REGION\" {what} --output json{to_file}"
        ));
    }
    if listing {
        out.push(format!("printf ']\\n' >> {tmp}"));
        // Not one offering for any size: the region sells no Capacity Blocks of the type
        // (AWS lists where each type is sold) or none in this window. Say so, rather than
        // leave an empty file and a rerun that cannot choose.
        out.push(format!(
            "if ! grep -q CapacityBlockOfferingId {tmp}; then rm -f {tmp}; echo \"no Capacity Block offerings of {} in $REGION{}: Capacity Blocks of this type may not be sold in this region (supported types and Regions: {SUPPORTED_URL}), or none is for sale in this window. Try another --region, --start/--end, or --capacity on-demand.\" >&2; exit 1; fi",
            rec.instance.name,
            window_text(rec)
        ));
        out.push(format!("mv {tmp} {OFFERINGS_FILE}"));
    }
}

/// AWS's list of the instance types and Regions Capacity Blocks are sold in.
pub const SUPPORTED_URL: &str =
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html";

/// ` between START and END` (either end when given) for the no-offerings message.
fn window_text(rec: &Recommendation) -> String {
    let req = &rec.request;
    match (req.earliest_start, req.latest_end) {
        (Some(s), Some(e)) => format!(" between {s} and {e}"),
        (Some(s), None) => format!(" from {s}"),
        (None, Some(e)) => format!(" until {e}"),
        (None, None) => String::new(),
    }
}

/// The arguments of a `describe-capacity-block-offerings` query for blocks of `nodes`
/// instances: by UltraServer for P6e-GB200, else by instance type and count; the request's
/// window; and `--all-availability-zones`, without which the answer holds only the zones
/// the account has opted in to, so a fresh account never sees the Local Zone offerings
/// GB200 is sold in
/// (<https://docs.aws.amazon.com/cli/latest/reference/ec2/describe-capacity-block-offerings.html>).
pub fn offering_query(rec: &Recommendation, nodes: u32, block_hours: u32) -> String {
    let t = &rec.instance.name;
    let what = match ultraserver(rec, nodes) {
        Some((kind, count)) => format!("--ultraserver-type {kind} --ultraserver-count {count}"),
        None => format!("--instance-type {t} --instance-count {nodes}"),
    };
    format!(
        "{what} --capacity-duration-hours {block_hours}{} --all-availability-zones",
        date_range(rec)
    )
}

/// P6e-GB200 is sold as UltraServer Capacity Blocks of 18 (`u-p6e-gb200x72`) or 9
/// (`u-p6e-gb200x36`) instances, not by the instance
/// (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html;
/// the types: the AWS SDK changelog of 2025-07-09, "Customers can now purchase
/// u-p6e-gb200x72 and u-p6e-gb200x36 UltraServers"): the UltraServer type and count that
/// hold `nodes` instances, for an instance type whose NVLink domain spans 18 instances.
fn ultraserver(rec: &Recommendation, nodes: u32) -> Option<(&'static str, u32)> {
    if rec.instance.nvlink_domain_instances != Some(18)
        || !rec.instance.name.starts_with("p6e-gb200")
    {
        return None;
    }
    Some(if nodes <= 9 {
        ("u-p6e-gb200x36", 1)
    } else {
        ("u-p6e-gb200x72", nodes.div_ceil(18))
    })
}

/// `--start-date-range/--end-date-range` from the request window.
fn date_range(rec: &Recommendation) -> String {
    let req = &rec.request;
    let mut s = String::new();
    if let Some(start) = req.earliest_start {
        s.push_str(&format!(" --start-date-range {start}"));
    }
    if let Some(end) = req.latest_end {
        s.push_str(&format!(" --end-date-range {end}"));
    }
    s
}
