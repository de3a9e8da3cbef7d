//! What trainplace knows about instance types, apart from any object it judges: the
//! instance catalog (accelerators, EFA, memory, NVLink, price, the NCCL environment each
//! type needs; `policies/instances.yaml`, every row sourced) and the expected all-reduce
//! bandwidth per type and node count. The engine, the advisor and `diagnose` each read
//! it from here, as kube-core stands apart from kube-client.
#![forbid(unsafe_code)]

pub mod bandwidth;
mod error;
mod instances;
pub mod quantity;
pub mod topology;
pub mod yaml;

pub use error::CatalogError;
pub use instances::{
    AcceleratorResource, Catalog, CatalogFile, Counts, DeviceClass, EMBEDDED_CATALOG,
    InstanceProfile, Rdma,
};
