//! An EventBridge rule on the Capacity Block end warning. EC2 sends it forty minutes
//! before a block ends, when its instances begin to terminate ten minutes later
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html>).
//! The EventBridge reference names the event `Capacity Block Expiration Warning`
//! (<https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-ec2.html>) while the
//! EC2 guide's example has shown `Capacity Block Reservation Expiration Warning`: the rule
//! matches both. `put-rule` creates or updates, so a rerun is safe; the target (an SNS
//! topic, a function that checkpoints the job) is the platform team's to add.

/// The rule's name for the plan's cluster.
pub fn rule_name(cluster: &str) -> String {
    format!("{cluster}-capacity-block-end")
}

/// When EC2 sends the end warning, in minutes before the block's end.
pub const WARNING_MINUTES: i64 = 40;

/// Shell lines that put the rule on the blocks whose ids are `ids` (shell words: ids or
/// `$CR_0`-style variables the purchase step set). `end_margin` is the plan's (minutes
/// before the end its nodes go, `capacity/margin.rs`): when it is larger than the
/// warning's lead, the warning comes after the nodes began to go, and the step says so.
pub fn rule_lines(cluster: &str, ids: &[String], end_margin: i64) -> Vec<String> {
    let quoted: Vec<String> = ids.iter().map(|id| format!("\\\"{id}\\\"")).collect();
    let name = rule_name(cluster);
    let timing = if end_margin > WARNING_MINUTES {
        format!(
            "{WARNING_MINUTES} minutes before the end, {} minutes after these blocks' instances begin to be reclaimed ({end_margin} minutes before the end): a record, not the signal to checkpoint; checkpoint by the plan's deadline",
            end_margin - WARNING_MINUTES
        )
    } else {
        format!("{WARNING_MINUTES} minutes before the end")
    };
    vec![
        format!(
            "# {{STEP}} EventBridge rule on the blocks' end warning ({timing}): add a target to it, e.g. aws events put-targets --rule NAME --targets Id=1,Arn=<SNS topic ARN>."
        ),
        format!(
            "aws events put-rule --region \"$REGION\" --name {name} --description 'Capacity Block end warning for {cluster}' --event-pattern \"{{\\\"source\\\":[\\\"aws.ec2\\\"],\\\"detail-type\\\":[\\\"Capacity Block Expiration Warning\\\",\\\"Capacity Block Reservation Expiration Warning\\\"],\\\"detail\\\":{{\\\"capacity-reservation-id\\\":[{}]}}}}\"",
            quoted.join(",")
        ),
    ]
}
