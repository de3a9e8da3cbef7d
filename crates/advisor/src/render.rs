//! The human summary the CLI prints.

use std::fmt::Write;

use crate::advice::Advice;
use crate::recommend::{CapacityPlan, Recommendation};

/// The summary: the layout, capacity, placement, route, cost and bandwidth on a line each,
/// then why, the warnings, the capacity options, the alternatives and the artifacts.
pub fn text(advice: &Advice) -> String {
    let r = &advice.recommendation;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} x {} in {} ({} {}: {} pods x {} processes, {} EFA per node)",
        r.shape.nodes,
        r.instance.name,
        r.availability_zone,
        r.shape.total_gpus,
        crate::shape::accelerator_word(&r.instance),
        r.pods,
        r.processes_per_pod,
        r.shape.efa_per_node
    );
    let _ = writeln!(s, "capacity:   {}", capacity(&r.capacity));
    let _ = writeln!(
        s,
        "placement:  {}",
        r.placement_group
            .as_deref()
            .map_or("no placement group".into(), |pg| format!(
                "cluster placement group {pg}"
            ))
    );
    let _ = writeln!(s, "nodes:      {}", r.route_summary);
    let storage = match (
        r.cost.checkpoint_storage_usd,
        r.cost.checkpoint_storage_usd_per_month,
    ) {
        (Some(run), Some(month)) => format!(
            " + checkpoint storage {} for the run ({} a month until deleted)",
            money(Some(run)),
            money(Some(month))
        ),
        _ => String::new(),
    };
    let prices = r.cost.list_prices_region.map_or(String::new(), |from| {
        format!(
            "; on-demand and storage figures are {from} list prices, not {}'s",
            r.request.region
        )
    });
    let _ = writeln!(
        s,
        "cost:       {} (on-demand reference {}){storage}{prices}",
        money(r.cost.estimate_usd),
        money(r.cost.on_demand_usd)
    );
    bandwidth(&mut s, r);
    topology(&mut s, r);
    let _ = writeln!(s, "\nwhy:");
    for reason in &r.reasons {
        let _ = writeln!(s, "  - {reason}");
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(s, "\nwarnings:");
        for w in &r.warnings {
            let _ = writeln!(s, "  ! [{}] {}", w.code, w.message);
        }
    }
    options_and_alternatives(&mut s, r);
    let _ = writeln!(
        s,
        "\nartifacts (--emit DIR writes them): {}",
        advice
            .artifacts
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    s
}

fn money(x: Option<f64>) -> String {
    x.map_or("unknown".to_string(), |v| format!("${v:.2}"))
}

/// The capacity line: which blocks, reservation or nodes, or on-demand.
fn capacity(plan: &CapacityPlan) -> String {
    match plan {
        CapacityPlan::CapacityBlock {
            block_hours: _,
            blocks: Some(p),
        } => format!(
            "Capacity Block(s) of {}: {} ({} instances, {} .. {}, usable {:.1} h)",
            crate::recommend::block_lengths(p),
            p.offerings
                .iter()
                .map(|o| o.id.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            p.instances,
            p.start,
            p.end,
            p.usable_hours
        ),
        CapacityPlan::CapacityBlock {
            block_hours,
            blocks: None,
        } => {
            format!(
                "Capacity Block of {block_hours} h: list offerings with aws-cli.sh, rerun with --offerings"
            )
        }
        CapacityPlan::Odcr { reservation_id } => {
            format!("On-Demand Capacity Reservation {reservation_id}")
        }
        CapacityPlan::Existing { nodes, groups } => format!(
            "existing nodes: the cluster's {nodes} node(s) ({})",
            groups.join(", ")
        ),
        CapacityPlan::OnDemand => "on-demand".to_string(),
    }
}

/// The bandwidth line, and the nccl-tests busbw to expect when it is known.
fn bandwidth(s: &mut String, r: &Recommendation) {
    let b = &r.bandwidth;
    let _ = writeln!(
        s,
        "bandwidth:  {} ({}{})",
        b.class,
        b.intra_node,
        b.inter_node
            .as_deref()
            .map(|i| format!("; {i}"))
            .unwrap_or_default()
    );
    if let (Some(low), Some(high)) = (b.busbw_low_gbs, b.busbw_high_gbs) {
        let _ = writeln!(
            s,
            "nccl-tests: expect all_reduce busbw {low}..{high} GB/s (check with `trainplace diagnose`)"
        );
    }
}

/// How far apart the nodes are: what aws-cli.sh reads, what to expect, how to read it.
fn topology(s: &mut String, r: &Recommendation) {
    let Some(t) = &r.topology else {
        return;
    };
    if t.reads.is_empty() {
        let _ = writeln!(s, "topology:   {}", t.expect);
        return;
    }
    let _ = writeln!(s, "topology:   aws-cli.sh reads it: {}", t.reads.join("; "));
    let _ = writeln!(s, "  - expect: {}", t.expect);
    let _ = writeln!(s, "  - how to read it: {}", t.how_to_read);
}

/// The capacity that could be bought (the chosen one starred) and the next instance
/// types.
fn options_and_alternatives(s: &mut String, r: &Recommendation) {
    if !r.capacity_options.is_empty() {
        let _ = writeln!(s, "\ncapacity options:");
        for o in &r.capacity_options {
            let mark = if o.chosen { "*" } else { "-" };
            let ids = if o.offerings.is_empty() {
                String::new()
            } else {
                format!(" [{}]", o.offerings.join(" + "))
            };
            let _ = writeln!(s, "  {mark} {}{ids}: {}", o.label, money(o.usd));
        }
    }
    if !r.other_offerings.is_empty() {
        let _ = writeln!(s, "\nofferings not bought (does each fit the job alone?):");
        for l in &r.other_offerings {
            let o = &l.offering;
            let _ = writeln!(
                s,
                "  {} {} {}: {} x {} h from {}, ${:.2}: {}",
                if l.fits { "+" } else { "x" },
                o.id,
                o.availability_zone,
                o.instance_count,
                o.duration_hours,
                o.start,
                o.upfront_fee,
                l.why
            );
        }
    }
    if !r.alternatives.is_empty() {
        let _ = writeln!(s, "\nalternatives:");
        for a in &r.alternatives {
            let _ = writeln!(
                s,
                "  - {} x {} ({} {}, on-demand {}){}",
                a.nodes,
                a.instance_type,
                a.total_gpus,
                crate::shape::accelerator_word(&r.instance),
                money(a.on_demand_usd),
                a.slower
                    .as_deref()
                    .map_or(": the recommended layout".to_string(), |w| format!(": {w}"))
            );
        }
    }
}
