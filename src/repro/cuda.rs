//! cuda pairs: OpenCL beside CUDA's driver API, NVRTC, cuBLAS and cuSOLVER (runtimes/cuda),
//! built with nvcc (the host code is C; the kernels are NVRTC's, from a string).

use crate::model::{Op, PathKind};

use super::ReproCase;
use super::emit::{Body, Target, assemble, section};

const CUDA: &str = include_str!("templates/cuda.c");

/// The cuda pairs' paths the generator covers.
pub(super) const PATHS: &[PathKind] = &[
    PathKind::Copy,
    PathKind::ClSvmCoarse,
    PathKind::ClSvmFine,
    PathKind::PinnedUseHostPtr,
    PathKind::DeviceUseHostPtr,
    PathKind::ManagedUseHostPtr,
    PathKind::DevicePtrAsClArg,
    PathKind::ClSvmCoarseMemcpy,
    PathKind::ClSvmFineMemcpy,
];

/// The cuda pairs' ops the generator covers.
pub(super) const OPS: &[Op] = &[Op::Handoff, Op::Fft, Op::Pipeline, Op::Gemm, Op::Cholesky];

/// The program and its build script.
pub(super) fn program(case: &ReproCase, b: &Body) -> (String, String) {
    let mut includes = section(CUDA, "includes").to_string();
    let mut libs = String::from("-lcuda -lnvrtc -lOpenCL");
    let mut more_names = String::new();
    if b.blas {
        includes.push_str(section(CUDA, "include_cublas"));
        libs.push_str(" -lcublas");
        more_names.push_str(
            "    if (api == CUBLAS)\n        name = cublasGetStatusName((cublasStatus_t)code);\n",
        );
    }
    if b.solver {
        includes.push_str(section(CUDA, "include_cusolver"));
        libs.push_str(" -lcusolver");
    }
    let check = section(CUDA, "check").replace("    /*@@ more names @@*/\n", &more_names);
    let mut peer = section(CUDA, "cuda_peer").to_string();
    if case.op == Op::Handoff {
        peer.push_str(section(CUDA, "cuda_pattern"));
    }
    if case.op == Op::Pipeline {
        peer.push_str(section(CUDA, "cuda_elementwise"));
    }
    if b.blas {
        peer.push_str(section(CUDA, "cublas"));
    }
    if b.solver {
        peer.push_str(section(CUDA, "cusolver"));
    }
    let target = Target {
        includes,
        check,
        constants: format!("enum {{ CUDA_ORDINAL = {} }};\n", case.peer.ordinal),
        peer,
        cuda: true,
    };
    let build = format!(
        "#!/bin/sh\n\
         # CUDA's driver API, NVRTC{} and the OpenCL ICD loader (CUDA's lib64 has libOpenCL.so).\n\
         # The program declares what it uses of CL/cl.h itself. Running it needs NVIDIA's OpenCL\n\
         # ICD registered (/etc/OpenCL/vendors/nvidia.icd, or OCL_ICD_VENDORS naming a directory\n\
         # with an .icd file that says libnvidia-opencl.so.1).\n\
         set -e\n\
         cd \"$(dirname \"$0\")\"\n\
         NVCC=${{NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}}\n\
         \"$NVCC\" -O2 -o repro repro.c {libs} -lm\n",
        match (b.blas, b.solver) {
            (true, _) => ", cuBLAS",
            (_, true) => ", cuSOLVER",
            _ => "",
        }
    );
    (assemble(case, b, &target), build)
}
