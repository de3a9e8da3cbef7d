//! The layout as an inline SVG: the AZ, the nodes, GPUs per node with the intra-node
//! link, EFA between nodes. Pure string building; the web page embeds it.

use std::fmt::Write;

use crate::recommend::Recommendation;

/// Nodes drawn before the picture says "+N more"; keeps the SVG small for big jobs.
const MAX_DRAWN_NODES: u32 = 8;
const NODE_W: u32 = 150;
const NODE_H: u32 = 120;
const GAP: u32 = 40;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn layout_svg(r: &Recommendation) -> String {
    let drawn = r.shape.nodes.min(MAX_DRAWN_NODES);
    let more = r.shape.nodes - drawn;
    let width = 40 + drawn * (NODE_W + GAP) + if more > 0 { 90 } else { 0 };
    let height = NODE_H + 110;
    let p = &r.instance;
    let link = if p.nvlink {
        "NVLink"
    } else {
        p.intra_node.as_str()
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="layout" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{n} x {t} in {z}">"##,
        n = r.shape.nodes,
        t = esc(&p.name),
        z = esc(&r.availability_zone)
    );
    let _ = write!(
        s,
        r##"<rect x="5" y="5" width="{}" height="{}" rx="10" fill="#f4f7fb" stroke="#5b7fa6" stroke-dasharray="6 4"/><text x="18" y="26" font-size="14" fill="#2b4a6f">AZ {}</text>"##,
        width - 10,
        height - 10,
        esc(&r.availability_zone)
    );
    for i in 0..drawn {
        let x = 25 + i * (NODE_W + GAP);
        let y = 45;
        let _ = write!(
            s,
            r##"<g class="node"><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="#fff" stroke="#333"/><text x="{}" y="{}" font-size="11">node {i}: 1 pod</text>"##,
            x + 8,
            y + 16
        );
        let cols = 4;
        let gpus = p.accelerators.min(16);
        for g in 0..gpus {
            let gx = x + 10 + (g % cols) * 34;
            let gy = y + 26 + (g / cols) * 18;
            let _ = write!(
                s,
                r##"<rect class="gpu" x="{gx}" y="{gy}" width="28" height="14" fill="#76b900"/>"##
            );
        }
        let rows = gpus.div_ceil(cols);
        let ly = y + 30 + rows * 18;
        let _ = write!(
            s,
            r##"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="#1a73e8" stroke-width="4"/><text x="{}" y="{}" font-size="10" fill="#1a73e8">{}</text></g>"##,
            x + 10,
            x + NODE_W - 10,
            x + 10,
            ly + 14,
            esc(link)
        );
        if i + 1 < drawn || (i + 1 == drawn && more > 0) {
            let x1 = x + NODE_W;
            let ym = y + NODE_H / 2;
            let _ = write!(
                s,
                r##"<line class="efa" x1="{x1}" y1="{ym}" x2="{}" y2="{ym}" stroke="#e8710a" stroke-width="3"/><text x="{}" y="{}" font-size="10" fill="#e8710a">EFA</text>"##,
                x1 + GAP,
                x1 + 8,
                ym - 6
            );
        }
    }
    if more > 0 {
        let x = 25 + drawn * (NODE_W + GAP);
        let _ = write!(
            s,
            r##"<text x="{x}" y="{}" font-size="13">+{more} more</text>"##,
            45 + NODE_H / 2
        );
    }
    let _ = write!(
        s,
        r##"<text x="25" y="{}" font-size="12">{} x {} {}, EFA x{} per node{}</text></svg>"##,
        height - 20,
        r.shape.nodes,
        p.accelerators,
        crate::shape::accelerator_word(p),
        p.max_efa,
        if r.shape.nodes > 1 {
            ", all in one AZ"
        } else {
            ""
        }
    );
    s
}
