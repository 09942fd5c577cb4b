use super::*;
use crate::runtimes::opencl::unit_test_device;
use num_complex::{Complex32, Complex64};
use std::ffi::c_void;

// ---- plans (no device) ----

#[test]
fn plans_cover_every_size_with_an_even_pass_count_where_free() {
    for l in 0..=MAX_LOG2_N {
        let p = plan(1 << l).unwrap();
        let prod: u64 = p.passes.iter().map(|p| p.radix as u64).product();
        assert_eq!(prod, 1u64 << l, "l = {l}");
        let sweeps = p.passes.len() + p.final_copy as usize;
        // Never more sweeps than ceil(l/3) passes rounded up to even.
        let floor = (l as usize).div_ceil(3);
        assert!(sweeps <= floor + floor % 2, "l = {l}: {p:?}");
        assert_eq!(p.final_copy, p.passes.len() % 2 == 1);
        assert_eq!(twiddles(&p).len(), p.twiddles);
        assert!(p.twiddles <= 1 << l);
    }
    let p = plan(1 << 22).unwrap();
    assert_eq!(p.passes.len(), 8);
    assert!(!p.final_copy);
}

#[test]
fn bad_sizes_are_refused_cleanly() {
    for n in [0, 3, 6, 1000, MAX_N + 1, MAX_N * 2] {
        let e = plan(n).unwrap_err();
        assert_eq!(e.call, "clhip::fft::plan");
        assert_eq!(e.name, "CL_INVALID_VALUE");
        assert!(e.detail.contains(&format!("n = {n}")), "{e}");
        assert!(!supports(n));
    }
    assert!(supports(1) && supports(MAX_N));
}

// ---- device memory for tests: a buffer object, or fine / coarse SVM ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Buffer,
    SvmFine,
    SvmCoarse,
}

fn kinds(s: &ClSession) -> Vec<Kind> {
    let mut k = vec![Kind::Buffer];
    if s.svm.fine_grain_buffer {
        k.push(Kind::SvmFine);
    }
    if s.svm.coarse_grain_buffer {
        k.push(Kind::SvmCoarse);
    }
    k
}

struct DevMem {
    kind: Kind,
    mem: ClMem,
    bytes: usize,
    context: cl_context,
    _owned: Option<OwnedMem>,
}

impl DevMem {
    fn new(s: &ClSession, kind: Kind, bytes: usize) -> DevMem {
        use cl3::memory::{CL_MEM_READ_WRITE, CL_MEM_SVM_FINE_GRAIN_BUFFER, svm_alloc};
        let context = s.context.get();
        let (mem, owned) = match kind {
            Kind::Buffer => {
                let b =
                    create_buffer(context, CL_MEM_READ_WRITE, bytes, std::ptr::null_mut()).unwrap();
                (ClMem::Buffer(b.0), Some(b))
            }
            Kind::SvmFine | Kind::SvmCoarse => {
                let flags = if kind == Kind::SvmFine {
                    CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER
                } else {
                    CL_MEM_READ_WRITE
                };
                // SAFETY: valid context and flags.
                let p = unsafe { svm_alloc(context, flags, bytes, 0) }
                    .call("clSVMAlloc")
                    .unwrap();
                (ClMem::Svm(p), None)
            }
        };
        DevMem {
            kind,
            mem,
            bytes,
            context,
            _owned: owned,
        }
    }

    /// Host access to SVM: fine grain directly (the queue is idle), coarse grain inside a
    /// blocking map / unmap pair.
    fn with_svm<R>(&self, s: &ClSession, map_flags: u64, f: impl FnOnce(*mut c_void) -> R) -> R {
        let ClMem::Svm(p) = self.mem else {
            unreachable!()
        };
        s.finish().unwrap();
        if self.kind == Kind::SvmFine {
            return f(p);
        }
        let q = s.queue.get();
        // SAFETY: p is a live coarse SVM allocation of self.bytes bytes.
        unsafe {
            let ev = cl3::command_queue::enqueue_svm_map(
                q,
                cl3::types::CL_TRUE,
                map_flags,
                p,
                self.bytes,
                0,
                std::ptr::null(),
            )
            .call("clEnqueueSVMMap")
            .unwrap();
            drop(ClEvent(ev));
            let r = f(p);
            let ev = cl3::command_queue::enqueue_svm_unmap(q, p, 0, std::ptr::null())
                .call("clEnqueueSVMUnmap")
                .unwrap();
            drop(ClEvent(ev));
            s.finish().unwrap();
            r
        }
    }

    fn write<T: Copy>(&self, s: &ClSession, data: &[T]) {
        let bytes = std::mem::size_of_val(data);
        assert!(bytes <= self.bytes);
        match self.mem {
            // SAFETY: blocking write of `bytes` bytes from a live slice.
            ClMem::Buffer(m) => unsafe {
                let ev = cl3::command_queue::enqueue_write_buffer(
                    s.queue.get(),
                    m,
                    cl3::types::CL_TRUE,
                    0,
                    bytes,
                    data.as_ptr().cast(),
                    0,
                    std::ptr::null(),
                )
                .call("clEnqueueWriteBuffer")
                .unwrap();
                drop(ClEvent(ev));
            },
            ClMem::Svm(_) => self.with_svm(s, cl3::memory::CL_MAP_WRITE, |p| unsafe {
                // SAFETY: the SVM region holds at least `bytes` bytes and is host-accessible.
                std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), p.cast(), bytes)
            }),
        }
    }

    fn read<T: Copy + Default>(&self, s: &ClSession, len: usize) -> Vec<T> {
        let mut out = vec![T::default(); len];
        let bytes = std::mem::size_of_val(out.as_slice());
        assert!(bytes <= self.bytes);
        match self.mem {
            // SAFETY: blocking read of `bytes` bytes into a live slice.
            ClMem::Buffer(m) => unsafe {
                let ev = cl3::command_queue::enqueue_read_buffer(
                    s.queue.get(),
                    m,
                    cl3::types::CL_TRUE,
                    0,
                    bytes,
                    out.as_mut_ptr().cast(),
                    0,
                    std::ptr::null(),
                )
                .call("clEnqueueReadBuffer")
                .unwrap();
                drop(ClEvent(ev));
            },
            ClMem::Svm(_) => self.with_svm(s, cl3::memory::CL_MAP_READ, |p| unsafe {
                // SAFETY: as in write.
                std::ptr::copy_nonoverlapping(p.cast::<u8>(), out.as_mut_ptr().cast(), bytes)
            }),
        }
        out
    }
}

impl Drop for DevMem {
    fn drop(&mut self) {
        if let ClMem::Svm(p) = self.mem {
            // SAFETY: allocated by clSVMAlloc on this context; tests finish before dropping.
            unsafe {
                let _ = cl3::memory::svm_free(self.context, p);
            }
        }
    }
}

/// PoCL 3.1 initialises its devices lazily inside the first clGetDeviceIDs, and a second
/// thread querying a device meanwhile crashes (SIGSEGV in clGetDeviceInfo); tests run on
/// parallel threads, so this module's tests enumerate and open one at a time.
static OPEN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn session() -> ClSession {
    let _one_at_a_time = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    ClSession::open(unit_test_device()).unwrap_or_else(|e| panic!("ClSession::open: {e:?}"))
}

// ---- CPU side: the crate's generator, f64 reference and rocFFT bound ----

use crate::generate::{complex_vec as uniform, pattern_word as cpu_pattern_word};
use crate::reference::fft_forward as reference_fft;

/// The harness's FFT check (rocFFT's bounds); on a pass, its worst measured/bound ratio.
fn check(what: &str, got: &[Complex32], want: &[Complex64]) -> f64 {
    match crate::tolerance::check_fft(what, got, want) {
        Ok(summary) => summary.worst_ratio,
        Err(m) => panic!("{m}"),
    }
}

// ---- pattern ----

/// pattern_check (+ pattern_observe, + pattern_fill of `new`): (mismatches, first index),
/// after asserting the ran-marker and that the observed word is the one at the index.
fn run_pattern_check(
    s: &mut ClSession,
    p: &DevMem,
    seed: u32,
    words: u32,
    new: Option<u32>,
) -> (u32, u32) {
    let before: Vec<u32> = p.read(s, words as usize);
    let res = DevMem::new(s, Kind::Buffer, 16);
    res.write(s, &[0u32, 0xFFFF_FFFF, 0, 0]);
    s.launch(
        "pattern_check",
        words as usize,
        &[
            ClArg::Mem(p.mem),
            ClArg::U32(seed),
            ClArg::U32(words),
            ClArg::Mem(res.mem),
        ],
        &[],
    )
    .unwrap();
    s.launch(
        "pattern_observe",
        1,
        &[ClArg::Mem(p.mem), ClArg::U32(words), ClArg::Mem(res.mem)],
        &[],
    )
    .unwrap();
    if let Some(new) = new {
        s.launch(
            "pattern_fill",
            words as usize,
            &[ClArg::Mem(p.mem), ClArg::U32(new), ClArg::U32(words)],
            &[],
        )
        .unwrap();
    }
    s.finish().unwrap();
    let r: Vec<u32> = res.read(s, 4);
    assert_eq!(r[2], words, "ran-marker");
    if r[0] > 0 {
        assert_eq!(r[3], before[r[1] as usize], "observed word");
    }
    (r[0], r[1])
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn pattern_fill_and_check_match_the_cpu_twin() {
    let mut s = session();
    // Not a multiple of any work-group size, so the bounds checks matter.
    let words: u32 = 100_003;
    let (seed, seed2) = (0xC0FF_EE11, 7);
    for kind in kinds(&s) {
        let p = DevMem::new(&s, kind, words as usize * 4 + 64);
        // Sentinel past the end: the rounded-up global size must not write it.
        let sentinel = vec![0xDEAD_BEEFu32; words as usize + 16];
        p.write(&s, &sentinel);
        s.launch(
            "pattern_fill",
            words as usize,
            &[ClArg::Mem(p.mem), ClArg::U32(seed), ClArg::U32(words)],
            &[],
        )
        .unwrap()
        .wait()
        .unwrap();
        let got: Vec<u32> = p.read(&s, words as usize + 16);
        for i in 0..words {
            assert_eq!(
                got[i as usize],
                cpu_pattern_word(seed, i),
                "{kind:?} word {i}"
            );
        }
        assert!(
            got[words as usize..].iter().all(|&w| w == 0xDEAD_BEEF),
            "{kind:?}"
        );

        assert_eq!(
            run_pattern_check(&mut s, &p, seed, words, None),
            (0, u32::MAX),
            "{kind:?}"
        );
        // Plant one wrong word.
        let bad = 77_777usize;
        let mut planted = got[..words as usize].to_vec();
        planted[bad] ^= 1 << 9;
        p.write(&s, &planted);
        assert_eq!(
            run_pattern_check(&mut s, &p, seed, words, None),
            (1, bad as u32),
            "{kind:?}"
        );
        // Check-and-rewrite: still reports the planted word, then the memory holds seed2.
        assert_eq!(
            run_pattern_check(&mut s, &p, seed, words, Some(seed2)),
            (1, bad as u32),
            "{kind:?}"
        );
        assert_eq!(
            run_pattern_check(&mut s, &p, seed2, words, None),
            (0, u32::MAX),
            "{kind:?}"
        );
        let got: Vec<u32> = p.read(&s, words as usize);
        for i in 0..words {
            assert_eq!(
                got[i as usize],
                cpu_pattern_word(seed2, i),
                "{kind:?} word {i}"
            );
        }
        // The old pattern is now wrong everywhere (but for chance collisions).
        let (count, first) = run_pattern_check(&mut s, &p, seed, words, None);
        assert!(
            count > words - 10 && first < 10,
            "{kind:?}: {count} {first}"
        );
    }
}

#[test]
fn pattern_twin_known_values() {
    // fmix32(seed) for i = 0: MurmurHash3's finaliser of 0 is 0.
    assert_eq!(cpu_pattern_word(0, 0), 0);
    // Values computed independently (Python, mod 2^32).
    assert_eq!(cpu_pattern_word(1, 0), 0x514E_28B7);
    assert_eq!(cpu_pattern_word(0, 1), 0x11FD_02EB);
    assert_eq!(cpu_pattern_word(0xC0FF_EE11, 12345), 0x77B3_4CB9);
}

// ---- elementwise ----

fn close(a: Complex32, b: Complex32, what: &str, i: usize) {
    let tol = 4.0 * f32::EPSILON * (1.0 + b.re.abs().max(b.im.abs()));
    assert!(
        (a.re - b.re).abs() <= tol && (a.im - b.im).abs() <= tol,
        "{what}[{i}]: got {a} want {b}"
    );
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn elementwise_kernels_match_the_cpu() {
    let mut s = session();
    let n = 10_007usize;
    let a = uniform(1, n);
    let b = uniform(2, n);
    for kind in kinds(&s) {
        let bytes = n * ELEM + 64;
        let (da, db, dc) = (
            DevMem::new(&s, kind, bytes),
            DevMem::new(&s, kind, bytes),
            DevMem::new(&s, kind, bytes),
        );
        da.write(&s, &a);
        db.write(&s, &b);
        let tail = [Complex32::new(9.0, 9.0); 8];
        let mut c0 = vec![Complex32::new(9.0, 9.0); n];
        c0.extend_from_slice(&tail);
        dc.write(&s, &c0);
        let nn = ClArg::U32(n as u32);

        // cadd into a third array, then ccopy, then aliased cadd (out = a).
        s.launch(
            "cadd",
            n,
            &[
                ClArg::Mem(da.mem),
                ClArg::Mem(db.mem),
                ClArg::Mem(dc.mem),
                nn,
            ],
            &[],
        )
        .unwrap();
        s.finish().unwrap();
        let c: Vec<Complex32> = dc.read(&s, n + 8);
        for i in 0..n {
            close(c[i], a[i] + b[i], &format!("{kind:?} cadd"), i);
        }
        assert_eq!(&c[n..], &tail, "{kind:?}: cadd wrote past n");

        s.launch(
            "ccopy",
            n,
            &[ClArg::Mem(db.mem), ClArg::Mem(dc.mem), nn],
            &[],
        )
        .unwrap();
        s.finish().unwrap();
        let c: Vec<Complex32> = dc.read(&s, n + 8);
        assert_eq!(&c[..n], &b[..], "{kind:?} ccopy");
        assert_eq!(&c[n..], &tail, "{kind:?}: ccopy wrote past n");

        s.launch(
            "cadd",
            n,
            &[
                ClArg::Mem(da.mem),
                ClArg::Mem(db.mem),
                ClArg::Mem(da.mem),
                nn,
            ],
            &[],
        )
        .unwrap();
        s.finish().unwrap();
        let sum: Vec<Complex32> = da.read(&s, n);
        for i in 0..n {
            close(sum[i], a[i] + b[i], &format!("{kind:?} cadd aliased"), i);
        }

        let k = -1.75f32;
        s.launch("cscale", n, &[ClArg::Mem(da.mem), ClArg::F32(k), nn], &[])
            .unwrap();
        s.finish().unwrap();
        let sc: Vec<Complex32> = da.read(&s, n);
        for i in 0..n {
            close(sc[i], sum[i] * k, &format!("{kind:?} cscale"), i);
        }

        s.launch("cmagnitude", n, &[ClArg::Mem(da.mem), nn], &[])
            .unwrap();
        s.finish().unwrap();
        let m: Vec<Complex32> = da.read(&s, n);
        for i in 0..n {
            let want = (sc[i].re as f64).hypot(sc[i].im as f64) as f32;
            close(
                m[i],
                Complex32::new(want, 0.0),
                &format!("{kind:?} cmagnitude"),
                i,
            );
            assert_eq!(m[i].im, 0.0);
        }
    }
}

// ---- FFT ----

fn fft_on(s: &mut ClSession, kind: Kind, input: &[Complex32]) -> Vec<Complex32> {
    let n = input.len();
    let d = DevMem::new(s, kind, n * ELEM);
    d.write(s, input);
    let fft = ClFft::new(s, n).unwrap();
    fft.forward(s, d.mem, &[]).unwrap().wait().unwrap();
    d.read(s, n)
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn fft_matches_rustfft_f64_for_every_power_of_two_to_2_16() {
    let mut s = session();
    let mut worst = Vec::new();
    for l in 0..=16u32 {
        let n = 1usize << l;
        let input = uniform(100 + l as u64, n);
        let got = fft_on(&mut s, Kind::Buffer, &input);
        worst.push(check(&format!("n = {n}"), &got, &reference_fft(&input)));
    }
    eprintln!("fft worst error/bound for n = 2^0..=2^16: {worst:.3?}");
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn fft_works_on_svm_and_is_exact_for_n_1() {
    let mut s = session();
    for kind in kinds(&s) {
        for n in [1usize, 2, 8, 32, 1 << 11, 1 << 15] {
            let input = uniform(n as u64, n);
            let got = fft_on(&mut s, kind, &input);
            if n == 1 {
                assert_eq!(got, input, "{kind:?}");
            }
            check(&format!("{kind:?} n = {n}"), &got, &reference_fft(&input));
        }
    }
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn fft_plan_is_reused_and_waits_on_the_given_events() {
    let mut s = session();
    let n = 4096;
    let input = uniform(5, n);
    let want = reference_fft(&input);
    let d = DevMem::new(&s, Kind::Buffer, n * ELEM);
    let mut cache = FftCache::default();
    for round in 0..3 {
        // Fill on the device (pattern-free: copy from a second buffer), then FFT after it.
        let src = DevMem::new(&s, Kind::Buffer, n * ELEM);
        src.write(&s, &input);
        let copy = s
            .launch(
                "ccopy",
                n,
                &[ClArg::Mem(src.mem), ClArg::Mem(d.mem), ClArg::U32(n as u32)],
                &[],
            )
            .unwrap();
        let ev = cache.forward(&mut s, d.mem, n, &[copy.0]).unwrap();
        ev.wait().unwrap();
        let got: Vec<Complex32> = d.read(&s, n);
        check(&format!("round {round}"), &got, &want);
    }
    let first = cache.get(&s, n).unwrap() as *const ClFft;
    assert_eq!(
        first,
        cache.get(&s, n).unwrap() as *const ClFft,
        "same n re-planned"
    );
    assert_eq!(cache.get(&s, 8).unwrap().n(), 8);
    // One-shot form, and the refusals.
    forward(&mut s, d.mem, n, &[]).unwrap().wait().unwrap();
    let e = forward(&mut s, d.mem, 12, &[]).err().unwrap();
    assert_eq!(e.call, "clhip::fft::plan");
    let small = DevMem::new(&s, Kind::Buffer, 64);
    let e = ClFft::new(&s, n)
        .unwrap()
        .forward(&mut s, small.mem, &[])
        .err()
        .unwrap();
    assert_eq!(e.name, "CL_INVALID_BUFFER_SIZE", "{e}");
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn fft_check_rejects_a_planted_error_at_its_index() {
    let mut s = session();
    let n = 1 << 12;
    let input = uniform(9, n);
    let mut got = fft_on(&mut s, Kind::Buffer, &input);
    let want = reference_fft(&input);
    check("clean", &got, &want);
    let bad = 1234;
    // A small error: twice the Linf bound (eps_p * ||ref||_inf * ln N, ~3e-4 of the largest
    // output), far below anything visible by eye.
    let bound = crate::tolerance::fft_linf_bound(&want);
    got[bad].im += (2.0 * bound) as f32;
    let m = crate::tolerance::check_fft("planted", &got, &want).unwrap_err();
    assert_eq!((m.index, m.count), (bad, 1), "{m}");
    // And a NaN is caught too.
    got[bad] = Complex32::new(f32::NAN, 0.0);
    let m = crate::tolerance::check_fft("planted NaN", &got, &want).unwrap_err();
    assert_eq!((m.index, m.count), (bad, 1), "{m}");
}

/// 2^22 (the pipeline's size, docs/domain.md#the-mi100-notes). Ignored in debug builds, where the f64 reference and the host
/// twiddles are slow (~10 s); `cargo test --release` runs it (~3 s on a 2-core PoCL).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow in debug; run with cargo test --release"
)]
#[cfg_attr(
    all(not(debug_assertions), not(clhip_test_opencl)),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn fft_2_22_matches_rustfft_and_times_it() {
    let mut s = session();
    let n = MAX_N;
    let input = uniform(22, n);
    let d = DevMem::new(&s, Kind::Buffer, n * ELEM);
    d.write(&s, &input);
    let t = std::time::Instant::now();
    let fft = ClFft::new(&s, n).unwrap();
    let t_plan = t.elapsed();
    let t = std::time::Instant::now();
    fft.forward(&mut s, d.mem, &[]).unwrap().wait().unwrap();
    let t_first = t.elapsed();
    let got: Vec<Complex32> = d.read(&s, n);
    let worst = check("n = 2^22", &got, &reference_fft(&input));
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = std::time::Instant::now();
        fft.forward(&mut s, d.mem, &[]).unwrap().wait().unwrap();
        times.push(t.elapsed().as_secs_f64());
    }
    eprintln!(
        "fft 2^22 on {}: worst error/bound {worst:.3}; plan+upload {:.3} s, first {:.3} s, then {:?} s",
        s.device.name,
        t_plan.as_secs_f64(),
        t_first.as_secs_f64(),
        times
    );
}

/// A launch may pass a buffer where an earlier launch of the same kernel passed an SVM
/// pointer, and back: the FFT's ping-pong does exactly that when the caller's memory is SVM.
/// NVIDIA OpenCL 3.0 (driver 580, H200) answered CL_INVALID_KERNEL_ARGS to every launch
/// that set a cl_mem on an argument index once set with clSetKernelArgSVMPointer on the
/// same kernel object, until launch() kept one kernel object per argument-kind signature.
#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn kernel_arguments_switch_between_buffer_and_svm() {
    let mut s = session();
    let Some(&svm) = kinds(&s).last().filter(|k| **k != Kind::Buffer) else {
        eprintln!("skipping: no SVM");
        return;
    };
    let n = 1024usize;
    let input = uniform(3, n);
    let (ba, bb) = (
        DevMem::new(&s, Kind::Buffer, n * ELEM),
        DevMem::new(&s, Kind::Buffer, n * ELEM),
    );
    let (sa, sb) = (
        DevMem::new(&s, svm, n * ELEM),
        DevMem::new(&s, svm, n * ELEM),
    );
    let steps: [(&str, &DevMem, &DevMem); 8] = [
        ("buf->buf", &ba, &bb),
        ("svm->svm", &sa, &sb),
        ("buf->buf", &ba, &bb),
        ("svm->buf", &sa, &bb),
        ("buf->svm", &ba, &sb),
        ("buf->buf", &ba, &bb),
        ("svm->svm", &sa, &sb),
        ("svm->buf", &sa, &bb),
    ];
    for (what, x, y) in steps {
        x.write(&s, &input);
        y.write(&s, &vec![Complex32::new(0.0, 0.0); n]);
        s.launch(
            "ccopy",
            n,
            &[ClArg::Mem(x.mem), ClArg::Mem(y.mem), ClArg::U32(n as u32)],
            &[],
        )
        .unwrap_or_else(|e| panic!("ccopy {what} ({svm:?}): {e}"));
        s.finish().unwrap();
        let got: Vec<Complex32> = y.read(&s, n);
        assert_eq!(got, input, "ccopy {what} ({svm:?})");
    }
}
