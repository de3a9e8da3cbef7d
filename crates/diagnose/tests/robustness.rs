//! Random, truncated and mangled input never panics: it yields a report or a typed error.

mod common;

use std::sync::LazyLock;

use common::{all_fixtures, opts};
use proptest::prelude::*;
use trainplace_diagnose::{InputKind, NetworkMap, Options, diagnose, render_text};

/// Every truncation of every fixture read as a topology and as a pods file, and (when
/// it reads) diagnosing the two-node log with it: a map or a typed error, never a panic.
#[test]
fn every_truncation_of_every_fixture_as_a_topology() {
    let (log, _) = all_fixtures()
        .into_iter()
        .find(|(_, name)| name == "p5_2node_efa_no_gdr.log")
        .expect("the two-node log");
    for (text, _name) in all_fixtures() {
        let step = (text.chars().count() / 40).max(1);
        let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(step).collect();
        for cut in cuts {
            let cut = &text[..cut];
            let mut pods = NetworkMap::default();
            let _ = pods.add_pods(cut, "fuzz");
            if let Ok(map) = NetworkMap::parse_topology(cut, "fuzz") {
                let opts = Options {
                    network: Some(map),
                    ..Options::default()
                };
                let report = diagnose(&log, None, &opts).expect("the log reads");
                let _ = render_text(&report, "fuzz");
            }
        }
    }
}

fn exercise(text: &str) {
    for kind in [
        None,
        Some(InputKind::NcclLog),
        Some(InputKind::Topo),
        Some(InputKind::NcclTests),
    ] {
        if let Ok(report) = diagnose(text, kind, &opts(Some("p4d.24xlarge"))) {
            let _ = render_text(&report, "fuzz");
            serde_json::to_string(&report).expect("report serialises");
        }
    }
}

#[test]
fn every_truncation_of_every_fixture() {
    for (text, _name) in all_fixtures() {
        // ~80 cuts per file, at char boundaries, keep the debug-build run short.
        let step = (text.chars().count() / 80).max(1);
        let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(step).collect();
        for cut in cuts {
            exercise(&text[..cut]);
        }
    }
}

#[test]
fn line_shuffles_and_duplicates_of_fixtures() {
    for (text, _name) in all_fixtures() {
        let lines: Vec<&str> = text.lines().collect();
        let reversed: Vec<&str> = lines.iter().rev().copied().collect();
        exercise(&reversed.join("\n"));
        let doubled: Vec<&str> = lines.iter().flat_map(|l| [*l, *l]).collect();
        exercise(&doubled.join("\n"));
    }
}

static FIXTURES: LazyLock<Vec<(String, String)>> = LazyLock::new(all_fixtures);

const ALPHABET: &str = "0123456789[]:/ ->.#\tXNVGPUCHMSOIBLDEFARTnccl_via\u{1b}";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        exercise(&text);
    }

    #[test]
    fn nccl_shaped_noise_never_panics(
        body in proptest::collection::vec(proptest::sample::select(ALPHABET.chars().collect::<Vec<_>>()), 0..300)
    ) {
        let body: String = body.into_iter().collect();
        exercise(&format!("host-a:1:2 [0] NCCL INFO Channel {body}\n"));
        exercise(&format!("GPU0\tGPU1\tCPU Affinity\nGPU0\t X \t{body}\n"));
        exercise(&format!("# busbw\n  1024  256  float sum -1 {body}\n"));
    }

    #[test]
    fn mangled_fixture_bytes_never_panic(index in 0usize..64, position in 0usize..100_000, byte in any::<u8>()) {
        let (text, _) = &FIXTURES[index % FIXTURES.len()];
        let mut bytes = text.clone().into_bytes();
        if !bytes.is_empty() {
            let at = position % bytes.len();
            bytes[at] = byte;
        }
        exercise(&String::from_utf8_lossy(&bytes));
    }
}
