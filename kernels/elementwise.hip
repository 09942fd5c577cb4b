// Elementwise complex-float kernels for NVRTC and hiprtc (prelude.hip is prepended); the twins
// of kernels/elementwise.cl. float2 is the interleaved (re, im) of std::complex<float> and
// num_complex::Complex32.

// x[i] *= s (both components), in place.
CLHIP_KERNEL void clhip_cscale(float2* x, float s, clhip_u64 n)
{
    clhip_u64 i = clhip_gid();
    if (i >= n)
        return;
    float2 v = x[i];
    v.x *= s;
    v.y *= s;
    x[i] = v;
}

// x[i] = (|x[i]|, 0), in place, as sqrtf(re*re + im*im) like elementwise.cl: no hypot-style
// rescaling, the inputs are small.
CLHIP_KERNEL void clhip_cmagnitude(float2* x, clhip_u64 n)
{
    clhip_u64 i = clhip_gid();
    if (i >= n)
        return;
    float2 v = x[i];
    float2 m;
    m.x = sqrtf(v.x * v.x + v.y * v.y);
    m.y = 0.0f;
    x[i] = m;
}
