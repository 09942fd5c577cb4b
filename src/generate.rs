//! Seeded, reproducible inputs for every op, usable from property tests and from the runner.
//!
//! Each generator is a proptest [`Strategy`] whose value is drawn directly from the runner's
//! [`TestRng`] in bulk (one ChaCha keystream fill per 32 KiB, never one `Strategy` call per
//! element), so 4,194,304 complex values cost one pass over 32 MiB of keystream. The runner's
//! plain functions (`complex_vec(seed, n)`, ...) draw from the same strategy with a ChaCha
//! [`TestRng`] keyed by the seed, so a case is reproducible from `(generator, seed, shape)` on any
//! machine: the keystream is RFC 8439 ChaCha20, every byte-to-value conversion below is exact
//! integer or power-of-two arithmetic, and the one computed input (HPD matrices) is exact too, so
//! nothing depends on the host's float behaviour, thread count or SIMD width.
//!
//! Shrinking only ever makes inputs smaller (shorter vectors, leading submatrices); the values of
//! the elements that remain are those of the original draw.

use faer::{Accum, Mat, MatRef, Par, c64};
use num_complex::Complex32;
use proptest::collection::SizeRange;
use proptest::prelude::{Just, Rng, Strategy, prop_oneof};
use proptest::strategy::{NewTree, ValueTree};
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

/// What a matrix generator writes into rows `rows..lda` of each column. Finite, so that a routine
/// that reads padding produces results ~1e30 (or inf once squared) that every check flags, rather
/// than a NaN some code paths would treat specially; never a value any generator draws.
pub const PAD: f32 = 1e30;

/// [`PAD`] in both components.
pub const PAD_C: Complex32 = Complex32::new(PAD, PAD);

/// The MI100 notes' vector length (docs/domain.md#the-mi100-notes): 2^22 complex elements, 32 MiB of complex f32.
pub const SEED_LEN: usize = 4_194_304;

/// Separates the keystreams of different generators, so that e.g. `matrix(s, ..)` and
/// `complex_vec(s, ..)` are not the same numbers. Changing a tag, or [`KEY_VERSION`], changes the
/// data of every case that uses it: recorded failures would no longer reproduce.
#[derive(Clone, Copy)]
enum Stream {
    ComplexVec,
    Matrix,
    IntegerMatrix,
    Hpd,
    NonHpd,
}

const KEY_VERSION: &[u8; 16] = b"clhip/generate/1";

impl Stream {
    fn tag(self) -> &'static [u8; 8] {
        match self {
            Stream::ComplexVec => b"cvec\0\0\0\0",
            Stream::Matrix => b"mat\0\0\0\0\0",
            Stream::IntegerMatrix => b"imat\0\0\0\0",
            Stream::Hpd => b"hpd\0\0\0\0\0",
            Stream::NonHpd => b"nonhpd\0\0",
        }
    }
}

/// The ChaCha key is `seed (LE) | stream tag | version`; the keystream is plain RFC 8439 ChaCha20
/// with a zero nonce and block counter from 0, so another tool can regenerate a case's inputs
/// from the seed printed in a report (a test pins values computed that way in Python).
fn seeded_rng(seed: u64, stream: Stream) -> TestRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(stream.tag());
    key[16..].copy_from_slice(KEY_VERSION);
    TestRng::from_seed(RngAlgorithm::ChaCha, &key)
}

/// Uniform in `lo..=hi` by a widening multiply rather than rand's range sampling, whose algorithm
/// is free to change between rand versions. The bias is below 2^-32 for any range used here.
/// Consumes nothing when the range is a single value, so a fixed-size draw has the same keystream
/// as its data alone.
fn draw_in(rng: &mut TestRng, lo: usize, hi: usize) -> usize {
    if lo >= hi {
        return lo;
    }
    let span = (hi - lo) as u128 + 1;
    lo + ((u128::from(rng.next_u64()) * span) >> 64) as usize
}

fn draw_size(rng: &mut TestRng, range: &SizeRange) -> usize {
    let (lo, hi) = range.start_end_incl();
    draw_in(rng, lo, hi)
}

/// Fills `out` from the keystream, 8 bytes per element (re then im, little-endian u32 each), in
/// order. Fills are whole words, so consecutive calls read the same keystream as one call over
/// the concatenation: `complex_vec(s, n)` is a prefix of `complex_vec(s, m)` for n <= m.
fn fill_complex(rng: &mut TestRng, out: &mut [Complex32], value: impl Fn(u32) -> f32) {
    const CHUNK: usize = 4096;
    let mut bytes = [0u8; 8 * CHUNK];
    for dst in out.chunks_mut(CHUNK) {
        let used = &mut bytes[..8 * dst.len()];
        rng.fill_bytes(used);
        let (words, _) = used.as_chunks::<4>();
        for (z, w) in dst.iter_mut().zip(words.chunks_exact(2)) {
            *z = Complex32::new(
                value(u32::from_le_bytes(w[0])),
                value(u32::from_le_bytes(w[1])),
            );
        }
    }
}

/// The top 24 bits as a multiple of 2^-24 in [0, 1), shifted: every value in [-0.5, 0.5) is
/// exact in f32, so the conversion cannot differ between machines.
fn uniform_half(x: u32) -> f32 {
    (x >> 8) as f32 * (1.0 / 16_777_216.0) - 0.5
}

/// Integers 1..=10, so that cgemm sums stay exact in f32 while |sum| < 2^24 (k < 83,886 with
/// alpha = 1, beta = 0): rocBLAS clients' convention for exact comparison.
fn integer_1_to_10(x: u32) -> f32 {
    ((u64::from(x) * 10) >> 32) as f32 + 1.0
}

/// Multiples of 1/16 in [-0.5, 0.5]. Products of two are multiples of 2^-8, so B*B^H is exact in
/// f64 whatever order faer sums in (threads, SIMD width, FMA), and still exact after rounding to
/// f32 while its entries stay below 2^15 (n < 43,690). That makes HPD inputs bit-reproducible.
fn sixteenth(x: u32) -> f32 {
    ((u64::from(x) * 17) >> 32) as f32 / 16.0 - 0.5
}

/// A binary search from a value down towards a minimum, as proptest shrinks integers: `simplify`
/// halves the distance to the last value that still failed, `complicate` backs off after one
/// that passed.
#[derive(Clone, Debug)]
struct Shrink {
    lo: usize,
    curr: usize,
    hi: usize,
}

impl Shrink {
    fn new(min: usize, value: usize) -> Self {
        let lo = min.min(value);
        Shrink {
            lo,
            curr: value,
            hi: value,
        }
    }

    fn simplify(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.hi = self.curr;
        self.reposition()
    }

    fn complicate(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.lo = self.curr + 1;
        self.reposition()
    }

    fn reposition(&mut self) -> bool {
        let mid = self.lo + (self.hi - self.lo) / 2;
        if mid == self.curr {
            false
        } else {
            self.curr = mid;
            true
        }
    }
}

/// Complex f32 vectors with re and im uniform in [-0.5, 0.5) (rocFFT accuracy_test's input range).
#[derive(Clone, Debug)]
pub struct ComplexVecStrategy {
    len: SizeRange,
}

impl ComplexVecStrategy {
    /// One draw: the length, then the elements.
    pub fn draw(&self, rng: &mut TestRng) -> Vec<Complex32> {
        let n = draw_size(rng, &self.len);
        let mut v = vec![Complex32::new(0.0, 0.0); n];
        fill_complex(rng, &mut v, uniform_half);
        v
    }
}

/// Shrinks by truncation: the shortest prefix that still fails.
#[derive(Clone, Debug)]
pub struct ComplexVecTree {
    data: Vec<Complex32>,
    len: Shrink,
}

impl Strategy for ComplexVecStrategy {
    type Tree = ComplexVecTree;
    type Value = Vec<Complex32>;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let data = self.draw(runner.rng());
        let len = Shrink::new(self.len.start(), data.len());
        Ok(ComplexVecTree { data, len })
    }
}

impl ValueTree for ComplexVecTree {
    type Value = Vec<Complex32>;

    fn current(&self) -> Vec<Complex32> {
        self.data[..self.len.curr].to_vec()
    }
    fn simplify(&mut self) -> bool {
        self.len.simplify()
    }
    fn complicate(&mut self) -> bool {
        self.len.complicate()
    }
}

pub fn complex_vec_strategy(len: impl Into<SizeRange>) -> ComplexVecStrategy {
    ComplexVecStrategy { len: len.into() }
}

/// `n` complex values with re, im uniform in [-0.5, 0.5). Same seed, same data, on any machine;
/// `complex_vec(s, n)` is a prefix of `complex_vec(s, m)` for n <= m.
pub fn complex_vec(seed: u64, n: usize) -> Vec<Complex32> {
    complex_vec_strategy(n).draw(&mut seeded_rng(seed, Stream::ComplexVec))
}

/// FFT lengths: 1 (the identity transform), small odd sizes (radix 3/5/7 and prime paths),
/// powers of two up to 2^16, small mixed-radix sizes, and the pipeline's 4,194,304 at low weight
/// (about one case in twenty) so property runs stay fast. Shrinks towards 1.
pub fn size_strategy() -> impl Strategy<Value = usize> + Clone {
    prop_oneof![
        2 => Just(1usize),
        5 => (1usize..=63).prop_map(|k| 2 * k + 1),
        8 => pow2_size_strategy(16),
        4 => (0u32..=4, 0u32..=3, 0u32..=2, 0u32..=1)
            .prop_map(|(a, b, c, d)| 2usize.pow(a) * 3usize.pow(b) * 5usize.pow(c) * 7usize.pow(d)),
        1 => Just(SEED_LEN),
    ]
}

/// `2^k` for k in `0..=max_log2`; shrinks towards 1.
///
/// # Panics
/// If `2^max_log2` does not fit in usize.
pub fn pow2_size_strategy(max_log2: u32) -> impl Strategy<Value = usize> + Clone {
    assert!(max_log2 < usize::BITS, "2^{max_log2} overflows usize");
    (0..=max_log2).prop_map(|k| 1usize << k)
}

/// A column-major complex matrix as BLAS/LAPACK see it: element (i, j) at `data[i + j * lda]`,
/// rows `rows..lda` of each column are [`PAD_C`].
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub lda: usize,
    pub data: Vec<Complex32>,
}

impl Matrix {
    fn padded(rows: usize, cols: usize, lda: usize) -> Self {
        assert!(lda >= rows.max(1), "lda {lda} < max(rows {rows}, 1)");
        Matrix {
            rows,
            cols,
            lda,
            data: vec![PAD_C; lda * cols],
        }
    }

    pub fn get(&self, i: usize, j: usize) -> Complex32 {
        self.data[i + j * self.lda]
    }

    /// The leading `rows x cols` block with the same amount of padding per column: what a
    /// shrunk case sees. A leading principal block of an HPD matrix is HPD.
    fn leading(&self, rows: usize, cols: usize) -> Matrix {
        let pad = self.lda - self.rows;
        let mut m = Matrix::padded(rows, cols, (rows + pad).max(1));
        for j in 0..cols {
            let src = &self.data[j * self.lda..j * self.lda + rows];
            m.data[j * m.lda..j * m.lda + rows].copy_from_slice(src);
        }
        m
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entries {
    Uniform,
    Integer,
}

/// General matrices, uniform or integer entries; see [`matrix_strategy`].
#[derive(Clone, Debug)]
pub struct MatrixStrategy {
    rows: SizeRange,
    cols: SizeRange,
    pad: SizeRange,
    entries: Entries,
}

impl MatrixStrategy {
    /// One draw: rows, cols, padding, then the entries column by column. The entries do not
    /// depend on the padding: the same seed and shape give the same matrix at any lda.
    pub fn draw(&self, rng: &mut TestRng) -> Matrix {
        let rows = draw_size(rng, &self.rows);
        let cols = draw_size(rng, &self.cols);
        let pad = draw_size(rng, &self.pad);
        self.fill(rng, rows, cols, (rows + pad).max(1))
    }

    fn fill(&self, rng: &mut TestRng, rows: usize, cols: usize, lda: usize) -> Matrix {
        let mut m = Matrix::padded(rows, cols, lda);
        let value = match self.entries {
            Entries::Uniform => uniform_half,
            Entries::Integer => integer_1_to_10,
        };
        for j in 0..cols {
            fill_complex(rng, &mut m.data[j * lda..j * lda + rows], value);
        }
        m
    }
}

/// Shrinks rows first, then columns, keeping the leading block.
#[derive(Clone, Debug)]
pub struct MatrixTree {
    full: Matrix,
    rows: Shrink,
    cols: Shrink,
    on_cols: bool,
}

impl Strategy for MatrixStrategy {
    type Tree = MatrixTree;
    type Value = Matrix;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let full = self.draw(runner.rng());
        Ok(MatrixTree {
            rows: Shrink::new(self.rows.start(), full.rows),
            cols: Shrink::new(self.cols.start(), full.cols),
            full,
            on_cols: false,
        })
    }
}

impl ValueTree for MatrixTree {
    type Value = Matrix;

    fn current(&self) -> Matrix {
        self.full.leading(self.rows.curr, self.cols.curr)
    }
    fn simplify(&mut self) -> bool {
        if !self.on_cols {
            if self.rows.simplify() {
                return true;
            }
            self.on_cols = true;
        }
        self.cols.simplify()
    }
    fn complicate(&mut self) -> bool {
        if self.on_cols {
            self.cols.complicate()
        } else {
            self.rows.complicate()
        }
    }
}

/// Matrices with re, im uniform in [-0.5, 0.5) and `lda = rows + pad`.
pub fn matrix_strategy(
    rows: impl Into<SizeRange>,
    cols: impl Into<SizeRange>,
    pad: impl Into<SizeRange>,
) -> MatrixStrategy {
    MatrixStrategy {
        rows: rows.into(),
        cols: cols.into(),
        pad: pad.into(),
        entries: Entries::Uniform,
    }
}

/// Matrices with integer re, im in 1..=10 (exact cgemm sums), `lda = rows + pad`.
pub fn integer_matrix_strategy(
    rows: impl Into<SizeRange>,
    cols: impl Into<SizeRange>,
    pad: impl Into<SizeRange>,
) -> MatrixStrategy {
    MatrixStrategy {
        entries: Entries::Integer,
        ..matrix_strategy(rows, cols, pad)
    }
}

fn exact_matrix(entries: Entries, rows: usize, cols: usize, lda: usize) -> MatrixStrategy {
    assert!(lda >= rows.max(1), "lda {lda} < max(rows {rows}, 1)");
    MatrixStrategy {
        rows: rows.into(),
        cols: cols.into(),
        pad: (lda - rows).into(),
        entries,
    }
}

/// Column-major `rows x cols`, re and im uniform in [-0.5, 0.5), padding rows `rows..lda` set
/// to [`PAD_C`]. Length `lda * cols`.
///
/// # Panics
/// If `lda < max(rows, 1)` (BLAS would refuse it too).
pub fn matrix(seed: u64, rows: usize, cols: usize, lda: usize) -> Vec<Complex32> {
    exact_matrix(Entries::Uniform, rows, cols, lda)
        .draw(&mut seeded_rng(seed, Stream::Matrix))
        .data
}

/// As [`matrix`], with re and im integers in 1..=10 (rocBLAS clients' exact-sum inputs).
///
/// # Panics
/// If `lda < max(rows, 1)`.
pub fn integer_matrix(seed: u64, rows: usize, cols: usize, lda: usize) -> Vec<Complex32> {
    exact_matrix(Entries::Integer, rows, cols, lda)
        .draw(&mut seeded_rng(seed, Stream::IntegerMatrix))
        .data
}

/// `B * B^H + n * I` with B's entries multiples of 1/16 in [-0.5, 0.5]: exactly Hermitian,
/// real diagonal, eigenvalues in about [n, 1.75 n] (condition number below 2), and exact in f32
/// (see [`sixteenth`]).
fn hpd_fill(rng: &mut TestRng, n: usize, lda: usize) -> Matrix {
    let mut b = vec![Complex32::new(0.0, 0.0); n * n];
    fill_complex(rng, &mut b, sixteenth);
    hpd_from(&b, n, lda)
}

/// `B * B^H + n * I` for B `n x n` column-major, exact (B's entries and their products must be
/// exact in f64, as sixteenths and small integers are).
fn hpd_from(b: &[Complex32], n: usize, lda: usize) -> Matrix {
    let b: Vec<c64> = b
        .iter()
        .map(|z| c64::new(f64::from(z.re), f64::from(z.im)))
        .collect();
    let b = MatRef::from_column_major_slice(&b, n, n);
    let mut bbh = Mat::<c64>::zeros(n, n);
    matmul_exact(&mut bbh, b);

    let mut m = Matrix::padded(n, n, lda);
    let shift = n as f64;
    for j in 0..n {
        m.data[j + j * lda] = Complex32::new((bbh[(j, j)].re + shift) as f32, 0.0);
        for i in j + 1..n {
            let z = bbh[(i, j)];
            // An exact zero sum may come out -0 or +0 depending on the order faer summed in;
            // adding +0 makes it +0 either way, so the bits do not depend on the thread count.
            let z = Complex32::new(z.re as f32 + 0.0, z.im as f32 + 0.0);
            m.data[i + j * lda] = z;
            m.data[j + i * lda] = z.conj();
        }
    }
    m
}

/// The lower triangle of B * B^H (the upper is mirrored by the caller): half the flops of a full
/// product. Threads and SIMD are safe for reproducibility here only because the sum is exact.
fn matmul_exact(dst: &mut Mat<c64>, b: MatRef<'_, c64>) {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    matmul(
        dst.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        b,
        BlockStructure::Rectangular,
        b.adjoint(),
        BlockStructure::Rectangular,
        c64::new(1.0, 0.0),
        Par::rayon(0),
    );
}

/// Hermitian positive definite matrices `n x n`, `lda = n + pad`; shrinks to leading principal
/// blocks (still HPD).
#[derive(Clone, Debug)]
pub struct HpdStrategy {
    n: SizeRange,
    pad: SizeRange,
}

impl HpdStrategy {
    pub fn draw(&self, rng: &mut TestRng) -> Matrix {
        let n = draw_size(rng, &self.n);
        let pad = draw_size(rng, &self.pad);
        hpd_fill(rng, n, (n + pad).max(1))
    }
}

#[derive(Clone, Debug)]
pub struct HpdTree {
    full: Matrix,
    n: Shrink,
}

impl Strategy for HpdStrategy {
    type Tree = HpdTree;
    type Value = Matrix;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let full = self.draw(runner.rng());
        Ok(HpdTree {
            n: Shrink::new(self.n.start(), full.rows),
            full,
        })
    }
}

impl ValueTree for HpdTree {
    type Value = Matrix;

    fn current(&self) -> Matrix {
        self.full.leading(self.n.curr, self.n.curr)
    }
    fn simplify(&mut self) -> bool {
        self.n.simplify()
    }
    fn complicate(&mut self) -> bool {
        self.n.complicate()
    }
}

pub fn hpd_strategy(n: impl Into<SizeRange>, pad: impl Into<SizeRange>) -> HpdStrategy {
    HpdStrategy {
        n: n.into(),
        pad: pad.into(),
    }
}

/// Hermitian positive definite `n x n` (see [`HpdStrategy`]), column-major with padding rows
/// `n..lda` set to [`PAD_C`]. Exactly Hermitian with a real diagonal; exact in f32 for
/// n < 43,690.
///
/// # Panics
/// If `lda < max(n, 1)`.
pub fn hpd_matrix(seed: u64, n: usize, lda: usize) -> Vec<Complex32> {
    assert!(lda >= n.max(1), "lda {lda} < max(n {n}, 1)");
    hpd_strategy(n, lda - n)
        .draw(&mut seeded_rng(seed, Stream::Hpd))
        .data
}

/// A Hermitian matrix whose Cholesky factorization must stop, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct NonHpd {
    pub matrix: Matrix,
    /// LAPACK's `info`: the 1-based order of the first leading minor that is not positive
    /// definite.
    pub info: usize,
}

/// An HPD matrix with diagonal entry k (0-based) negated. Leading blocks of order <= k are
/// untouched HPD blocks; at step k the pivot is `-a_kk - (a positive quantity) <= -n`, far from
/// zero, so any correct factorization, in any precision, reports `info = k + 1`.
#[derive(Clone, Debug)]
pub struct NonHpdStrategy {
    n: SizeRange,
    pad: SizeRange,
}

impl NonHpdStrategy {
    /// One draw: n, padding, the HPD matrix, then k uniform in `0..n`.
    pub fn draw(&self, rng: &mut TestRng) -> NonHpd {
        let n = draw_size(rng, &self.n).max(1);
        let pad = draw_size(rng, &self.pad);
        let mut matrix = hpd_fill(rng, n, n + pad);
        let k = draw_in(rng, 0, n - 1);
        let kk = k + k * matrix.lda;
        matrix.data[kk] = -matrix.data[kk];
        NonHpd {
            matrix,
            info: k + 1,
        }
    }
}

/// Shrinks n to leading principal blocks, never below `info` (smaller blocks would be HPD).
#[derive(Clone, Debug)]
pub struct NonHpdTree {
    full: NonHpd,
    n: Shrink,
}

impl Strategy for NonHpdStrategy {
    type Tree = NonHpdTree;
    type Value = NonHpd;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let full = self.draw(runner.rng());
        Ok(NonHpdTree {
            n: Shrink::new(self.n.start().max(full.info), full.matrix.rows),
            full,
        })
    }
}

impl ValueTree for NonHpdTree {
    type Value = NonHpd;

    fn current(&self) -> NonHpd {
        NonHpd {
            matrix: self.full.matrix.leading(self.n.curr, self.n.curr),
            info: self.full.info,
        }
    }
    fn simplify(&mut self) -> bool {
        self.n.simplify()
    }
    fn complicate(&mut self) -> bool {
        self.n.complicate()
    }
}

/// Hermitian, not positive definite, `n >= 1` (a lower bound of 0 is raised to 1).
pub fn non_hpd_strategy(n: impl Into<SizeRange>, pad: impl Into<SizeRange>) -> NonHpdStrategy {
    NonHpdStrategy {
        n: n.into(),
        pad: pad.into(),
    }
}

/// A Hermitian `n x n` matrix that is not positive definite, and the `info` cpotrf must report
/// for it (1-based index of the first non-positive pivot, chosen from the seed). Padding as in
/// [`matrix`].
///
/// # Panics
/// If `n == 0` (no such matrix) or `lda < n`.
pub fn non_hpd_matrix(seed: u64, n: usize, lda: usize) -> (Vec<Complex32>, usize) {
    assert!(n >= 1, "a 0x0 matrix is positive definite");
    assert!(lda >= n, "lda {lda} < n {n}");
    let m = non_hpd_strategy(n, lda - n).draw(&mut seeded_rng(seed, Stream::NonHpd));
    (m.matrix.data, m.info)
}

/// What a case's input holds: the seeded draw, which every run uses, or one of the simple
/// inputs `clhip repro` tries after shrinking the size (a data-dependent failure that still
/// fails on all ones is easier to read than one on 4096 random values). The simple kinds need
/// no generator: each element is a formula of its index (and, for small integers, the seed),
/// which the reproducer writes out in C.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DataKind {
    #[default]
    Seeded,
    /// Every element (1, 0).
    Ones,
    /// Element 0 is (1, 0), every other (0, 0).
    Impulse,
    /// Re in -2..=2 and im in -3..=3 from the index and the seed: exact sums and products.
    SmallIntegers,
}

impl DataKind {
    /// The simple kinds, in the order a reproducer tries them: simplest first.
    pub const SIMPLE: [DataKind; 3] = [DataKind::Ones, DataKind::Impulse, DataKind::SmallIntegers];

    pub fn name(self) -> &'static str {
        match self {
            DataKind::Seeded => "seeded",
            DataKind::Ones => "ones",
            DataKind::Impulse => "impulse",
            DataKind::SmallIntegers => "small-integers",
        }
    }

    pub fn is_seeded(&self) -> bool {
        *self == DataKind::Seeded
    }

    /// Element `i` of a simple input under `seed`; `None` for the seeded draw.
    pub fn value(self, seed: u64, i: usize) -> Option<Complex32> {
        let i = i as u64;
        let k = seed % 8;
        Some(match self {
            DataKind::Seeded => return None,
            DataKind::Ones => Complex32::new(1.0, 0.0),
            DataKind::Impulse if i == 0 => Complex32::new(1.0, 0.0),
            DataKind::Impulse => Complex32::new(0.0, 0.0),
            DataKind::SmallIntegers => {
                Complex32::new(((i + k) % 5) as f32 - 2.0, ((2 * i + k) % 7) as f32 - 3.0)
            }
        })
    }

    /// `len` elements of a simple input, or `None` for the seeded draw.
    fn values(self, seed: u64, len: usize) -> Option<Vec<Complex32>> {
        (0..len).map(|i| self.value(seed, i)).collect()
    }
}

impl std::fmt::Display for DataKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// [`complex_vec`], or a simple input of `kind`.
pub fn complex_vec_of(kind: DataKind, seed: u64, n: usize) -> Vec<Complex32> {
    kind.values(seed, n).unwrap_or_else(|| complex_vec(seed, n))
}

/// [`matrix`] (square), or a simple input of `kind` in its `n x n` entries (column-major),
/// padding as [`matrix`]'s.
pub fn matrix_of(kind: DataKind, seed: u64, n: usize, lda: usize) -> Vec<Complex32> {
    let Some(v) = kind.values(seed, n * n) else {
        return matrix(seed, n, n, lda);
    };
    let mut m = Matrix::padded(n, n, lda);
    for j in 0..n {
        m.data[j * lda..j * lda + n].copy_from_slice(&v[j * n..j * n + n]);
    }
    m.data
}

/// [`hpd_matrix`], or `B * B^H + n * I` with B a simple input of `kind`.
pub fn hpd_matrix_of(kind: DataKind, seed: u64, n: usize, lda: usize) -> Vec<Complex32> {
    match kind.values(seed, n * n) {
        None => hpd_matrix(seed, n, lda),
        Some(b) => hpd_from(&b, n, lda).data,
    }
}

/// [`non_hpd_matrix`], or the HPD matrix of [`hpd_matrix_of`] with diagonal entry `n / 2`
/// negated (info `n / 2 + 1`).
pub fn non_hpd_matrix_of(
    kind: DataKind,
    seed: u64,
    n: usize,
    lda: usize,
) -> (Vec<Complex32>, usize) {
    if kind.is_seeded() {
        return non_hpd_matrix(seed, n, lda);
    }
    assert!(n >= 1, "a 0x0 matrix is positive definite");
    let mut m = hpd_matrix_of(kind, seed, n, lda);
    let k = n / 2;
    m[k + k * lda] = -m[k + k * lda];
    (m, k + 1)
}

/// Word `i` of the handoff pattern. The OpenCL handoff kernel computes exactly this (a murmur3
/// finalizer over a Weyl sequence), so host and device agree bit for bit; do not change one
/// without the other.
pub fn pattern_word(seed: u32, i: u32) -> u32 {
    let mut x = i.wrapping_mul(0x9E37_79B1).wrapping_add(seed);
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^= x >> 16;
    x
}

/// The first `words` words of the handoff pattern. Word indices are taken mod 2^32, as the
/// kernel's `uint` global id is.
pub fn pattern(seed: u32, words: usize) -> Vec<u32> {
    (0..words).map(|i| pattern_word(seed, i as u32)).collect()
}

#[cfg(test)]
mod tests;
