// Elementwise complex-float kernels (interleaved float2 = re, im). OpenCL C 1.2; plain
// __global pointers so a buffer object or an SVM / raw device pointer both work. launch()
// rounds the global size up, so each kernel bounds-checks its id against `n`.

// out[i] = a[i] + b[i]. `out` may be the same memory as `a` (or `b`): each work-item reads its
// element before writing it, so no pointer is declared restrict.
__kernel void cadd(__global const float2* a, __global const float2* b, __global float2* out,
                   uint n)
{
    size_t i = get_global_id(0);
    if (i >= (size_t)n)
        return;
    out[i] = a[i] + b[i];
}

// x[i] *= s (both components), in place.
__kernel void cscale(__global float2* x, float s, uint n)
{
    size_t i = get_global_id(0);
    if (i >= (size_t)n)
        return;
    x[i] = x[i] * s;
}

// x[i] = (|x[i]|, 0), in place, as sqrt(re*re + im*im): no hypot-style rescaling, the inputs
// are small.
__kernel void cmagnitude(__global float2* x, uint n)
{
    size_t i = get_global_id(0);
    if (i >= (size_t)n)
        return;
    float2 v = x[i];
    x[i] = (float2)(sqrt(v.x * v.x + v.y * v.y), 0.0f);
}

// dst[i] = src[i].
__kernel void ccopy(__global const float2* src, __global float2* dst, uint n)
{
    size_t i = get_global_id(0);
    if (i >= (size_t)n)
        return;
    dst[i] = src[i];
}
