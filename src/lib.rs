//! clhip: a conformance and correctness harness for GPU memory interop between OpenCL and HIP.
//!
//! Layers, bottom up: `runtimes` (thin safe wrappers over each API), `paths` and `sync` (how
//! memory crosses between two participants and how ownership passes), `ops` (what a case
//! computes), `reference` and `tolerance` (the f64 CPU truth and the bounds it is held to),
//! `runner` and `worker` (isolated execution), `report` (what people and machines read).

pub mod bench;
pub mod blocking;
pub mod build_id;
pub mod calls;
pub mod cases;
pub mod child;
pub mod config;
pub mod consistency;
pub mod escape;
pub mod expectations;
pub mod explore;
pub mod fault;
pub mod fft;
pub mod filter;
pub mod fingerprint;
pub mod footprint;
pub mod generate;
pub mod hash;
pub mod history;
pub mod input;
pub mod ipc;
pub mod keyed_file;
pub mod kmsg;
pub mod merge;
pub mod mock;
pub mod model;
pub mod ops;
pub mod output;
pub mod pairs;
pub mod partition;
pub mod paths;
pub mod peer;
pub mod plan;
pub mod probe;
pub mod protocol;
pub mod reference;
pub mod report;
pub mod repro;
pub mod results;
pub mod resume;
pub mod runner;
pub mod runtimes;
pub mod sync;
pub mod tolerance;
pub mod trace;
pub mod worker;
