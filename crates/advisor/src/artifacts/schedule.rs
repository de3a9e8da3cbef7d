//! Scheduled scale-out and scale-in of the Capacity Block nodegroups: at the block's
//! start each nodegroup goes to its share of the job's nodes, at the plan's checkpoint
//! deadline (the block's end less its end margin, `BlockPlan::checkpoint_by`) to 0, so
//! the nodes drain before EC2 reclaims them and no node is asked for outside the block.
//! EKS suggests scheduled scaling to zero more than 30 minutes before a block ends
//! (<https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html>).
//!
//! One-time scheduled actions on each nodegroup's Auto Scaling group
//! (`put-scheduled-update-group-action` with `--start-time` only,
//! <https://docs.aws.amazon.com/cli/latest/reference/autoscaling/put-scheduled-update-group-action.html>):
//! they need no IAM role of their own, unlike an EventBridge Scheduler target. Each
//! action's name carries its time, and the script looks for it first
//! (`describe-scheduled-actions`): a rerun adds nothing, a new plan adds its own. A
//! time already past is skipped: Auto Scaling refuses a start time in the past
//! (<https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_PutScheduledUpdateGroupAction.html>).
//! EKS puts its own scale-to-0 action on a managed nodegroup 40 minutes before its
//! block ends (docs/capacity-blocks.md cites the EKS pages); ours carries the plan's
//! margin, never shorter than that, beside the scale-out at the start.
//!
//! A self-managed nodegroup (the GB200 Local Zone route, `local_zone.rs`) is created
//! empty (desired 0) and filled by the scale-out at the block's start, or, when set-up
//! runs while the block is active, by the script itself (`update-auto-scaling-group`).
//! It gets no action from EKS, so ours is its only scale-in, at the plan's margin (60 minutes for an
//! UltraServer block). Its Auto Scaling group is not an EKS nodegroup's: eksctl makes it
//! as the `NodeGroup` resource (`AWS::AutoScaling::AutoScalingGroup`) of the CloudFormation
//! stack `eksctl-CLUSTER-nodegroup-NAME`, and finds it again by that stack resource's
//! physical id (`makeNodeGroupStackName` and `GetUnmanagedNodeGroupAutoScalingGroupName`
//! in <https://github.com/eksctl-io/eksctl/blob/main/pkg/cfn/manager/nodegroup.go>,
//! `n.newResource("NodeGroup", asg)` in
//! <https://github.com/eksctl-io/eksctl/blob/main/pkg/cfn/builder/nodegroup.go>); the
//! script asks the same (`aws cloudformation describe-stack-resource`).

use crate::capacity::BlockPlan;
use crate::recommend::{CapacityPlan, Recommendation};

/// A nodegroup of the job on a Capacity Block (`eksctl-cluster.yaml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockNodegroup {
    pub name: String,
    pub size: u64,
    /// A `managedNodeGroups` entry (EKS knows its Auto Scaling group), else a
    /// self-managed `nodeGroups` one (its eksctl CloudFormation stack does).
    pub managed: bool,
}

/// Every Capacity Block nodegroup of the job, managed and self-managed.
pub fn block_nodegroups(rec: &Recommendation) -> Vec<BlockNodegroup> {
    let config = super::eksctl::cluster_config(rec);
    [("managedNodeGroups", true), ("nodeGroups", false)]
        .into_iter()
        .flat_map(|(key, managed)| {
            config[key]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|ng| ng["instanceMarketOptions"]["marketType"] == "capacity-block")
                .filter_map(move |ng| {
                    Some(BlockNodegroup {
                        name: ng["name"].as_str()?.to_string(),
                        size: ng["maxSize"].as_u64()?,
                        managed,
                    })
                })
        })
        .collect()
}

/// The shell line setting `ASG` to the nodegroup's Auto Scaling group.
pub fn asg_lookup(cluster: &str, ng: &BlockNodegroup) -> String {
    let name = &ng.name;
    if ng.managed {
        format!(
            "ASG=$(aws eks describe-nodegroup --region \"$REGION\" --cluster-name {cluster} --nodegroup-name {name} --query 'nodegroup.resources.autoScalingGroups[0].name' --output text)"
        )
    } else {
        format!(
            "ASG=$(aws cloudformation describe-stack-resource --region \"$REGION\" --stack-name eksctl-{cluster}-nodegroup-{name} --logical-resource-id NodeGroup --query 'StackResourceDetail.PhysicalResourceId' --output text)"
        )
    }
}

/// The scheduled action's name: what it does and when (epoch seconds).
pub fn action_name(what: &str, at: jiff::Timestamp) -> String {
    format!("trainplace-{what}-{}", at.as_second())
}

/// Shell lines (set-up stage, after the nodegroups exist) putting the two actions on
/// every Capacity Block nodegroup of a chosen plan.
pub fn scale_lines(rec: &Recommendation, out: &mut Vec<String>) {
    let CapacityPlan::CapacityBlock {
        blocks: Some(plan), ..
    } = &rec.capacity
    else {
        return;
    };
    let groups = block_nodegroups(rec);
    if groups.is_empty() {
        return;
    }
    out.push(String::new());
    out.push(format!(
        "# {{STEP}} Scheduled scaling of the block nodegroups: to the job's size at the block's start ({}), to 0 at the checkpoint deadline ({}, the end less {} minutes). Each action is looked for first; past times are skipped.",
        plan.start,
        plan.checkpoint_by,
        (plan.end.as_second() - plan.checkpoint_by.as_second()) / 60
    ));
    let cluster = &rec.request.names.cluster;
    for ng in groups {
        out.push(asg_lookup(cluster, &ng));
        out.push(format!(
            "if [ -z \"$ASG\" ] || [ \"$ASG\" = None ]; then echo 'no Auto Scaling group found for nodegroup {}' >&2; exit 1; fi",
            ng.name
        ));
        for (what, at, desired) in actions(plan, ng.size) {
            out.push(put_once(&ng.name, what, at, desired, ng.size));
        }
        if !ng.managed {
            // A self-managed group starts empty (`local_zone.rs`): set up while the block
            // is active, its scale-out time has passed, so the script sets the size.
            out.push(format!(
                "if [ \"$(date -u +%s)\" -ge {} ] && [ \"$(date -u +%s)\" -lt {} ]; then aws autoscaling update-auto-scaling-group --region \"$REGION\" --auto-scaling-group-name \"$ASG\" --min-size 0 --max-size {size} --desired-capacity {size}; fi",
                plan.start.as_second(),
                plan.checkpoint_by.as_second(),
                size = ng.size
            ));
        }
    }
}

fn actions(plan: &BlockPlan, size: u64) -> [(&'static str, jiff::Timestamp, u64); 2] {
    [
        ("scale-out", plan.start, size),
        ("scale-in", plan.checkpoint_by, 0),
    ]
}

/// One action, put only when its time is ahead and no action of its name exists.
fn put_once(ng: &str, what: &str, at: jiff::Timestamp, desired: u64, max: u64) -> String {
    let name = action_name(what, at);
    let when = at.strftime("%Y-%m-%dT%H:%M:%SZ");
    format!(
        "if [ \"$(date -u +%s)\" -ge {} ]; then echo '{ng}: {what} time {when} has passed'; elif [ \"$(aws autoscaling describe-scheduled-actions --region \"$REGION\" --auto-scaling-group-name \"$ASG\" --scheduled-action-names {name} --query 'length(ScheduledUpdateGroupActions)' --output text)\" = 1 ]; then echo '{ng}: {name} exists'; else aws autoscaling put-scheduled-update-group-action --region \"$REGION\" --auto-scaling-group-name \"$ASG\" --scheduled-action-name {name} --start-time {when} --min-size 0 --max-size {max} --desired-capacity {desired}; fi",
        at.as_second()
    )
}
