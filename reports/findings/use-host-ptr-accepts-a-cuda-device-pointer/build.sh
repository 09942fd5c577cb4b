#!/bin/sh
# CUDA's driver API (-lcuda -lnvrtc) and the OpenCL ICD loader; CUDA's include directory has
# CL/cl.h and its lib64 libOpenCL.so. Running it needs NVIDIA's OpenCL ICD registered
# (/etc/OpenCL/vendors/nvidia.icd, or OCL_ICD_VENDORS naming a directory with an .icd
# file that says libnvidia-opencl.so.1).
set -e
cd "$(dirname "$0")"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" -O2 -o repro repro.c -lcuda -lnvrtc -lOpenCL -lm
