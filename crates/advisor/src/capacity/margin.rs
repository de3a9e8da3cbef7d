//! How long before a Capacity Block's end its nodes stop being the job's: the plan's
//! end margin, which sets its usable hours, its checkpoint deadline and the block-end
//! warning.
//!
//! - Instance Capacity Blocks: EC2 begins terminating instances 30 minutes before the
//!   end (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html>);
//!   EKS scales a managed nodegroup to 0 and EventBridge warns 40 minutes before
//!   (<https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html>,
//!   <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html>):
//!   40 minutes.
//! - P6e-GB200 UltraServer Capacity Blocks: sold only as UltraServer blocks, never
//!   on-demand (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html>),
//!   and their instances must be off 60 minutes before the end, not 30. The AWS page
//!   stating the 60 minutes was not found in the stored EC2 user guide; the figure is
//!   from a comparison of instance and UltraServer blocks
//!   (<https://dev.classmethod.jp/articles/ec2-capacity-blocks-for-ml-instance-cb-vs-ultraserver-cb>,
//!   table row "termination"). Check it against the EC2 user guide before relying on
//!   the last hour.

/// EKS scales the nodegroup to 0 this long before an instance Capacity Block ends.
pub const EKS_SCALE_DOWN_MINUTES: i64 = 40;

/// P6e-GB200 UltraServer Capacity Blocks: the instances are reclaimed from this long
/// before the end (see the module's sources).
pub const ULTRASERVER_RECLAIM_MINUTES: i64 = 60;

/// Whether `instance_type` is sold only as UltraServer Capacity Blocks (no on-demand,
/// no instance blocks): P6e-GB200.
pub fn ultraserver_only(instance_type: &str) -> bool {
    instance_type.starts_with("p6e-gb200")
}

/// Minutes before a block of `instance_type` ends that its nodes stop being usable.
pub fn end_margin_minutes(instance_type: &str) -> i64 {
    if ultraserver_only(instance_type) {
        ULTRASERVER_RECLAIM_MINUTES
    } else {
        EKS_SCALE_DOWN_MINUTES
    }
}

/// What happens at the margin, in words, for messages.
pub fn end_margin_story(instance_type: &str) -> String {
    if ultraserver_only(instance_type) {
        format!(
            "UltraServer Capacity Block instances are reclaimed from {ULTRASERVER_RECLAIM_MINUTES} minutes before the end (EventBridge's end warning comes later, at 40 minutes: do not wait for it)"
        )
    } else {
        "EventBridge warns and EKS scales the nodegroup to 0 forty minutes before, EC2 reclaims the instances from thirty minutes before".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ultraserver_blocks_have_their_own_margin() {
        assert_eq!(end_margin_minutes("p6e-gb200.36xlarge"), 60);
        assert_eq!(end_margin_minutes("p5.48xlarge"), 40);
        assert!(ultraserver_only("p6e-gb200.36xlarge") && !ultraserver_only("p6-b200.48xlarge"));
    }
}
