//! The case matrix as data. `cases/default.toml` says which paths x syncs x ops x sizes run,
//! and under which environment variants (`[[variant]]`) beside the plain environment; it is
//! expanded over every pair found. Bad input is rejected
//! with `file:line:column` and what was expected; that includes every size an op cannot take
//! (its range, its kernels' 32-bit counts, the bytes it allocates against [`Limits`]), so that
//! the harness never runs a case whose failure would be its own.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::filter::matches_filter;
use crate::model::{Api, Case, EnvVariant, Op, Pair, PathKind, SyncMode};
use crate::paths::{AcrossGpus, PathFacts};

/// The largest FFT the harness's OpenCL FFT runs: the seed's 4,194,304 complex elements.
pub const MAX_FFT: usize = 1 << 22;

/// The case matrix shipped with the binary, so `clhip run` works from any directory.
pub const DEFAULT_MATRIX: &str = include_str!("../cases/default.toml");
pub const DEFAULT_MATRIX_NAME: &str = "cases/default.toml";

/// The 1-based column, in characters, of byte `offset` of `line`.
pub(crate) fn column_of(line: &str, offset: usize) -> usize {
    let mut end = offset.min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].chars().count() + 1
}

/// A problem in an input file, located for a person to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: the file as a whole (it could not be read).
        if self.line == 0 {
            return write!(f, "{}: {}", self.file.display(), self.message);
        }
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

impl std::error::Error for InputError {}

impl From<crate::input::ReadError> for InputError {
    fn from(e: crate::input::ReadError) -> Self {
        InputError {
            file: e.path,
            line: 0,
            column: 0,
            message: e.problem.to_string(),
        }
    }
}

/// `text` (the contents of `file`) as TOML of type `T`; a syntax or shape error is an
/// [`InputError`] at its line and column.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> Result<T, InputError> {
    toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        locate(file, text, at, e.message().trim().to_string())
    })
}

pub(crate) fn locate(
    file: &Path,
    text: &str,
    offset: usize,
    message: impl Into<String>,
) -> InputError {
    // A span is a char boundary from the TOML parser; should one not be, step back to one
    // rather than panic over a message.
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    // In characters, as an editor counts them, not bytes.
    let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    InputError {
        file: file.to_path_buf(),
        line,
        column,
        message: message.into(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    version: Spanned<u32>,
    #[serde(rename = "group", default)]
    groups: Vec<Spanned<GroupFile>>,
    #[serde(rename = "variant", default)]
    variants: Vec<Spanned<VariantFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantFile {
    name: Spanned<String>,
    peers: Spanned<Vec<Spanned<String>>>,
    env: Spanned<BTreeMap<String, Spanned<String>>>,
    #[serde(default)]
    source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    #[serde(default)]
    name: Option<String>,
    paths: Vec<Spanned<PathKind>>,
    syncs: Vec<Spanned<SyncMode>>,
    ops: Vec<Spanned<Op>>,
    sizes: Vec<Spanned<usize>>,
    #[serde(default)]
    variants: Vec<Spanned<String>>,
}

/// One validated group: every (path, sync) it yields is meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub paths: Vec<PathKind>,
    pub syncs: Vec<SyncMode>,
    pub ops: Vec<Op>,
    pub sizes: Vec<usize>,
    /// The names of the [`Variant`]s its cases also run under, beside the plain environment.
    pub variants: Vec<String>,
}

/// An environment its groups' cases run under beside the plain one, on the pairs whose peer
/// is one of `peers`: `HSA_ENABLE_SDMA=0` on `hip` pairs. Its cases' ids end in
/// `/env:NAME=value+...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    pub peers: Vec<Api>,
    pub env: EnvVariant,
    /// Why the variant is there (an issue, a vendor's documentation), for the reader.
    pub source: Option<String>,
}

impl Variant {
    pub fn applies_to(&self, peer: Api) -> bool {
        self.peers.contains(&peer)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pub groups: Vec<Group>,
    /// The `[[variant]]` tables, in file order; empty for a file without any.
    pub variants: Vec<Variant>,
}

impl Matrix {
    /// Read and validate a case file under [`Limits::HARNESS`].
    pub fn load(file: &Path) -> Result<Self, InputError> {
        Self::load_with(file, &Limits::HARNESS)
    }

    /// Read and validate a case file, every size held to `limits`.
    pub fn load_with(file: &Path, limits: &Limits) -> Result<Self, InputError> {
        let text = crate::input::read_text("a case file", file, crate::input::CASES_LIMIT)?;
        Self::parse_with(file, &text, limits)
    }

    pub fn default_matrix() -> Self {
        Self::parse(Path::new(DEFAULT_MATRIX_NAME), DEFAULT_MATRIX)
            .expect("the shipped case matrix is valid (tested)")
    }

    /// Validate a case file's text under [`Limits::HARNESS`].
    pub fn parse(file: &Path, text: &str) -> Result<Self, InputError> {
        Self::parse_with(file, text, &Limits::HARNESS)
    }

    /// Validate a case file's text, every size held to `limits` for every op of its group
    /// (see [`check_size`]): a size some op cannot take is an error at that size, never a
    /// case that is silently left out or that overflows in a worker.
    pub fn parse_with(file: &Path, text: &str, limits: &Limits) -> Result<Self, InputError> {
        let raw: MatrixFile = parse_toml(file, text)?;
        let err = |span: Range<usize>, msg: String| locate(file, text, span.start, msg);
        if *raw.version.get_ref() != 1 {
            return Err(err(
                raw.version.span(),
                format!(
                    "unsupported case-file version {} (this clhip reads version 1)",
                    raw.version.get_ref()
                ),
            ));
        }
        if raw.groups.is_empty() {
            return Err(err(0..0, "no [[group]] tables: the matrix is empty".into()));
        }
        let variants = parse_variants(raw.variants, &err)?;
        let mut named = vec![false; variants.len()];
        let mut groups = Vec::new();
        for (gi, g) in raw.groups.into_iter().enumerate() {
            let gspan = g.span();
            let g = g.into_inner();
            for (what, empty) in [
                ("paths", g.paths.is_empty()),
                ("syncs", g.syncs.is_empty()),
                ("ops", g.ops.is_empty()),
                ("sizes", g.sizes.is_empty()),
            ] {
                if empty {
                    return Err(err(
                        gspan.clone(),
                        format!("group has an empty `{what}` list"),
                    ));
                }
            }
            let paths: Vec<PathKind> = g.paths.iter().map(|p| *p.get_ref()).collect();
            for s in &g.syncs {
                let sync = *s.get_ref();
                if !paths.iter().any(|p| p.any_syncs().contains(&sync)) {
                    let allowed: Vec<String> = paths
                        .iter()
                        .map(|p| {
                            let names: Vec<&str> = p.any_syncs().iter().map(|s| s.name()).collect();
                            format!("{p}: {}", names.join(", "))
                        })
                        .collect();
                    return Err(err(
                        s.span(),
                        format!(
                            "sync `{sync}` applies to none of this group's paths ({})",
                            allowed.join("; ")
                        ),
                    ));
                }
            }
            for size in &g.sizes {
                let n = *size.get_ref();
                for op in &g.ops {
                    check_size(*op.get_ref(), n, limits).map_err(|m| err(size.span(), m))?;
                }
            }
            let mut group_variants: Vec<String> = Vec::new();
            for v in &g.variants {
                let name = v.get_ref();
                let Some(at) = variants.iter().position(|d| &d.variant.name == name) else {
                    let known: Vec<&str> =
                        variants.iter().map(|d| d.variant.name.as_str()).collect();
                    return Err(err(
                        v.span(),
                        format!(
                            "no [[variant]] is named `{name}` (the file's variants: {})",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                };
                if group_variants.contains(name) {
                    return Err(err(
                        v.span(),
                        format!("variant `{name}` is listed twice in this group"),
                    ));
                }
                named[at] = true;
                group_variants.push(name.clone());
            }
            groups.push(Group {
                name: g.name.unwrap_or_else(|| format!("group {}", gi + 1)),
                paths,
                syncs: g.syncs.iter().map(|s| *s.get_ref()).collect(),
                ops: g.ops.iter().map(|o| *o.get_ref()).collect(),
                sizes: g.sizes.iter().map(|s| *s.get_ref()).collect(),
                variants: group_variants,
            });
        }
        // A variant no group names runs nothing: a slip (a group that lost its line), which
        // must not read as a variant that was tried.
        if let Some((v, _)) = variants.iter().zip(&named).find(|(_, named)| !**named) {
            return Err(err(
                v.span.clone(),
                format!(
                    "variant `{}` is named by no group's `variants`, so no case would run under it",
                    v.variant.name
                ),
            ));
        }
        Ok(Matrix {
            groups,
            variants: variants.into_iter().map(|v| v.variant).collect(),
        })
    }

    /// Every case of the matrix on every pair, in file order, without duplicates. Paths, syncs
    /// and ops that mean nothing for a pair are left out, not reported: they are not cases. So
    /// are, on a pair across GPUs, the paths whose rooms refuse that ([`AcrossGpus`]).
    /// Per pair, the plain environment's cases come first, then each variant's that applies to
    /// the pair's peer, in file order: a worker serves one environment, so each environment's
    /// cases stay together.
    pub fn expand(&self, pairs: &[Pair]) -> Vec<Case> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for pair in pairs {
            let environments = std::iter::once(None).chain(
                self.variants
                    .iter()
                    .filter(|v| v.applies_to(pair.peer.api))
                    .map(Some),
            );
            for variant in environments {
                for g in &self.groups {
                    let env = match variant {
                        None => EnvVariant::default(),
                        Some(v) if g.variants.contains(&v.name) => v.env.clone(),
                        Some(_) => continue,
                    };
                    expand_group(g, pair, &env, &mut seen, &mut out);
                }
            }
        }
        out
    }
}

/// A `[[variant]]` as validated, with where it stands in the file.
struct ParsedVariant {
    variant: Variant,
    span: Range<usize>,
}

/// The `[[variant]]` tables, each checked: a name used once, peers that are peers, variables a
/// case id can carry and clhip does not set itself, and an environment no other variant has
/// (two would give their cases one id).
fn parse_variants(
    raw: Vec<Spanned<VariantFile>>,
    err: &impl Fn(Range<usize>, String) -> InputError,
) -> Result<Vec<ParsedVariant>, InputError> {
    let mut out: Vec<ParsedVariant> = Vec::new();
    for v in raw {
        let span = v.span();
        let v = v.into_inner();
        let name = v.name.get_ref();
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(err(
                v.name.span(),
                format!("variant name `{name}`: expected letters, digits, `-` and `_`"),
            ));
        }
        if out.iter().any(|o| &o.variant.name == name) {
            return Err(err(
                v.name.span(),
                format!("a second [[variant]] named `{name}`"),
            ));
        }
        if v.peers.get_ref().is_empty() {
            return Err(err(
                v.peers.span(),
                format!("variant `{name}` has an empty `peers` list: it would apply to no pair"),
            ));
        }
        let mut peers = Vec::new();
        for p in v.peers.get_ref() {
            let api: Api = match p.get_ref().parse() {
                Ok(Api::OpenCl) | Err(_) => {
                    return Err(err(
                        p.span(),
                        format!(
                            "unknown peer `{}` (expected hip, cuda or host: `opencl` is one side of every pair)",
                            p.get_ref()
                        ),
                    ));
                }
                Ok(api) => api,
            };
            if !peers.contains(&api) {
                peers.push(api);
            }
        }
        if v.env.get_ref().is_empty() {
            return Err(err(
                v.env.span(),
                format!("variant `{name}` sets no variable: it would be the plain environment"),
            ));
        }
        let mut vars = Vec::new();
        for (k, value) in v.env.get_ref() {
            // The value's span: the key's own is not kept by the TOML reader.
            EnvVariant::new([(k.as_str(), value.get_ref().as_str())])
                .map_err(|m| err(value.span(), format!("variant `{name}`: {m}")))?;
            vars.push((k.clone(), value.get_ref().clone()));
        }
        let env = EnvVariant::new(vars).map_err(|m| err(v.env.span(), m))?;
        if let Some(twin) = out.iter().find(|o| o.variant.env == env) {
            return Err(err(
                v.env.span(),
                format!(
                    "variant `{name}` sets the same environment as `{}` ({env}): their cases would share ids",
                    twin.variant.name
                ),
            ));
        }
        out.push(ParsedVariant {
            variant: Variant {
                name: name.clone(),
                peers,
                env,
                source: v.source,
            },
            span,
        });
    }
    Ok(out)
}

/// The cases of one group on one pair under one environment, appended to `out` unless `seen`.
fn expand_group(
    g: &Group,
    pair: &Pair,
    env: &EnvVariant,
    seen: &mut HashSet<Case>,
    out: &mut Vec<Case>,
) {
    for &path in &g.paths {
        if !path.applies_to(pair.peer.api) {
            continue;
        }
        if pair.cl_gpu.is_some()
            && matches!(path.across_gpus(pair.peer.api), AcrossGpus::Refused(_))
        {
            continue;
        }
        for &sync in g
            .syncs
            .iter()
            .filter(|s| path.syncs(pair.peer.api).contains(s))
        {
            for &op in g.ops.iter().filter(|o| o.applies_to(pair.peer.api)) {
                for &n in &g.sizes {
                    let case = Case {
                        pair: pair.clone(),
                        path,
                        sync,
                        op,
                        n,
                        env: env.clone(),
                    };
                    if seen.insert(case.clone()) {
                        out.push(case);
                    }
                }
            }
        }
    }
}

/// Bytes in one GiB, for limits and their messages.
const GIB: u64 = 1 << 30;

/// What one case may hold, checked where a size is parsed so that an impossible size is the
/// case file's error and never reaches a worker (where an overflowed byte count allocates too
/// little and the worker corrupts its own heap, which reads as a driver crash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest single buffer, in bytes.
    pub max_buffer: u64,
    /// The most one case may hold at once, host and devices together ([`CaseBytes::total`]).
    pub max_total: u64,
}

impl Limits {
    /// The harness's own limits, the same on every machine so that a case file means the same
    /// everywhere (`list --probe` of another machine included): 4 GiB per buffer, where 32-bit
    /// offsets and many drivers' largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) stop; 16 GiB
    /// per case, so that every case fits a 32 GiB workstation beside its OS and runtimes.
    /// A device's own limits are the runner's to check, with [`case_bytes`].
    pub const HARNESS: Limits = Limits {
        max_buffer: 4 * GIB,
        max_total: 16 * GIB,
    };

    /// [`Limits::HARNESS`], with the per-case total lowered to this machine's memory
    /// (`MemTotal` of /proc/meminfo) where that is smaller and can be read.
    pub fn this_machine() -> Limits {
        let mem = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| mem_total(&t));
        let mut l = Limits::HARNESS;
        if let Some(m) = mem {
            l.max_total = l.max_total.min(m);
        }
        l
    }
}

/// `MemTotal:  131072 kB` in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// What a case of one op and size allocates, in bytes, as read from `ops.rs` and `paths.rs`.
/// An upper bound: every buffer the op holds is counted as if all were alive at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseBytes {
    /// One shared buffer: n complex f32 (8 bytes each) for vector ops, n x n for gemm and
    /// cholesky. It is also the op's largest single allocation.
    pub buffer: u64,
    /// Device-side memory: each shared buffer three times (the copy path holds an OpenCL
    /// buffer, host staging and peer memory), plus the op's own OpenCL and peer buffers.
    pub device: u64,
    /// Host copies: inputs, read-backs and the f64 reference.
    pub host: u64,
}

impl CaseBytes {
    /// Device and host together: what [`Limits::max_total`] bounds. A device peer's pinned
    /// and managed memory is host memory too, so the two are not kept apart.
    pub fn total(&self) -> u64 {
        // Cannot overflow: case_bytes keeps device + host representable.
        self.device.saturating_add(self.host)
    }
}

/// How an op uses memory, in units of one shared buffer, from reading `ops.rs`.
struct Footprint {
    /// Shared buffers through the path (gemm: A, B and C).
    shared: u64,
    /// Other buffer-sized allocations on the OpenCL device or the peer: staging buffers of
    /// `produce_on_cl`, read-backs of `consume_on_cl`, FFT scratch and twiddles, placement's
    /// two reference buffers.
    extra_device: u64,
    /// Buffer-sized host allocations: generated inputs, read-backs, and the f64 reference (two
    /// units: f64 is twice f32).
    host: u64,
}

fn footprint(op: Op) -> Footprint {
    let (shared, extra_device, host) = match op {
        // Shared memory only: its two 8-byte result buffers are below any allocation's
        // granularity, and the shared buffer is already counted three times.
        Op::Handoff => (1, 0, 0),
        // FFT scratch and twiddle table; input, download, f64 reference.
        Op::Fft => (1, 2, 4),
        // b, out, FFT scratch and twiddles; a, b, got, f32 magnitudes, f64 fft and magnitude.
        Op::Pipeline => (1, 4, 7),
        // Three staging buffers and one read-back; a, b, c, got, f64 reference.
        Op::Gemm => (3, 4, 6),
        // Two staging buffers and one read-back; HPD, non-HPD, factor, f64 factor and the
        // reference's work on the non-HPD matrix.
        Op::Cholesky => (1, 3, 7),
        // Staging, read-back, the peer's device and pinned reference buffers; input, got, want.
        Op::Placement => (1, 4, 3),
        // Shared memory only, as handoff: its 1,000 result buffers are 16 bytes apiece.
        Op::Reuse => (1, 0, 0),
    };
    Footprint {
        shared,
        extra_device,
        host,
    }
}

/// The elements of one shared buffer: n for vector ops, n x n for matrix ops. None on
/// overflow.
pub fn buffer_elements(op: Op, n: usize) -> Option<u64> {
    let n = u64::try_from(n).ok()?;
    if op.is_matrix() {
        n.checked_mul(n)
    } else {
        Some(n)
    }
}

/// The bytes a case of `op` at size `n` allocates (see [`CaseBytes`]), with checked
/// arithmetic: None when a count does not fit in 64 bits. The parser holds every size to
/// [`Limits`] with it; the runner can hold a case to a device's largest allocation.
pub fn case_bytes(op: Op, n: usize) -> Option<CaseBytes> {
    let elem = u64::try_from(size_of::<num_complex::Complex32>()).ok()?;
    let buffer = buffer_elements(op, n)?.checked_mul(elem)?;
    let f = footprint(op);
    let device = f
        .shared
        .checked_mul(3)?
        .checked_add(f.extra_device)?
        .checked_mul(buffer)?;
    let host = f.host.checked_mul(buffer)?;
    device.checked_add(host)?;
    Some(CaseBytes {
        buffer,
        device,
        host,
    })
}

/// Why `n` is no size for `op` under `limits`, or Ok. Every check is one the op's code relies
/// on without checking again.
pub fn check_size(op: Op, n: usize, limits: &Limits) -> Result<(), String> {
    if n == 0 {
        return Err("size must be at least 1".into());
    }
    if matches!(op, Op::Fft | Op::Pipeline) && (!n.is_power_of_two() || n > MAX_FFT) {
        return Err(format!(
            "size {n} for op `{op}`: expected a power of two from 2 to {MAX_FFT} (the OpenCL FFT's range)"
        ));
    }
    // A 1-point FFT is the identity: the peer would read back its own input whether or not
    // OpenCL did anything, so the case could pass without the data crossing.
    if matches!(op, Op::Fft | Op::Pipeline) && n == 1 {
        return Err(format!(
            "size 1 for op `{op}`: a 1-point FFT is the identity, so the case could not show that OpenCL did its work; the smallest size is 2"
        ));
    }
    match refusal(op, n, limits) {
        None => Ok(()),
        Some(why) => Err(format!(
            "size {n} for op `{op}`: {why}; {}",
            size_range(op, limits)
        )),
    }
}

/// What refuses `n >= 1` for `op` beyond the FFT's own range, if anything. Each check refuses
/// every size above the first it refuses, which [`max_size`] relies on.
fn refusal(op: Op, n: usize, limits: &Limits) -> Option<String> {
    let u32_max = u64::from(u32::MAX);
    // Kernels take element and word counts as 32-bit `uint` and index with them. Handoff
    // checks 2 u32 words per complex element, and its result word u32::MAX means "no
    // mismatch", so the last index must stay below it.
    let (count, what) = match op {
        Op::Handoff => (
            u64::try_from(n).ok().and_then(|n| n.checked_mul(2)),
            "pattern words (2 per element)",
        ),
        _ => (buffer_elements(op, n), "complex elements per buffer"),
    };
    let Some(count) = count else {
        return Some("its element count overflows 64 bits".into());
    };
    if count > u32_max {
        return Some(format!(
            "{count} {what} do not fit the kernels' 32-bit counts (at most {u32_max})"
        ));
    }
    // BLAS and LAPACK take the dimension as a C int.
    if op.is_matrix() && i32::try_from(n).is_err() {
        return Some(format!("over the BLAS/LAPACK dimension limit {}", i32::MAX));
    }
    let Some(bytes) = case_bytes(op, n) else {
        return Some("its byte count overflows 64 bits".into());
    };
    if bytes.buffer > limits.max_buffer {
        return Some(format!(
            "one buffer would be {}, over the harness limit of {} per buffer",
            show_bytes(bytes.buffer),
            show_bytes(limits.max_buffer)
        ));
    }
    if bytes.total() > limits.max_total {
        return Some(format!(
            "the case would hold up to {}, over the limit of {} per case",
            show_bytes(bytes.total()),
            show_bytes(limits.max_total)
        ));
    }
    None
}

/// `op `x` takes sizes ...`, for an error message.
fn size_range(op: Op, limits: &Limits) -> String {
    match max_size(op, limits) {
        Some(max) if matches!(op, Op::Fft | Op::Pipeline) => {
            format!("op `{op}` takes powers of two from 2 to {max}")
        }
        Some(max) => format!("op `{op}` takes sizes from 1 to {max}"),
        None => format!("op `{op}` takes no size under these limits"),
    }
}

/// The largest size `op` takes under `limits`, or None when even 1 is refused.
pub fn max_size(op: Op, limits: &Limits) -> Option<usize> {
    let ok = |n: usize| refusal(op, n, limits).is_none();
    if matches!(op, Op::Fft | Op::Pipeline) {
        // Powers of two from 2 (a 1-point FFT is the identity) only: the largest that passes,
        // counting down from the FFT's range.
        return (1..=MAX_FFT.trailing_zeros())
            .rev()
            .map(|k| 1usize << k)
            .find(|&n| ok(n));
    }
    if !ok(1) {
        return None;
    }
    // Binary search, with ok(lo) and !ok(hi). The 32-bit counts refuse anything above
    // u32::MAX, so the search is 32 steps.
    let mut lo = 1usize;
    let mut hi = usize::try_from(u64::from(u32::MAX) + 1).unwrap_or(usize::MAX);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// `4 GiB` for a whole number of GiB, else the exact count with its size in GiB beside it.
fn show_bytes(b: u64) -> String {
    if b.is_multiple_of(GIB) {
        format!("{} GiB", b / GIB)
    } else {
        // Display only: the exact count is the one before it.
        format!("{b} bytes ({:.1} GiB)", b as f64 / GIB as f64)
    }
}

/// Keep the cases whose id matches any filter. A filter is a glob over the case id (`*`
/// matches any run of characters) or, without `*`, a substring. A filter that matches nothing
/// is an error: a typo must not silently run zero cases. So is an empty filter, which as a
/// substring would match every case: it is a slip (an unset shell variable), not a request.
pub fn filter(cases: Vec<Case>, filters: &[String]) -> anyhow::Result<Vec<Case>> {
    if filters.is_empty() {
        return Ok(cases);
    }
    if filters.iter().any(String::is_empty) {
        anyhow::bail!(
            "an empty filter would match every case; give a glob (`*/fft/*`) or a substring of case ids, or no filter to run them all"
        );
    }
    let ids: Vec<String> = cases.iter().map(Case::id).collect();
    for f in filters {
        if !ids.iter().any(|id| matches_filter(f, id)) {
            let example = ids.first().map_or("(no cases at all)".to_string(), |i| {
                format!("ids look like `{i}`")
            });
            anyhow::bail!(
                "filter `{f}` matches none of the {} cases; {example}",
                ids.len()
            );
        }
    }
    Ok(cases
        .into_iter()
        .zip(ids)
        .filter(|(_, id)| filters.iter().any(|f| matches_filter(f, id)))
        .map(|(c, _)| c)
        .collect())
}

#[cfg(test)]
mod tests;
