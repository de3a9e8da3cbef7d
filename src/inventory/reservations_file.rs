//! Capacity Blocks from `aws ec2 describe-capacity-reservations --output json`: the CLI's
//! `--reservations FILE`, and the server's (a ConfigMap the platform team refreshes,
//! mounted as a file and reloaded on change). EKS managed node groups need it: their
//! nodes say `eks.amazonaws.com/capacityType: CAPACITY_BLOCK` but not which block or
//! when it ends.

use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;
use trainplace_engine::Reservations;

#[derive(Debug, Error)]
pub enum ReservationsFileError {
    #[error("{path}: cannot read: {message}")]
    Read { path: PathBuf, message: String },
    #[error(
        "{path}: not the JSON of `aws ec2 describe-capacity-reservations --output json`: {message}"
    )]
    Parse { path: PathBuf, message: String },
    #[error(
        "{path}: no CapacityReservations array (expected `aws ec2 describe-capacity-reservations --output json`)"
    )]
    Shape { path: PathBuf },
}

/// Read the active Capacity Blocks of a describe-capacity-reservations file.
pub fn load(path: &Path) -> Result<Reservations, ReservationsFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReservationsFileError::Read {
        path: path.into(),
        message: e.to_string(),
    })?;
    let output: Value = serde_json::from_str(&text).map_err(|e| ReservationsFileError::Parse {
        path: path.into(),
        message: e.to_string(),
    })?;
    if !output
        .get("CapacityReservations")
        .is_some_and(Value::is_array)
    {
        return Err(ReservationsFileError::Shape { path: path.into() });
    }
    let mut reservations = Reservations::default();
    reservations.add_describe_output(&output);
    Ok(reservations)
}
