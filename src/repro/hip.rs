//! hip pairs: OpenCL beside HIP's runtime API, hiprtc, rocBLAS and rocSOLVER (runtimes/hip),
//! built with hipcc as C (the kernels are hiprtc's, from a string). Written from the headers
//! and from runtimes/hip; none has run on AMD hardware.

use crate::model::Op;

use super::ReproCase;
use super::device::{DeviceApi, target};
use super::emit::{Body, Dialect, assemble};

/// The hip pairs' ops the generator covers: those of the cuda pairs.
pub(super) const OPS: &[Op] = super::cuda::OPS;

pub(super) const API: DeviceApi = DeviceApi {
    template: include_str!("templates/hip.c"),
    dialect: Dialect {
        tag: "HIP",
        decl: "void *{p};",
        addr: "(uintptr_t){p}",
        as_void: "{p}",
        svm_arg: "{p}",
        alloc: "hipMalloc({p}, {bytes})",
        alloc_managed: "hipMallocManaged({p}, {bytes}, hipMemAttachGlobal)",
        // clhip calls hipExtHostAlloc (same flags) where a libamdhip64 exports it; none
        // released was found to, and only ROCm 6.3+ headers declare it.
        alloc_pinned: "hipHostMalloc({p}, {bytes}, hipHostMallocPortable | hipHostMallocMapped)",
        free: "hipFree({p})",
        free_pinned: "hipHostFree({p})",
        memcpy: "hipMemcpy({dst}, {src}, {bytes}, hipMemcpyDefault)",
        vmm_export: "CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR",
    },
    rtc: "HIPRTC",
    blas: "ROCBLAS",
    solver: "ROCBLAS",
    rtc_name: "    if (api == HIPRTC)\n        name = hiprtcGetErrorString((hiprtcResult)code);\n",
    blas_name: "    if (api == ROCBLAS)\n        name = rocblas_status_to_string((rocblas_status)code);\n",
    solver_name: "    if (api == ROCBLAS)\n        name = rocblas_status_to_string((rocblas_status)code);\n",
    solver_uses_blas: true,
    source_name: "PEER_SOURCE",
};

/// The program and its build script.
pub(super) fn program(case: &ReproCase, b: &Body) -> (String, String) {
    let mut libs = String::new();
    if b.blas || b.solver {
        libs.push_str(" -lrocblas");
    }
    if b.solver {
        libs.push_str(" -lrocsolver");
    }
    if super::interop::opens_libraries(&b.common) {
        libs.push_str(" -ldl");
    }
    let build = format!(
        "#!/bin/sh\n\
         # HIP's runtime API{} and the OpenCL ICD loader, with hipcc as C (-D__HIP_PLATFORM_AMD__:\n\
         # hipcc defines it for HIP sources only). CL/cl.h: ROCm's include directory, or\n\
         # opencl-c-headers. hiprtc is a library of its own from ROCm 5.3; before, libamdhip64.\n\
         set -e\n\
         cd \"$(dirname \"$0\")\"\n\
         ROCM=${{ROCM_PATH:-/opt/rocm}}\n\
         HIPCC=${{HIPCC:-$(command -v hipcc || echo \"$ROCM/bin/hipcc\")}}\n\
         HIPRTC=$(ls \"$ROCM\"/lib/libhiprtc.so >/dev/null 2>&1 && echo -lhiprtc || true)\n\
         \"$HIPCC\" -D__HIP_PLATFORM_AMD__ -O2 -std=gnu11 -o repro repro.c -L\"$ROCM/lib\" $HIPRTC{libs} -lOpenCL -lm\n",
        if b.solver {
            ", hiprtc, rocBLAS, rocSOLVER"
        } else if b.blas {
            ", hiprtc, rocBLAS"
        } else {
            ", hiprtc"
        }
    );
    (assemble(case, b, &target(&API, case, b)), build)
}
