//! The layout as an inline SVG, drawn for the page's width (840 units, shown at about
//! 1:1 in the result card of a 1280-px window, so 12-unit text renders near 12 px):
//! one node in detail (its accelerators, NVLink/NVSwitch drawn as a switch every
//! accelerator hangs off, or PCIe as thin dashed links to a PCIe switch; the EFA count
//! per node and per accelerator), and every node of the job hanging off the EFA fabric
//! (a non-blocking switched network, not a ring). Pure string building.

use std::fmt::Write;

use trainplace_catalog::InstanceProfile;
use trainplace_engine::annotations::RES_NVIDIA_GPU;

use crate::recommend::Recommendation;
use crate::shape::accelerator_word;

pub const WIDTH: u32 = 840;
/// Smallest text size used, in SVG units.
pub const MIN_FONT: u32 = 12;
const DETAIL_W: u32 = 400;
const FABRIC_X: u32 = 440;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn text(s: &mut String, x: u32, y: u32, size: u32, fill: &str, body: &str) {
    let _ = write!(
        s,
        r##"<text x="{x}" y="{y}" font-size="{size}" fill="{fill}">{}</text>"##,
        esc(body)
    );
}

pub fn layout_svg(r: &Recommendation) -> String {
    let p = &r.instance;
    let n = r.shape.nodes;
    let word = accelerator_word(p);
    let cols: u32 = 8;
    let accel = p.accelerators.min(64);
    let rows = accel.div_ceil(cols);
    // Node detail: title, accelerator rows, the intra-node link, the EFA box.
    let detail_h = rows * 34 + 150;
    let (node_cols, cell_w, cell_h, labelled) = if n <= 40 {
        (8, 44, 26, true)
    } else {
        (20, 15, 14, false)
    };
    let node_rows = n.div_ceil(node_cols);
    let fabric_h = 70 + node_rows * (cell_h + 8) + 90;
    let height = 50 + detail_h.max(fabric_h);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="layout" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{n} x {t} in {z}">"##,
        t = esc(&p.name),
        z = esc(&r.availability_zone)
    );
    let _ = write!(
        s,
        r##"<rect x="2" y="2" width="{}" height="{}" rx="10" fill="#f4f7fb" stroke="#5b7fa6" stroke-dasharray="6 4"/>"##,
        WIDTH - 4,
        height - 4
    );
    text(
        &mut s,
        16,
        28,
        15,
        "#2b4a6f",
        &format!(
            "AZ {}: {n} x {}, one pod per node, {} {word} per pod",
            r.availability_zone, p.name, p.accelerators
        ),
    );
    node_detail(&mut s, r, 16, 44, detail_h, cols, accel);
    fabric(&mut s, r, 44, node_cols, cell_w, cell_h, labelled);
    s.push_str("</svg>");
    s
}

/// One node: accelerators, how they connect inside the node, its EFA interfaces.
fn node_detail(s: &mut String, r: &Recommendation, x: u32, y: u32, h: u32, cols: u32, accel: u32) {
    let p = &r.instance;
    let _ = write!(
        s,
        r##"<g class="node"><rect x="{x}" y="{y}" width="{DETAIL_W}" height="{h}" rx="8" fill="#fff" stroke="#333"/>"##
    );
    text(
        s,
        x + 12,
        y + 22,
        13,
        "#1d2733",
        &format!("each node: 1 pod, {} processes", r.processes_per_pod),
    );
    let gx0 = x + 14;
    let gy0 = y + 36;
    let bus_y = gy0 + accel.div_ceil(cols) * 34 + 14;
    let short = if p.accelerator_resource == RES_NVIDIA_GPU {
        "GPU"
    } else {
        "NC"
    };
    accelerators(s, p, (gx0, gy0), cols, accel, short, bus_y);
    intra_node(s, p, gx0, bus_y);
    efa(s, p, gx0, bus_y + 44, short);
    s.push_str("</g>");
}

/// Width of the bus and EFA boxes inside a node.
const BUS_W: u32 = DETAIL_W - 28;

/// The node's accelerators in rows of `cols` from `origin`, each with its line down to
/// the intra-node switch at `bus_y` (solid for NVLink).
fn accelerators(
    s: &mut String,
    p: &InstanceProfile,
    (gx0, gy0): (u32, u32),
    cols: u32,
    accel: u32,
    short: &str,
    bus_y: u32,
) {
    let gw = 40;
    let gh = 24;
    for g in 0..accel {
        let gx = gx0 + (g % cols) * (gw + 7);
        let gy = gy0 + (g / cols) * 34;
        let _ = write!(
            s,
            r##"<rect class="gpu" x="{gx}" y="{gy}" width="{gw}" height="{gh}" rx="3" fill="#76b900"/>"##
        );
        text(s, gx + 4, gy + 17, 12, "#0b2200", &format!("{short}{g}"));
        // Every accelerator hangs off the intra-node switch.
        let (stroke, width, dash) = if p.nvlink {
            ("#1a73e8", 3, "")
        } else {
            ("#6b7785", 1, r##" stroke-dasharray="4 3""##)
        };
        let _ = write!(
            s,
            r##"<line x1="{cx}" y1="{}" x2="{cx}" y2="{bus_y}" stroke="{stroke}" stroke-width="{width}"{dash}/>"##,
            gy + gh,
            cx = gx + gw / 2
        );
    }
}

/// The intra-node switch: NVSwitch (every GPU to every GPU), else PCIe / CPU.
fn intra_node(s: &mut String, p: &InstanceProfile, gx0: u32, bus_y: u32) {
    if p.nvlink {
        let _ = write!(
            s,
            r##"<rect class="nvswitch" x="{gx0}" y="{bus_y}" width="{BUS_W}" height="26" rx="4" fill="#1a73e8"/>"##
        );
        text(
            s,
            gx0 + 8,
            bus_y + 18,
            13,
            "#fff",
            &format!("{}: every GPU to every GPU", p.intra_node),
        );
    } else {
        let _ = write!(
            s,
            r##"<rect class="pcie" x="{gx0}" y="{bus_y}" width="{BUS_W}" height="26" rx="4" fill="#fff" stroke="#6b7785" stroke-dasharray="4 3"/>"##
        );
        text(
            s,
            gx0 + 8,
            bus_y + 18,
            13,
            "#3d4a5a",
            &format!("{} switch / CPU: no NVLink", p.intra_node),
        );
    }
}

/// The node's EFA interfaces (count, share per accelerator, speed), or that it has none.
fn efa(s: &mut String, p: &InstanceProfile, gx0: u32, efa_y: u32, short: &str) {
    if p.max_efa == 0 {
        text(
            s,
            gx0,
            efa_y + 18,
            13,
            "#3d4a5a",
            "no EFA: inter-node traffic uses TCP",
        );
        return;
    }
    let per = f64::from(p.max_efa) / f64::from(p.accelerators);
    let per = if per.fract() == 0.0 {
        format!("{per:.0}")
    } else {
        format!("{per:.2}")
    };
    let _ = write!(
        s,
        r##"<rect class="efa-box" x="{gx0}" y="{efa_y}" width="{BUS_W}" height="44" rx="4" fill="#fff4e8" stroke="#e8710a"/>"##
    );
    text(
        s,
        gx0 + 8,
        efa_y + 18,
        13,
        "#9a4a00",
        &format!(
            "EFA x{} per node = {per} per {}",
            p.max_efa,
            if short == "GPU" { "GPU" } else { "device" }
        ),
    );
    text(
        s,
        gx0 + 8,
        efa_y + 36,
        12,
        "#9a4a00",
        &format!(
            "{} Gbps, RDMA {:?}",
            p.network_gbps.map_or("?".into(), |g| g.to_string()),
            p.rdma
        ),
    );
}

/// Every node of the job, each with its own link down to the EFA fabric.
fn fabric(
    s: &mut String,
    r: &Recommendation,
    y: u32,
    cols: u32,
    cell_w: u32,
    cell_h: u32,
    labelled: bool,
) {
    let n = r.shape.nodes;
    let x = FABRIC_X;
    let w = WIDTH - x - 16;
    text(
        s,
        x,
        y + 18,
        13,
        "#1d2733",
        &format!("all {n} node(s) of the job"),
    );
    let gy0 = y + 32;
    let rows = n.div_ceil(cols);
    let fabric_y = gy0 + rows * (cell_h + 8) + 20;
    for i in 0..n {
        let cx = x + (i % cols) * (cell_w + 4);
        let cy = gy0 + (i / cols) * (cell_h + 8);
        let _ = write!(
            s,
            r##"<rect class="node-cell" x="{cx}" y="{cy}" width="{cell_w}" height="{cell_h}" rx="3" fill="#fff" stroke="#333"/>"##
        );
        if labelled {
            text(s, cx + 5, cy + 18, 12, "#1d2733", &format!("n{i}"));
        }
        if n > 1 && (labelled || i + cols >= n) {
            // Labelled cells each get a link; in the dense grid the bottom row stands
            // for its column.
            let _ = write!(
                s,
                r##"<line class="efa" x1="{lx}" y1="{}" x2="{lx}" y2="{fabric_y}" stroke="#e8710a" stroke-width="2" stroke-opacity="0.7"/>"##,
                cy + cell_h,
                lx = cx + cell_w / 2
            );
        }
    }
    if n > 1 {
        let _ = write!(
            s,
            r##"<rect class="fabric" x="{x}" y="{fabric_y}" width="{w}" height="48" rx="6" fill="#e8710a"/>"##
        );
        text(
            s,
            x + 10,
            fabric_y + 20,
            13,
            "#fff",
            "EFA fabric: switched, non-blocking",
        );
        text(
            s,
            x + 10,
            fabric_y + 38,
            12,
            "#fff",
            &format!("every node to every node, all in {}", r.availability_zone),
        );
    } else {
        text(
            s,
            x,
            fabric_y + 4,
            13,
            "#3d4a5a",
            "one node: nothing crosses the network",
        );
    }
}
