//! Expected all_reduce bus bandwidth per instance type and node count, with where each
//! number comes from. The embedded table is `data/expectations.yaml`; `--expectations`
//! replaces it with the user's own measurements.

use serde::{Deserialize, Serialize};

use crate::error::DiagnoseError;

const EMBEDDED_YAML: &str = include_str!("../data/expectations.yaml");

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub instance_type: String,
    pub nodes_min: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_max: Option<u32>,
    /// Rows with a GPU count win over generic rows for runs on that many GPUs per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    pub low: f64,
    pub high: f64,
    pub basis: Basis,
    pub source: String,
}

impl Expectation {
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
        Self::from_yaml(EMBEDDED_YAML, "embedded data/expectations.yaml")
            // The embedded table is checked by a unit test; an empty table only means
            // "cannot judge", never a wrong verdict.
            .unwrap_or(Self { rows: Vec::new() })
    }

    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, DiagnoseError> {
        let table: Self =
            serde_yaml_ng::from_str(text).map_err(|error| DiagnoseError::Expectations {
                origin: origin.to_string(),
                reason: error.to_string(),
            })?;
        if let Some(row) = table
            .rows
            .iter()
            .find(|row| !(row.low > 0.0 && row.low <= row.high))
        {
            return Err(DiagnoseError::Expectations {
                origin: origin.to_string(),
                reason: format!(
                    "row for {} needs 0 < low <= high, got {}..{}",
                    row.instance_type, row.low, row.high
                ),
            });
        }
        Ok(table)
    }

    pub fn rows(&self) -> &[Expectation] {
        &self.rows
    }

    pub fn lookup(
        &self,
        instance_type: &str,
        nodes: u32,
        gpus_per_node: Option<u32>,
    ) -> Option<&Expectation> {
        let covering = || {
            self.rows
                .iter()
                .filter(|row| row.covers(instance_type, nodes))
        };
        covering()
            .find(|row| row.gpus_per_node.is_some() && row.gpus_per_node == gpus_per_node)
            .or_else(|| covering().find(|row| row.gpus_per_node.is_none()))
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
    fn gpu_count_specific_row_wins() {
        let table = Expectations::embedded();
        let four = table.lookup("p5en.48xlarge", 1, Some(4)).expect("row");
        assert_eq!(four.basis, Basis::Measured);
        let eight = table.lookup("p5en.48xlarge", 1, Some(8)).expect("row");
        assert_eq!(eight.basis, Basis::Estimate);
        assert!(table.lookup("p5en.48xlarge", 3, Some(8)).expect("row").low < four.low);
        assert!(table.lookup("trn1.32xlarge", 1, None).is_none());
    }

    #[test]
    fn rejects_inverted_range() {
        let yaml = "rows:\n  - {instance_type: x, nodes_min: 1, low: 5, high: 1, basis: estimate, source: s}\n";
        assert!(Expectations::from_yaml(yaml, "test").is_err());
    }
}
