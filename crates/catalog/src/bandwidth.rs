//! Expected all_reduce bus bandwidth per instance type and node count, with where each
//! number comes from: a domain fact next to the instance catalog. `trainplace diagnose`
//! judges nccl-tests output against it and `trainplace advise` quotes it, so the plan and
//! the check afterwards agree. The embedded table is `crates/catalog/data/expected-busbw.yaml`
//! (each row sourced: a measurement in docs/measurements.md or a formula whose public
//! inputs the file cites); `trainplace diagnose --expectations FILE` replaces it.

use serde::{Deserialize, Serialize};

const EMBEDDED_YAML: &str = include_str!("../data/expected-busbw.yaml");

/// Where the embedded table lives, for messages and `--help`.
pub const EMBEDDED_PATH: &str = "crates/catalog/data/expected-busbw.yaml";

/// A table that does not parse or has a row with an impossible range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expectation table {origin} is invalid: {reason}")]
pub struct ExpectationsError {
    pub origin: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    Measured,
    Estimate,
}

impl Basis {
    pub fn label(self) -> &'static str {
        match self {
            Self::Measured => "measured",
            Self::Estimate => "trainplace estimate",
        }
    }
}

/// One row: the busbw range for an instance type on a range of node counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub instance_type: String,
    pub nodes_min: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_max: Option<u32>,
    /// Rows with a GPU count win over generic rows for runs on that many GPUs per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    /// Rows for one NVLink SHARP (NVLS) state: NCCL's in-switch all-reduce raises a
    /// healthy node's busbw well past the ring bound, so one floor cannot fit both. A
    /// run whose state is unknown is judged by the NVLS-off row (the lower one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvls: Option<bool>,
    pub low: f64,
    pub high: f64,
    pub basis: Basis,
    /// Where the numbers come from (a measurement, or the estimate's formula).
    pub source: String,
}

impl Expectation {
    /// Where the range comes from, led by its basis ("measured", "trainplace estimate").
    pub fn cited(&self) -> String {
        if self.source.starts_with(self.basis.label()) {
            self.source.clone()
        } else {
            format!("{}: {}", self.basis.label(), self.source)
        }
    }

    fn covers(&self, instance_type: &str, nodes: u32) -> bool {
        self.instance_type == instance_type
            && nodes >= self.nodes_min
            && self.nodes_max.is_none_or(|max| nodes <= max)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Expectations {
    rows: Vec<Expectation>,
}

impl Expectations {
    pub fn embedded() -> Self {
        Self::from_yaml(EMBEDDED_YAML, EMBEDDED_PATH)
            // The embedded table is checked by a unit test; an empty table only means
            // "cannot judge", never a wrong verdict.
            .unwrap_or(Self { rows: Vec::new() })
    }

    /// The embedded table, read once per process.
    pub fn shared() -> &'static Self {
        static TABLE: std::sync::OnceLock<Expectations> = std::sync::OnceLock::new();
        TABLE.get_or_init(Self::embedded)
    }

    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ExpectationsError> {
        let invalid = |reason: String| ExpectationsError {
            origin: origin.to_string(),
            reason,
        };
        let table: Self = serde_yaml_ng::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if let Some(row) = table
            .rows
            .iter()
            .find(|row| !(row.low > 0.0 && row.low <= row.high))
        {
            return Err(invalid(format!(
                "row for {} needs 0 < low <= high, got {}..{}",
                row.instance_type, row.low, row.high
            )));
        }
        Ok(table)
    }

    pub fn rows(&self) -> &[Expectation] {
        &self.rows
    }

    /// The row for `instance_type` on `nodes` nodes: one for exactly `gpus_per_node` GPUs
    /// per node wins over the generic one.
    pub fn lookup(
        &self,
        instance_type: &str,
        nodes: u32,
        gpus_per_node: Option<u32>,
    ) -> Option<&Expectation> {
        self.lookup_nvls(instance_type, nodes, gpus_per_node, None)
    }

    /// As `lookup`, for a run whose NVLink SHARP state is `nvls` (from NCCL's log;
    /// `None` when the log does not say). A row for that state wins over one that does
    /// not depend on it; an unknown state takes the NVLS-off row; a state without a row
    /// of its own falls back to the other state's row (the caller sees it in
    /// `Expectation::nvls` and says so).
    pub fn lookup_nvls(
        &self,
        instance_type: &str,
        nodes: u32,
        gpus_per_node: Option<u32>,
        nvls: Option<bool>,
    ) -> Option<&Expectation> {
        let state = nvls.unwrap_or(false);
        let score = |row: &Expectation| {
            let gpus = match row.gpus_per_node {
                None => 1,
                Some(g) if Some(g) == gpus_per_node => 2,
                Some(_) => return None,
            };
            let nvls = match row.nvls {
                Some(s) if s == state => 2,
                None => 1,
                Some(_) => 0,
            };
            Some(gpus * 4 + nvls)
        };
        let mut best: Option<(u32, &Expectation)> = None;
        for row in self
            .rows
            .iter()
            .filter(|row| row.covers(instance_type, nodes))
        {
            if let Some(s) = score(row)
                && best.is_none_or(|(b, _)| s > b)
            {
                best = Some((s, row));
            }
        }
        best.map(|(_, row)| row)
    }

    /// Whether the table has rows per NVLS state for this type and node count, so a
    /// check must read the state to pick its floor.
    pub fn depends_on_nvls(&self, instance_type: &str, nodes: u32) -> bool {
        self.rows
            .iter()
            .any(|row| row.covers(instance_type, nodes) && row.nvls.is_some())
    }
}

impl Default for Expectations {
    fn default() -> Self {
        Self::embedded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::Catalog;

    const MEASUREMENTS: &str = include_str!("../../../docs/measurements.md");

    #[test]
    fn embedded_table_parses_and_every_row_names_its_source() {
        let table = Expectations::from_yaml(EMBEDDED_YAML, "embedded").expect("valid table");
        assert!(table.rows().len() >= 16);
        for row in table.rows() {
            assert!(!row.source.is_empty());
            let labelled = match row.basis {
                Basis::Estimate => row.source.starts_with("trainplace estimate"),
                Basis::Measured => row.source.contains("measured"),
            };
            assert!(labelled, "row {row:?} does not say what it is");
        }
    }

    #[test]
    fn every_row_is_sourced_and_names_a_catalog_type() {
        let catalog = Catalog::embedded();
        let table = Expectations::embedded();
        for row in table.rows() {
            assert!(
                catalog.get(&row.instance_type).is_some(),
                "{} is not in policies/instances.yaml",
                row.instance_type
            );
            match row.basis {
                // An estimate names its formula, and the file defines it with its sources.
                Basis::Estimate => {
                    let formula = ["F1", "F2", "F3"]
                        .into_iter()
                        .find(|f| row.source.contains(&format!("estimate {f}:")))
                        .unwrap_or_else(|| panic!("{row:?} names no formula"));
                    assert!(EMBEDDED_YAML.contains(&format!("#   {formula} ")));
                }
                // A measured row cites the document, and the document has the number.
                Basis::Measured => {
                    assert!(row.source.starts_with("docs/measurements.md"), "{row:?}");
                    let number = row
                        .source
                        .split_whitespace()
                        .find(|word| word.parse::<f64>().is_ok_and(|n| n > row.low))
                        .unwrap_or_else(|| panic!("{row:?} quotes no measured number"));
                    assert!(MEASUREMENTS.contains(number), "{number} not in the doc");
                }
            }
        }
        let urls = EMBEDDED_YAML.matches("https://").count();
        assert!(urls >= 3, "the formulas' inputs must cite public sources");
    }

    #[test]
    fn gpu_count_specific_row_wins() {
        let table = Expectations::embedded();
        let four = table.lookup("p5en.48xlarge", 1, Some(4)).expect("row");
        assert_eq!(four.basis, Basis::Measured);
        let six = table.lookup("p5en.48xlarge", 1, Some(6)).expect("row");
        assert_eq!(six.basis, Basis::Estimate);
        assert!(table.lookup("p5en.48xlarge", 3, Some(8)).expect("row").low < four.low);
        assert!(table.lookup("trn1.32xlarge", 1, None).is_none());
    }

    #[test]
    fn nvls_state_picks_its_row_and_unknown_takes_the_lower() {
        let table = Expectations::embedded();
        let on = table
            .lookup_nvls("p5.48xlarge", 1, Some(8), Some(true))
            .expect("row");
        let off = table
            .lookup_nvls("p5.48xlarge", 1, Some(8), Some(false))
            .expect("row");
        let unknown = table.lookup("p5.48xlarge", 1, Some(8)).expect("row");
        assert_eq!((on.nvls, off.nvls), (Some(true), Some(false)));
        assert!(
            on.low > off.high,
            "NVLS on must fail a node NVLS off calls healthy"
        );
        assert_eq!(unknown, off);
        assert!(table.depends_on_nvls("p5.48xlarge", 1));
        assert!(!table.depends_on_nvls("p4d.24xlarge", 1));
        // GB200 has an NVLS-off row only: NVLS on falls back to it (the caller says so).
        let gb = table
            .lookup_nvls("p6e-gb200.36xlarge", 1, Some(4), Some(true))
            .expect("row");
        assert_eq!(gb.nvls, Some(false));
        // Other GPU counts keep the generic estimate.
        let six = table
            .lookup_nvls("p5.48xlarge", 1, Some(6), Some(true))
            .expect("row");
        assert_eq!((six.basis, six.nvls), (Basis::Estimate, None));
    }

    #[test]
    fn rejects_inverted_range() {
        let yaml = "rows:\n  - {instance_type: x, nodes_min: 1, low: 5, high: 1, basis: estimate, source: s}\n";
        let error = Expectations::from_yaml(yaml, "test").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("expectation table test is invalid")
        );
    }
}
