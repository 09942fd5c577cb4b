// Forward complex FFT (sign -1, unnormalised: rustfft's Forward) for power-of-two sizes, as
// Stockham autosort passes (Govindaraju et al., "High performance discrete Fourier transforms
// on graphics processors", SC08). Each pass reads `in` and writes `out` (never the same
// memory); src/fft.rs plans the radices and ping-pongs between the caller's memory and a
// scratch buffer. A pass of radix R with span ns (the product of the radices already done):
//
//   work-item j in [0, n/R), k = j mod ns
//   v[r] = in[j + r*n/R] * tw[tw_off + (r-1)*ns + k]      (r >= 1; tw = exp(-2*pi*i*r*k/(ns*R)))
//   V    = DFT_R(v)
//   out[(j - k)*R + k + q*ns] = V[q]
//
// Twiddles come from the host (computed in f64, rounded once to float) because a float
// sincos on the device is too coarse at 2^22 for the rocFFT bound.
//
// OpenCL C 1.2, float only, no local memory and no barriers, so any work-group size the
// device and kernel allow is valid. Plain __global pointers: a buffer object or an SVM / raw
// device pointer both work as arguments. launch() rounds the global size up, so every kernel
// bounds-checks j against n/R.

inline float2 clhip_cmul(float2 a, float2 b)
{
    return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// -i * a
inline float2 clhip_mul_neg_i(float2 a)
{
    return (float2)(a.y, -a.x);
}

// In-place forward DFT of 4 points, natural order in and out.
inline void clhip_dft4(float2* a0, float2* a1, float2* a2, float2* a3)
{
    float2 t0 = *a0 + *a2;
    float2 t1 = *a0 - *a2;
    float2 t2 = *a1 + *a3;
    float2 t3 = clhip_mul_neg_i(*a1 - *a3);
    *a0 = t0 + t2;
    *a2 = t0 - t2;
    *a1 = t1 + t3;
    *a3 = t1 - t3;
}

__kernel void fft_radix2(__global const float2* in, __global float2* out,
                         __global const float2* tw, uint tw_off, uint n, uint ns)
{
    size_t gid = get_global_id(0);
    uint m = n >> 1;
    if (gid >= (size_t)m)
        return;
    uint j = (uint)gid;
    uint k = j & (ns - 1u);
    float2 v0 = in[j];
    float2 v1 = clhip_cmul(in[j + m], tw[tw_off + k]);
    uint o = ((j - k) << 1) + k;
    out[o] = v0 + v1;
    out[o + ns] = v0 - v1;
}

__kernel void fft_radix4(__global const float2* in, __global float2* out,
                         __global const float2* tw, uint tw_off, uint n, uint ns)
{
    size_t gid = get_global_id(0);
    uint m = n >> 2;
    if (gid >= (size_t)m)
        return;
    uint j = (uint)gid;
    uint k = j & (ns - 1u);
    __global const float2* w = tw + tw_off + k;
    float2 v0 = in[j];
    float2 v1 = clhip_cmul(in[j + m], w[0]);
    float2 v2 = clhip_cmul(in[j + 2u * m], w[ns]);
    float2 v3 = clhip_cmul(in[j + 3u * m], w[2u * ns]);
    clhip_dft4(&v0, &v1, &v2, &v3);
    uint o = ((j - k) << 2) + k;
    out[o] = v0;
    out[o + ns] = v1;
    out[o + 2u * ns] = v2;
    out[o + 3u * ns] = v3;
}

__kernel void fft_radix8(__global const float2* in, __global float2* out,
                         __global const float2* tw, uint tw_off, uint n, uint ns)
{
    size_t gid = get_global_id(0);
    uint m = n >> 3;
    if (gid >= (size_t)m)
        return;
    uint j = (uint)gid;
    uint k = j & (ns - 1u);
    __global const float2* w = tw + tw_off + k;
    float2 v0 = in[j];
    float2 v1 = clhip_cmul(in[j + m], w[0]);
    float2 v2 = clhip_cmul(in[j + 2u * m], w[ns]);
    float2 v3 = clhip_cmul(in[j + 3u * m], w[2u * ns]);
    float2 v4 = clhip_cmul(in[j + 4u * m], w[3u * ns]);
    float2 v5 = clhip_cmul(in[j + 5u * m], w[4u * ns]);
    float2 v6 = clhip_cmul(in[j + 6u * m], w[5u * ns]);
    float2 v7 = clhip_cmul(in[j + 7u * m], w[6u * ns]);
    // Even and odd halves as two DFT4s, then X[q] = E[q] + W8^q O[q], X[q+4] = E[q] - W8^q O[q].
    clhip_dft4(&v0, &v2, &v4, &v6);
    clhip_dft4(&v1, &v3, &v5, &v7);
    const float r = 0.70710678118654752440f;
    float2 o1 = (float2)((v3.x + v3.y) * r, (v3.y - v3.x) * r);   // W8^1 = (1 - i)/sqrt(2)
    float2 o2 = clhip_mul_neg_i(v5);                               // W8^2 = -i
    float2 o3 = (float2)((v7.y - v7.x) * r, -(v7.x + v7.y) * r);  // W8^3 = -(1 + i)/sqrt(2)
    uint o = ((j - k) << 3) + k;
    out[o] = v0 + v1;
    out[o + ns] = v2 + o1;
    out[o + 2u * ns] = v4 + o2;
    out[o + 3u * ns] = v6 + o3;
    out[o + 4u * ns] = v0 - v1;
    out[o + 5u * ns] = v2 - o1;
    out[o + 6u * ns] = v4 - o2;
    out[o + 7u * ns] = v6 - o3;
}
