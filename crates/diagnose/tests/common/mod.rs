//! Shared helpers: fixtures are files under `crates/diagnose/fixtures/`.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

use trainplace_diagnose::{Options, Report, Severity, Version};

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

pub fn all_fixtures() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixtures dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| (fixture(&name), name))
        .collect()
}

pub fn opts(instance: Option<&str>) -> Options {
    Options {
        instance_type: instance.map(str::to_string),
        ..Options::default()
    }
}

pub fn opts_full(instance: Option<&str>, nodes: Option<u32>, ofi: Option<&str>) -> Options {
    Options {
        instance_type: instance.map(str::to_string),
        nodes,
        aws_ofi_nccl_version: ofi.map(|v| Version::parse_lenient(v).expect("version")),
        ..Options::default()
    }
}

/// `(severity, rule)` of every finding, sorted, for exact comparison in table tests.
pub fn rules(report: &Report) -> Vec<(Severity, &'static str)> {
    let mut rules: Vec<_> = report
        .findings
        .iter()
        .map(|finding| (finding.severity, finding.rule))
        .collect();
    rules.sort();
    rules
}
