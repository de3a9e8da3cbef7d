//! The topology reads in `aws-cli.sh`: how far apart the plan's capacity sits in the EC2
//! network (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology.html>),
//! only for the types EC2 describes (`trainplace_catalog::topology`).
//!
//! - At set-up, once the reservation ids are known (blocks held or just bought, an
//!   On-Demand Capacity Reservation): `describe-capacity-reservation-topology`
//!   (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservationTopology.html>),
//!   which answers for reservations that are pending or active, before any instance runs.
//! - In the run stage: `describe-instance-topology`
//!   (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTopology.html>)
//!   for the instances behind the cluster's nodes of the plan's type and zone (their
//!   `spec.providerID`, `aws:///ZONE/INSTANCE-ID`), at most 100 ids a call as the API
//!   allows, saved as JSON for `trainplace diagnose --topology` (NVIDIA types: diagnose
//!   reads NCCL's logs, and Trainium's collectives are Neuron's).
//!
//! Each prints `topology:` lines (`topology_summary`, POSIX sh and awk, no jq): how many
//! network nodes of each layer the capacity spans and where the farthest two meet. The
//! reads only inform: a failed call is said and the script goes on.

use crate::recommend::Recommendation;
use crate::topology::{reads_instances, reads_reservations};

/// Where the run stage saves the instance topology (`describe-instance-topology --output json`).
pub const INSTANCE_TOPOLOGY_FILE: &str = "instance-topology.json";

/// The text query both reads use: `id`, then `second` (the state of a reservation, the
/// type of an instance), then the node set top-down, layers 1 to 4 (`None` where a layer
/// is absent).
fn text_query(list: &str, id: &str, second: &str) -> String {
    format!(
        "{list}[].[{id},{second},NetworkNodes[0],NetworkNodes[1],NetworkNodes[2],NetworkNodes[3]]"
    )
}

/// The `topology_summary` shell function, when the script reads any topology.
pub fn summary_function(rec: &Recommendation, out: &mut Vec<String>) {
    if !reads_instances(&rec.instance.name, rec.shape.nodes) {
        return;
    }
    out.extend(
        [
            "# topology_summary WHAT: reads `ID<TAB>STATE-OR-TYPE<TAB>layer 1<TAB>..<TAB>layer 4` lines (aws --output text, None where a layer is absent) and says how many network nodes of each layer they span and where the farthest two meet.",
            "topology_summary() {",
            "  awk -v what=\"$1\" '",
            "BEGIN { FS = \"\\t\" }",
            "$1 == \"\" { next }",
            "{ n++; deep = 0",
            "  for (l = 1; l <= 4; l++) { v = $(l + 2); if (v != \"\" && v != \"None\") { if (!((l, v) in seen)) { seen[l, v] = 1; count[l]++ } deep = l } }",
            "  if (deep == 0) { unknown = unknown \" \" $1 \" (\" $2 \")\"; next }",
            "  known++; if (deep > bottom) bottom = deep }",
            "END {",
            "  if (n == 0) { print \"topology: EC2 listed no \" what; exit }",
            "  if (known > 0) {",
            "    line = \"topology: \" known \" \" what \" under\"",
            "    for (l = 1; l <= bottom; l++) line = line (l > 1 ? \",\" : \"\") \" \" count[l] \" layer-\" l",
            "    print line \" network node(s)\"",
            "    meet = 0; for (l = 1; l <= bottom; l++) if (count[l] == 1) meet = l",
            "    if (meet == bottom) print \"topology: all under one layer-\" bottom \" network node: as close as EC2 describes\"",
            "    else if (meet == 0) print \"topology: the farthest two share no network node (\" count[1] \" layer-1 nodes)\"",
            "    else print \"topology: the farthest two meet at layer \" meet \": one layer-\" meet \" node above \" count[meet + 1] \" layer-\" (meet + 1) \" nodes\"",
            "  }",
            "  if (unknown != \"\") print \"topology: not known yet for\" unknown \": EC2 describes running instances, and reservations that are pending or active\"",
            "}'",
            "}",
        ]
        .map(String::from),
    );
}

/// The set-up step that reads the reservations' topology; `ids` are literal ids or
/// shell words (`$CR_0`).
pub fn reservation_lines(rec: &Recommendation, ids: &[String], out: &mut Vec<String>) {
    if ids.is_empty()
        || !reads_reservations(
            &rec.instance.name,
            &rec.request.region,
            rec.shape.nodes,
            &rec.capacity,
        )
    {
        return;
    }
    out.push(String::new());
    out.push("# {STEP} How far apart the reserved capacity is in the EC2 network, before any node launches (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology.html); EC2 answers once a reservation is pending or active. Read only: nothing stops on it.".into());
    out.push(format!(
        "if TOPO=$(aws ec2 describe-capacity-reservation-topology --region \"$REGION\" --capacity-reservation-ids {} --query '{}' --output text); then printf '%s\\n' \"$TOPO\" | topology_summary 'reservation(s)'; else echo 'topology: describe-capacity-reservation-topology failed (its error is above); nothing depends on it' >&2; fi",
        ids.join(" "),
        text_query("CapacityReservations", "CapacityReservationId", "State")
    ));
}

/// The run-stage step that reads the running nodes' topology.
pub fn instance_lines(rec: &Recommendation, out: &mut Vec<String>) {
    let t = &rec.instance.name;
    if !reads_instances(t, rec.shape.nodes) {
        return;
    }
    let zone = &rec.availability_zone;
    let call = "xargs -n 100 aws ec2 describe-instance-topology --region \"$REGION\"";
    let reader = if super::plugins::is_nvidia(rec) {
        " for `trainplace diagnose --topology`"
    } else {
        ""
    };
    out.push(format!(
        "# {{STEP}} How far apart the nodes are in the EC2 network (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology.html): the {t} nodes in {zone}, saved to {INSTANCE_TOPOLOGY_FILE}{reader}. Read only: nothing stops on it."
    ));
    out.push(format!(
        "IDS=$(kubectl get nodes -l node.kubernetes.io/instance-type={t},topology.kubernetes.io/zone={zone} -o jsonpath='{{range .items[*]}}{{.spec.providerID}}{{\"\\n\"}}{{end}}' | sed -n 's|^aws:///.*/\\(i-[0-9a-f]*\\)$|\\1|p')"
    ));
    out.push(format!(
        "if [ -z \"$IDS\" ]; then echo 'topology: no {t} node in {zone} yet: nothing to read'; elif printf '%s\\n' $IDS | {call} --output json --instance-ids > {INSTANCE_TOPOLOGY_FILE} && TOPO=$(printf '%s\\n' $IDS | {call} --query '{}' --output text --instance-ids); then printf '%s\\n' \"$TOPO\" | topology_summary 'instance(s)'; else echo 'topology: describe-instance-topology failed (its error is above); the job does not depend on it' >&2; fi",
        text_query("Instances", "InstanceId", "InstanceType")
    ));
    out.push(String::new());
}
