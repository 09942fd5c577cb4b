//! The harness of the test binaries whose tests need something this machine may lack (an
//! OpenCL device, a C compiler, hipcc, chromium, libamdhip64, libcuda, a Vulkan GPU). Under
//! Rust's own harness such a test can only return early, and is then reported `ok` having
//! checked nothing; here it calls [`ignore`], and libtest-mimic reports it `ignored` with the
//! reason. Where CI names the tool as required (`CLHIP_REQUIRE_OPENCL=1` and the like),
//! [`ignore`] fails the test instead, so a missing install step cannot turn into a green run.
//!
//! A file using it sets `harness = false` in Cargo.toml, declares its tests with plain `fn`s
//! and lists them in [`tests!`]. tests/layering.rs checks that no `#[test]` is left in such a
//! file (under `harness = false` it would silently never run).

#![allow(dead_code)] // Each test binary uses its own part of this.

use std::fmt::Display;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// Why a test did not run: the payload [`ignore`] unwinds with.
struct Ignored(String);

/// Whether CI requires what `var` (a `CLHIP_REQUIRE_*` variable) names.
pub fn required(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// Ends the running test as ignored because of `why`, or as failed where `require` (a
/// `CLHIP_REQUIRE_*` variable) is 1. Unwinding, like a failed assertion, lets a helper many
/// calls deep stop its test without every caller passing an `Option` up.
pub fn ignore(require: &str, why: impl Display) -> ! {
    if required(require) {
        panic!("{require}=1 but {why}");
    }
    panic::panic_any(Ignored(why.to_string()))
}

/// Ends the running test as ignored: what it checks does not apply to this machine (a device
/// is present where the test is about its absence), which no `CLHIP_REQUIRE_*` can change.
pub fn not_applicable(why: impl Display) -> ! {
    panic::panic_any(Ignored(why.to_string()))
}

/// Runs `tests` (name, function) under libtest-mimic, with this binary's arguments.
pub fn run(tests: Vec<(&'static str, fn())>) -> ! {
    let default_hook = panic::take_hook();
    // An ignored test is no panic to report: libtest-mimic prints its reason.
    panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<Ignored>().is_none() {
            default_hook(info);
        }
    }));
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            Trial::ignorable_test(name, move || {
                match panic::catch_unwind(AssertUnwindSafe(test)) {
                    Ok(()) => Ok(Completion::Completed),
                    Err(payload) => match payload.downcast::<Ignored>() {
                        Ok(why) => Ok(Completion::ignored_with(why.0)),
                        Err(payload) => Err(Failed::from(panic_message(&*payload))),
                    },
                }
            })
        })
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".into())
}

/// `fn main` of a test binary: runs the named test functions.
macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        fn main() {
            support::run(vec![$((stringify!($test), $test as fn())),*])
        }
    };
}

/// This machine's first OpenCL device, or the test is ignored (failed under
/// `CLHIP_REQUIRE_OPENCL=1`).
pub fn opencl_device() -> clhip::runtimes::opencl::ClDevice {
    // Enumerated once: the ICD loader's first initialisation is not safe to race (ocl-icd
    // segfaults), and test threads run in parallel.
    static FIRST: OnceLock<Result<clhip::runtimes::opencl::ClDevice, String>> = OnceLock::new();
    let first = FIRST.get_or_init(|| match clhip::runtimes::opencl::enumerate() {
        Ok(devices) => devices
            .into_iter()
            .next()
            .ok_or_else(|| "no OpenCL device".to_string()),
        Err(e) => Err(format!("no OpenCL device: {e}")),
    });
    match first {
        Ok(d) => d.clone(),
        Err(why) => ignore("CLHIP_REQUIRE_OPENCL", why),
    }
}

/// Why `tool --version` cannot be run here, if it cannot.
pub fn missing_tool(tool: &str) -> Option<String> {
    match std::process::Command::new(tool).arg("--version").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("`{tool} --version` exited {}", o.status)),
        Err(e) => Some(format!("no `{tool}` on PATH ({e})")),
    }
}

/// Ignores the running test where `tool` cannot be run (failed where `require`, a
/// `CLHIP_REQUIRE_*` variable, is 1).
pub fn need_tool(tool: &str, require: &str) {
    if let Some(why) = missing_tool(tool) {
        ignore(require, why);
    }
}
