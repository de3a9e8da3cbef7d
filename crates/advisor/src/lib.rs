//! trainplace placement advisor: "I need N GPUs for D days around T: what do I buy and
//! how do I set it up?" A pure core (request -> recommendation -> artifacts, text and
//! SVG renderings); its faces (the `advise` CLI and the HTTP server with the web page)
//! live in the `trainplace` binary.
#![forbid(unsafe_code)]

pub mod aws;
pub mod capacity;
pub mod checkpoint;
pub mod error;
pub mod regions;
pub mod request;
pub mod time;
pub mod topology;

pub use error::{InputError, InputSource};
pub use request::{AdviceRequest, Request};
pub mod bandwidth;
pub mod images;
pub mod inventory;
pub mod limits;
pub mod options;
mod placement;
pub mod plan;
pub mod recommend;
pub mod shape;
pub mod warnings;

pub use recommend::{Facts, Recommendation, recommend};
pub mod advice;
pub mod allocatable;
pub mod artifacts;
pub mod render;
pub mod svg;

pub use advice::{Advice, RawFacts, advise};
