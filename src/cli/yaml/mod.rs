//! YAML as kubectl reads it (YAML 1.1 through go-yaml v2 and sigs.k8s.io/yaml), and
//! YAML that every 1.1 or 1.2 reader reads back unchanged.

pub(crate) mod emit;
pub(crate) mod load;
pub(crate) mod resolve;
