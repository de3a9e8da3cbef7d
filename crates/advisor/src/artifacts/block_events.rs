//! An EventBridge rule on the Capacity Block end warning. EC2 sends it forty minutes
//! before a block ends, when its instances begin to terminate ten minutes later
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html>).
//! The EventBridge reference names the event `Capacity Block Expiration Warning`
//! (<https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-ec2.html>) while the
//! EC2 guide's example has shown `Capacity Block Reservation Expiration Warning`: the rule
//! matches both. `put-rule` creates or updates, so a rerun is safe.
//!
//! What it is for: telling people. The job's own deadline (`CHECKPOINT_BY`) and the
//! nodegroups' scheduled scale-in act on the plan's end margin without it; the rule's
//! target is an SNS topic of the rule's name (`create-topic` answers the existing topic
//! when there is one, <https://docs.aws.amazon.com/cli/latest/reference/sns/create-topic.html>)
//! whose policy lets EventBridge publish for this rule only
//! (<https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sns-permissions>),
//! and `NOTIFY_EMAIL` subscribes an address to it. Without a target a rule does nothing.

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
    let policy = "{\\\"Version\\\":\\\"2012-10-17\\\",\\\"Statement\\\":[{\\\"Effect\\\":\\\"Allow\\\",\\\"Principal\\\":{\\\"Service\\\":\\\"events.amazonaws.com\\\"},\\\"Action\\\":\\\"sns:Publish\\\",\\\"Resource\\\":\\\"$TOPIC_ARN\\\",\\\"Condition\\\":{\\\"ArnEquals\\\":{\\\"aws:SourceArn\\\":\\\"$RULE_ARN\\\"}}}]}";
    vec![
        format!(
            "# {{STEP}} EventBridge rule on the blocks' end warning ({timing}), to tell people: its target is the SNS topic {name}; NOTIFY_EMAIL=ADDRESS subscribes an address."
        ),
        format!(
            "RULE_ARN=$(aws events put-rule --region \"$REGION\" --name {name} --description 'Capacity Block end warning for {cluster}' --query RuleArn --output text --event-pattern \"{{\\\"source\\\":[\\\"aws.ec2\\\"],\\\"detail-type\\\":[\\\"Capacity Block Expiration Warning\\\",\\\"Capacity Block Reservation Expiration Warning\\\"],\\\"detail\\\":{{\\\"capacity-reservation-id\\\":[{}]}}}}\")",
            quoted.join(",")
        ),
        format!(
            "TOPIC_ARN=$(aws sns create-topic --region \"$REGION\" --name {name} --query TopicArn --output text)"
        ),
        format!(
            "aws sns set-topic-attributes --region \"$REGION\" --topic-arn \"$TOPIC_ARN\" --attribute-name Policy --attribute-value \"{policy}\""
        ),
        format!(
            "aws events put-targets --region \"$REGION\" --rule {name} --targets \"Id=sns,Arn=$TOPIC_ARN\""
        ),
        "if [ -n \"${NOTIFY_EMAIL:-}\" ]; then aws sns subscribe --region \"$REGION\" --topic-arn \"$TOPIC_ARN\" --protocol email --notification-endpoint \"$NOTIFY_EMAIL\"; fi".into(),
        "echo \"The blocks' end warning goes to an SNS topic: subscribe to $TOPIC_ARN (or run again with NOTIFY_EMAIL=ADDRESS) to be told.\"".into(),
    ]
}
