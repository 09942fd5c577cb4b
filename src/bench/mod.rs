//! Benchmarks: `clhip bench refs` (the CPU references) and `clhip bench runner` (the runner's
//! own cost).

pub mod refs;
pub mod runner;

pub use refs::run_refs;
pub use runner::{RunnerConfig, run_runner};
