//! cuda pairs: OpenCL beside CUDA's driver API, NVRTC, cuBLAS and cuSOLVER (runtimes/cuda),
//! built with nvcc (the host code is C; the kernels are NVRTC's, from a string).

use crate::model::Op;

use super::ReproCase;
use super::device::{DeviceApi, target};
use super::emit::{Body, Dialect, assemble};

/// The cuda pairs' ops the generator covers.
pub(super) const OPS: &[Op] = &[
    Op::Handoff,
    Op::Fft,
    Op::Pipeline,
    Op::Gemm,
    Op::Cholesky,
    Op::Placement,
    Op::Reuse,
];

pub(super) const API: DeviceApi = DeviceApi {
    template: include_str!("templates/cuda.c"),
    dialect: Dialect {
        tag: "CU",
        decl: "CUdeviceptr {p};",
        addr: "{p}",
        as_void: "(void *)(uintptr_t){p}",
        svm_arg: "(CUdeviceptr)(uintptr_t){p}",
        alloc: "cuMemAlloc({p}, {bytes})",
        alloc_managed: "cuMemAllocManaged({p}, {bytes}, CU_MEM_ATTACH_GLOBAL)",
        alloc_pinned: "cuMemHostAlloc({p}, {bytes}, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)",
        free: "cuMemFree({p})",
        free_pinned: "cuMemFreeHost({p})",
        memcpy: "cuMemcpy({dst}, {src}, {bytes})",
        vmm_export: "CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR",
    },
    rtc: "NVRTC",
    blas: "CUBLAS",
    solver: "CUSOLVER",
    rtc_name: "    if (api == NVRTC)\n        name = nvrtcGetErrorString((nvrtcResult)code);\n",
    blas_name: "    if (api == CUBLAS)\n        name = cublasGetStatusName((cublasStatus_t)code);\n",
    solver_name: "",
    solver_uses_blas: false,
    source_name: "PEER_SOURCE",
};

/// The program and its build script.
pub(super) fn program(case: &ReproCase, b: &Body) -> (String, String) {
    let mut libs = String::from("-lcuda");
    if !b.peer_kernels.is_empty() {
        libs.push_str(" -lnvrtc");
    }
    if b.blas {
        libs.push_str(" -lcublas");
    }
    if b.solver {
        libs.push_str(" -lcusolver");
    }
    if super::interop::opens_libraries(&b.common) {
        libs.push_str(" -ldl");
    }
    let build = format!(
        "#!/bin/sh\n\
         # CUDA's driver API ({libs}) and the OpenCL ICD loader; CUDA's include directory has\n\
         # CL/cl.h and its lib64 libOpenCL.so. Running it needs NVIDIA's OpenCL ICD registered\n\
         # (/etc/OpenCL/vendors/nvidia.icd, or OCL_ICD_VENDORS naming a directory with an .icd\n\
         # file that says libnvidia-opencl.so.1).\n\
         set -e\n\
         cd \"$(dirname \"$0\")\"\n\
         NVCC=${{NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}}\n\
         \"$NVCC\" -O2 -o repro repro.c {libs} -lOpenCL -lm\n"
    );
    (assemble(case, b, &target(&API, case, b)), build)
}
