#!/bin/sh
# OpenCL alone: the ICD loader and Khronos's CL/cl.h (CUDA's include directory has it; Debian:
# ocl-icd-opencl-dev, opencl-c-headers).
set -e
cd "$(dirname "$0")"
${CC:-cc} -O2 -std=gnu11 -o repro repro.c -lOpenCL
