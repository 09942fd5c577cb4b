//! Host pairs: OpenCL alone; the host CPU is the peer (runtimes/host.rs), built with `cc`.

use crate::model::Op;

use super::ReproCase;
use super::emit::{Body, Target, assemble, section};

const HOST: &str = include_str!("templates/host.c");

/// The host's ops: every one clhip runs on a host pair.
pub(super) const OPS: &[Op] = &[Op::Handoff, Op::Fft, Op::Pipeline, Op::Reuse];

/// The program and its build script.
pub(super) fn program(case: &ReproCase, b: &Body) -> (String, String) {
    let mut peer = section(HOST, "host_peer").to_string();
    if case.op.checks_a_pattern() {
        peer.push_str(section(HOST, "host_pattern"));
    }
    if case.op == Op::Pipeline {
        peer.push_str(section(HOST, "host_elementwise"));
    }
    let target = Target {
        includes: String::new(),
        check: section(HOST, "check").to_string(),
        constants: String::new(),
        peer,
        peer_source: None,
    };
    let build = "#!/bin/sh\n\
                 # OpenCL alone: the ICD loader and Khronos's CL/cl.h (Debian: ocl-icd-opencl-dev,\n\
                 # opencl-c-headers).\n\
                 set -e\n\
                 cd \"$(dirname \"$0\")\"\n\
                 ${CC:-cc} -O2 -std=gnu11 -o repro repro.c -lOpenCL -lm\n"
        .to_string();
    (assemble(case, b, &target), build)
}
