//! The domain model of docs/domain.md as types: participants, pairs, paths, sync modes, ops, cases and
//! their outcomes. Nothing here touches a runtime; every other module speaks these types.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

mod env_variant;
pub use env_variant::EnvVariant;

/// An API that can own or touch memory in a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    OpenCl,
    /// AMD ROCm: libamdhip64, hiprtc, rocBLAS, rocSOLVER.
    Hip,
    /// HIP's NVIDIA platform: libcuda, NVRTC, cuBLAS, cuSOLVER.
    Cuda,
    /// The CPU, through ordinary host memory.
    Host,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenCl => "opencl",
            Api::Hip => "hip",
            Api::Cuda => "cuda",
            Api::Host => "host",
        }
    }
}

impl FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Api::OpenCl, Api::Hip, Api::Cuda, Api::Host]
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown API `{s}` (expected opencl, hip, cuda, host)"))
    }
}

/// The participant on the other side of an OpenCL device: the host CPU now, a HIP or CUDA
/// device later. Its label is what appears in case ids (`host`, `cuda0`, `hip1`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Peer {
    pub api: Api,
    /// Device ordinal inside its API; 0 for the host.
    pub ordinal: usize,
}

impl Peer {
    pub const HOST: Peer = Peer {
        api: Api::Host,
        ordinal: 0,
    };

    pub fn label(&self) -> String {
        match self.api {
            Api::Host => "host".to_string(),
            api => format!("{}{}", api.name(), self.ordinal),
        }
    }
}

/// Where an OpenCL device lives in the ICD's enumeration, and the short label case ids use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClDeviceRef {
    pub platform_index: usize,
    pub device_index: usize,
    /// `pocl0`, `nvidia0`, `rocm1`: vendor family plus the index within that family, so ids stay
    /// stable when another vendor's ICD is installed beside it.
    pub label: String,
}

/// An OpenCL device and the participant it exchanges memory with. For device peers this is the
/// same physical GPU, matched by UUID or PCI bus id, never by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pair {
    pub opencl: ClDeviceRef,
    pub peer: Peer,
    /// Which of several ROCm installs of one run the peer comes from: its version (`6.3.2`,
    /// with `~N` where two installs have the same). `None` with one install or none, so that a
    /// single-install run keeps its ids (`pocl0+hip0/...`) and results files without the field
    /// still load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
    /// A pair across two GPUs: the OpenCL device's GPU as the peer's runtime numbers it, the
    /// peer being another GPU. `None` where OpenCL and the peer are one GPU (and for the
    /// host), so that those pairs keep their ids and results files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cl_gpu: Option<usize>,
}

/// What a pair across two GPUs adds to its id: `nvidia0+cuda1.xgpu` is OpenCL on nvidia0's GPU
/// and CUDA on another GPU, cuda1, whichever GPU nvidia0 is.
pub const ACROSS_GPUS: &str = ".xgpu";

#[cfg(test)]
impl Pair {
    /// `nvidia0+cuda0` on OpenCL's first platform and device: the pair unit tests build their
    /// NVIDIA cases on.
    pub(crate) fn nvidia0_cuda0() -> Pair {
        Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: 0,
                label: "nvidia0".into(),
            },
            peer: Peer {
                api: Api::Cuda,
                ordinal: 0,
            },
            install: None,
            cl_gpu: None,
        }
    }
}

impl Pair {
    /// The pair's kind, what its worker starts cost: its OpenCL vendor family and its peer's
    /// API (`nvidia0+cuda1` is `nvidia+cuda`).
    pub fn kind(&self) -> String {
        format!(
            "{}+{}",
            self.opencl
                .label
                .trim_end_matches(|ch: char| ch.is_ascii_digit()),
            self.peer.api.name()
        )
    }

    /// `pocl0+host`, `rocm0+hip0`; with several ROCm installs `rocm0+hip@6.3.2:0`; across two
    /// GPUs `nvidia0+cuda1.xgpu`.
    pub fn id(&self) -> String {
        let across = if self.cl_gpu.is_some() {
            ACROSS_GPUS
        } else {
            ""
        };
        format!("{}+{}{across}", self.opencl.label, self.peer_label())
    }

    /// The peer as ids spell it: `hip0`, or `hip@6.3.2:0` for a device of one of several
    /// installs (the install before the colon, the device ordinal after it).
    pub fn peer_label(&self) -> String {
        match &self.install {
            Some(install) => format!(
                "{}:{}",
                participant(self.peer.api, install),
                self.peer.ordinal
            ),
            None => self.peer.label(),
        }
    }

    /// The participant without its device: `hip@6.3.2` for one of several installs, else the
    /// API's name (`hip`, `cuda`, `host`). What a comparison across installs has as columns.
    pub fn participant(&self) -> String {
        match &self.install {
            Some(install) => participant(self.peer.api, install),
            None => self.peer.api.name().to_string(),
        }
    }
}

/// `hip@6.3.2`: an API's runtime from one install, named by the install's label.
pub fn participant(api: Api, install: &str) -> String {
    format!("{}@{install}", api.name())
}

/// Declares a kebab-case enum with `name()`, `ALL`, `FromStr` and `Display`, so that ids, case
/// files and JSON all use the same spelling.
macro_rules! named_enum {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $text)] $variant,)* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)*
                    _ => Err(format!(
                        "unknown {} `{}` (expected one of: {})",
                        stringify!($name), s,
                        [$($text,)*].join(", ")
                    )),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

// `PathKind`, made by build.rs from the paths each room of src/paths/ declares, in the order
// of cases/paths.toml: the model keeps the names, the rooms say what they are.
include!(concat!(env!("OUT_DIR"), "/path_kind.rs"));

named_enum! {
    /// How ownership of the shared memory passes from one API to the other.
    pub enum SyncMode {
        /// clFinish (and the peer's device synchronize).
        Finish => "finish",
        /// clWaitForEvents on the last command's event (and the peer's stream/event sync).
        Event => "event",
        /// clEnqueueMap*/Unmap* bracket around the peer's access.
        Map => "map",
        /// clEnqueueAcquire/ReleaseExternalMemObjectsKHR around OpenCL use of imported memory.
        AcquireRelease => "acquire-release",
        /// External semaphores signalled by one side and waited on by the other.
        Semaphore => "semaphore",
        /// Negative control: no sync at all. A stale read is expected and shows checks see one.
        None => "none",
    }
}

named_enum! {
    /// What a case computes across the pair.
    pub enum Op {
        /// Bit-exact pattern written by one side, checked and changed by the other, checked again.
        Handoff => "handoff",
        /// Forward complex FFT on OpenCL, result consumed by the peer.
        Fft => "fft",
        /// cgemm on the peer over matrices produced by OpenCL.
        Gemm => "gemm",
        /// cpotrf on the peer over a matrix produced by OpenCL.
        Cholesky => "cholesky",
        /// The MI100 notes' chain (docs/domain.md#the-mi100-notes): OpenCL add -> OpenCL FFT -> peer scale -> peer magnitude.
        Pipeline => "pipeline",
        /// Where the shared memory lives: bandwidth of the peer's scale kernel on it, against
        /// the same kernel on the peer's device memory and on its pinned host memory.
        Placement => "placement",
        /// One buffer handed back and forth 1,000 times, a fresh pattern checked bit-exact at
        /// every crossing.
        Reuse => "reuse",
    }
}

impl Op {
    /// Which peers can run the op: gemm and cholesky need a BLAS/solver library on the peer.
    pub fn applies_to(self, peer: Api) -> bool {
        match self {
            Op::Handoff | Op::Fft | Op::Pipeline | Op::Reuse => true,
            Op::Gemm | Op::Cholesky | Op::Placement => peer != Api::Host,
        }
    }

    /// Ops that take a matrix dimension rather than a vector length.
    pub fn is_matrix(self) -> bool {
        matches!(self, Op::Gemm | Op::Cholesky)
    }

    /// Ops whose data is the bit-exact pattern (kernels/pattern.*), not a generator's draw.
    pub fn checks_a_pattern(self) -> bool {
        matches!(self, Op::Handoff | Op::Reuse)
    }
}

/// See [`Case::is_negative_control`]. `finish` breaks the rule of a path whose memory OpenCL
/// hands over only by map/unmap (USE_HOST_PTR) or acquire/release (imported memory), as its
/// room declares.
pub fn is_negative_control(path: PathKind, sync: SyncMode) -> bool {
    let finish_breaks_a_rule = path.only_handed_over_by().is_some();
    sync == SyncMode::None || (sync == SyncMode::Finish && finish_breaks_a_rule)
}

/// One cell of the matrix on one pair at one size: the unit that runs, passes or fails.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Case {
    pub pair: Pair,
    pub path: PathKind,
    pub sync: SyncMode,
    pub op: Op,
    /// Complex elements for vector ops, the matrix dimension for matrix ops.
    pub n: usize,
    /// The environment variant its worker runs under (a case file's `[[variant]]`); empty for
    /// the plain environment, and then absent from the results file, as before variants.
    #[serde(default, skip_serializing_if = "EnvVariant::is_empty")]
    pub env: EnvVariant,
}

impl Case {
    /// Cases that leave out a sync the specification requires, to show that the checks see
    /// what goes wrong then: no sync at all; USE_HOST_PTR memory read without map (a runtime
    /// may keep a device copy, OpenCL 1.2 §5.2.1); imported memory used without
    /// acquire/release (cl_khr_external_memory). Their `fail` is expected.
    pub fn is_negative_control(&self) -> bool {
        is_negative_control(self.path, self.sync)
    }

    /// The stable, readable id: `pocl0+host/cl-svm-fine/map/fft/n=4096`; a case of an
    /// environment variant ends in one more segment, `.../n=4096/env:HSA_ENABLE_SDMA=0`.
    pub fn id(&self) -> String {
        let id = format!(
            "{}/{}/{}/{}/n={}",
            self.pair.id(),
            self.path,
            self.sync,
            self.op,
            self.n
        );
        if self.env.is_empty() {
            id
        } else {
            format!("{id}/{}", self.env.id_segment())
        }
    }

    /// The table a report shows the case in: its pair, and its environment variant if any
    /// (`rocm0+hip0 env:HSA_ENABLE_SDMA=0`), so that a variant's outcomes never hide among
    /// the plain environment's.
    pub fn table(&self) -> String {
        if self.env.is_empty() {
            self.pair.id()
        } else {
            format!("{} {}", self.pair.id(), self.env.id_segment())
        }
    }
}

/// A call into a runtime that returned an error: which call, its code and the code's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    pub api: Api,
    pub call: String,
    pub code: i64,
    pub name: String,
    /// Anything else worth reading (a build log head, the argument that was refused).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} returned {} ({})", self.call, self.name, self.code)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// The formula of a comparison that allows no difference at all.
pub const BIT_EXACT: &str = "bit-exact";

/// Where data went wrong, and by how much against which bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// What was being checked, e.g. `fft output read by host`.
    pub what: String,
    /// First element outside the bound.
    pub index: usize,
    pub got: String,
    pub want: String,
    /// How many elements are outside the bound.
    pub count: usize,
    pub len: usize,
    // JSON has no NaN or infinity: serde_json writes them as null, read back here as NaN.
    #[serde(deserialize_with = "null_as_nan")]
    pub max_abs_err: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub max_rel_err: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub bound: f64,
    /// The bound as a formula with its source, e.g. `eps_p*||ref||_inf*ln(N) (rocFFT)`.
    pub formula: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.formula == BIT_EXACT {
            return write!(
                f,
                "{}: {} of {} words differ (bit-exact), first at [{}] got {} want {}",
                self.what, self.count, self.len, self.index, self.got, self.want
            );
        }
        write!(
            f,
            "{}: {} of {} elements out of bound, first at [{}] got {} want {}; max abs err {:.3e}, max rel err {:.3e}, bound {:.3e} = {}",
            self.what,
            self.count,
            self.len,
            self.index,
            self.got,
            self.want,
            self.max_abs_err,
            self.max_rel_err,
            self.bound,
            self.formula
        )
    }
}

fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Why a case came out `fail`: wrong data, or an API that misbehaved after accepting the setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FailReason {
    Mismatch(Mismatch),
    Api(ApiError),
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::Mismatch(m) => m.fmt(f),
            FailReason::Api(e) => e.fmt(f),
        }
    }
}

/// What happened to a case. Every non-pass carries its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    Pass {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        note: String,
    },
    /// Wrong data, or an API that accepted the setup and then broke: silent corruption is the
    /// worst verdict a user can get.
    Fail {
        reason: FailReason,
    },
    /// The API reported a device memory fault (illegal address, launch failure).
    Fault {
        error: ApiError,
    },
    /// A process of the case died by a signal: the worker, or (`process` set) a helper
    /// process the case started, such as the IPC path's exporter.
    Crash {
        signal: i32,
        signal_name: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        stderr_tail: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        process: String,
    },
    Timeout {
        after_s: f64,
        /// The last blocking call the worker announced before it stopped answering (a
        /// semaphore wait it enqueued, say): where it most likely hangs.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        blocked_in: String,
    },
    /// The capability is absent, or an API call cleanly refused the combination.
    Unsupported {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ApiError>,
    },
    Skip {
        reason: String,
    },
    /// The case passed while the kernel logged a GPU driver warning or error (the lines are
    /// the result's `kernel_log`): a pass that needs a look, never a failure of the run.
    Warn {
        warning: String,
    },
    /// The run died (the machine rebooted, the runner was killed) while this case ran; set
    /// when the run is resumed from its journal. Nothing is known of the case's own outcome.
    Incomplete {
        reason: String,
    },
    /// The harness's own error (a panic in the worker, a check that contradicts itself, a
    /// protocol it could not read): never a verdict on the driver.
    Error {
        reason: String,
    },
}

named_enum! {
    /// The outcome without its reason: what matrices and counters show.
    pub enum OutcomeKind {
        Pass => "pass",
        Fail => "fail",
        Fault => "fault",
        Crash => "crash",
        Timeout => "timeout",
        Unsupported => "unsupported",
        Skip => "skip",
        Error => "error",
        Warn => "warn",
        Incomplete => "incomplete",
    }
}

impl Outcome {
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Pass { .. } => OutcomeKind::Pass,
            Outcome::Fail { .. } => OutcomeKind::Fail,
            Outcome::Fault { .. } => OutcomeKind::Fault,
            Outcome::Crash { .. } => OutcomeKind::Crash,
            Outcome::Timeout { .. } => OutcomeKind::Timeout,
            Outcome::Unsupported { .. } => OutcomeKind::Unsupported,
            Outcome::Skip { .. } => OutcomeKind::Skip,
            Outcome::Error { .. } => OutcomeKind::Error,
            Outcome::Warn { .. } => OutcomeKind::Warn,
            Outcome::Incomplete { .. } => OutcomeKind::Incomplete,
        }
    }

    pub fn pass() -> Self {
        Outcome::Pass {
            note: String::new(),
        }
    }

    pub fn unsupported(reason: impl Into<String>) -> Self {
        Outcome::Unsupported {
            reason: reason.into(),
            error: None,
        }
    }

    /// No result within `after_s` seconds, with no blocking call announced.
    pub fn timeout(after_s: f64) -> Self {
        Outcome::Timeout {
            after_s,
            blocked_in: String::new(),
        }
    }

    pub fn mismatch(m: Mismatch) -> Self {
        Outcome::Fail {
            reason: FailReason::Mismatch(m),
        }
    }

    /// One line a person reads in a terminal next to the case id.
    pub fn reason(&self) -> String {
        match self {
            Outcome::Pass { note } => note.clone(),
            Outcome::Fail { reason } => reason.to_string(),
            Outcome::Fault { error } => error.to_string(),
            Outcome::Crash {
                signal,
                signal_name,
                stderr_tail,
                process,
            } => {
                let last = stderr_tail.lines().last().unwrap_or("");
                let who = if process.is_empty() {
                    "worker"
                } else {
                    process
                };
                let how = if *signal == 0 {
                    format!("{who} ended with {signal_name} mid-case")
                } else {
                    format!("{who} killed by {signal_name} (signal {signal})")
                };
                format!("{how} {last}").trim_end().to_string()
            }
            Outcome::Timeout {
                after_s,
                blocked_in,
            } if blocked_in.is_empty() => {
                format!("no result after {after_s:.1} s")
            }
            Outcome::Timeout {
                after_s,
                blocked_in,
            } => format!(
                "no result after {after_s:.1} s; last blocking call announced: {blocked_in}"
            ),
            Outcome::Unsupported { reason, error } => match error {
                Some(e) => format!("{reason}: {e}"),
                None => reason.clone(),
            },
            Outcome::Skip { reason } => reason.clone(),
            Outcome::Error { reason } => format!("harness error: {reason}"),
            Outcome::Warn { warning } => format!("pass, with a kernel warning: {warning}"),
            Outcome::Incomplete { reason } => reason.clone(),
        }
    }
}

/// What a run expects of a case, from the baseline and the case's nature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// The run's baseline does not list the case: it passed on this driver before, so any
    /// non-pass is a regression, `unsupported` included (a capability that disappeared).
    Pass,
    /// No baseline at all: nothing is known to have passed before, so a refusal (`unsupported`,
    /// `skip`) is not a loss; wrong data, faults, crashes and hangs still need a look.
    Unbaselined,
    /// A baseline lists this outcome kind as known for this driver.
    Known(OutcomeKind),
    /// A known flake (an expectation file's `[[flaky]]`): the case is known to come out either
    /// way, the less severe first; each is as expected.
    KnownFlaky(OutcomeKind, OutcomeKind),
    /// Negative control: a stale read (`fail`) shows the checks work; `pass` says the driver
    /// happened to be coherent. Neither is a regression. Any other outcome still counts.
    NegativeControl,
}

/// How an outcome reads against its expectation: what a nightly run reports and exits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    /// A known non-pass came out as known, or a refusal where nothing was known before.
    ExpectedNonPass,
    /// A negative control saw the stale data it exists to catch.
    CaughtStaleRead,
    /// A known non-pass now passes, or moved down the severity order: the baseline needs an
    /// update. Listed, not a failure of the run.
    UnexpectedPass,
    /// Run again alone (`--retries`), it came out otherwise: both outcomes are kept. Listed,
    /// not a failure of the run.
    Flaky,
    /// Worse than expected: the run fails on it.
    Regression,
    /// The harness's own error: no verdict on the driver, and the run fails on it.
    HarnessError,
}

impl Verdict {
    /// Whether this verdict fails the run (non-zero exit).
    pub fn fails_run(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::HarnessError)
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::ExpectedNonPass => "expected non-pass",
            Verdict::CaughtStaleRead => "caught stale read",
            Verdict::UnexpectedPass => "unexpected pass",
            Verdict::Flaky => "flaky",
            Verdict::Regression => "regression",
            Verdict::HarnessError => "harness error",
        }
    }
}

impl OutcomeKind {
    /// How bad an outcome is for a user, the order a release diff ranks by: a pass, then a
    /// skip (not run), then a clean refusal (the driver said no), then a fault, crash or hang
    /// (the driver said so, loudly), then wrong data (silent corruption, the worst). A harness
    /// error is outside the order: it says nothing about the driver.
    pub fn severity(self) -> Option<u8> {
        Some(match self {
            OutcomeKind::Pass | OutcomeKind::Warn => 0,
            OutcomeKind::Skip => 1,
            OutcomeKind::Unsupported => 2,
            // The run died during the case: the case may have taken the machine down.
            OutcomeKind::Fault
            | OutcomeKind::Crash
            | OutcomeKind::Timeout
            | OutcomeKind::Incomplete => 3,
            OutcomeKind::Fail => 4,
            OutcomeKind::Error => return None,
        })
    }
}

impl Expectation {
    /// How `kind` reads against this expectation.
    pub fn verdict(self, kind: OutcomeKind) -> Verdict {
        use OutcomeKind as K;
        let Some(got) = kind.severity() else {
            return Verdict::HarnessError;
        };
        match self {
            // A pass with a kernel warning is a pass: listed to look at, never a failure.
            _ if kind == K::Pass || kind == K::Warn => match self {
                Expectation::Known(known) if known != K::Pass && known != kind => {
                    Verdict::UnexpectedPass
                }
                Expectation::KnownFlaky(a, b)
                    if a != K::Pass && b != K::Pass && a != kind && b != kind =>
                {
                    Verdict::UnexpectedPass
                }
                _ => Verdict::Pass,
            },
            Expectation::Pass => Verdict::Regression,
            Expectation::Unbaselined => match kind {
                K::Unsupported | K::Skip => Verdict::ExpectedNonPass,
                _ => Verdict::Regression,
            },
            Expectation::Known(known) if known == kind => Verdict::ExpectedNonPass,
            Expectation::Known(known) => match known.severity() {
                Some(was) if got < was => Verdict::UnexpectedPass,
                // Up the order, or sideways (a known fault that now crashes): the driver
                // changed for the worse or in kind, and someone should look.
                _ => Verdict::Regression,
            },
            Expectation::KnownFlaky(a, b) if kind == a || kind == b => Verdict::ExpectedNonPass,
            // Below both ways it is known to go is better than known; anything else (up the
            // order, or sideways) is a change someone should look at, as for one known outcome.
            Expectation::KnownFlaky(a, b) => match (a.severity(), b.severity()) {
                (Some(x), Some(y)) if got < x.min(y) => Verdict::UnexpectedPass,
                _ => Verdict::Regression,
            },
            Expectation::NegativeControl => match kind {
                K::Fail => Verdict::CaughtStaleRead,
                K::Unsupported | K::Skip => Verdict::ExpectedNonPass,
                _ => Verdict::Regression,
            },
        }
    }

    /// How `outcome` reads against this expectation. A negative control is there to catch
    /// stale data: a `fail` there is a caught stale read only when it is wrong data. An API
    /// that accepted the setup and then broke (a refused allocation the device advertises, a
    /// failed read-back) is no stale read, and fails the run as it would anywhere else.
    pub fn verdict_of(self, outcome: &Outcome) -> Verdict {
        if self == Expectation::NegativeControl
            && matches!(
                outcome,
                Outcome::Fail {
                    reason: FailReason::Api(_)
                }
            )
        {
            return Verdict::Regression;
        }
        self.verdict(outcome.kind())
    }

    /// Whether `kind` should fail the run (non-zero exit).
    pub fn is_unexpected(self, kind: OutcomeKind) -> bool {
        self.verdict(kind).fails_run()
    }
}

/// How a case stops early. Which variant an API error becomes depends on the phase it came
/// from: while setting up the combination a refusal is `Unsupported` (the driver said no); once
/// the setup was accepted, a device memory fault is `Fault` and any other error is `Broken`.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseError {
    Unsupported {
        reason: String,
        error: Option<ApiError>,
    },
    Fault(ApiError),
    Broken(ApiError),
    Mismatch(Box<Mismatch>),
    /// Not run: the device was found unfit before the case (a failed known-answer check).
    Skip(String),
    /// The harness's own error, never the driver's.
    Harness(String),
    /// A wait that can no longer end: OpenCL still waits on a semaphore the peer has already
    /// signalled. The worker reports it as a `timeout` before the runner's limit, and exits:
    /// its queue holds a wait that never completes.
    Hung {
        after_s: f64,
        blocked_in: String,
    },
    /// A helper process the case started died (the worker's own death is the runner's to see).
    Crashed {
        process: String,
        signal: i32,
        signal_name: String,
        stderr_tail: String,
    },
}

impl CaseError {
    pub fn unsupported(reason: impl Into<String>) -> Self {
        CaseError::Unsupported {
            reason: reason.into(),
            error: None,
        }
    }

    /// The same error, with what the case learned on the way added to its reason.
    pub fn with_note(self, note: &str) -> Self {
        let add = |mut e: ApiError| {
            e.detail = if e.detail.is_empty() {
                note.to_string()
            } else {
                format!("{}; {note}", e.detail)
            };
            e
        };
        match self {
            CaseError::Unsupported { reason, error } => CaseError::Unsupported {
                reason: format!("{reason} ({note})"),
                error,
            },
            CaseError::Fault(e) => CaseError::Fault(add(e)),
            CaseError::Broken(e) => CaseError::Broken(add(e)),
            CaseError::Mismatch(mut m) => {
                m.what = format!("{} ({note})", m.what);
                CaseError::Mismatch(m)
            }
            CaseError::Skip(reason) => CaseError::Skip(format!("{reason} ({note})")),
            CaseError::Harness(reason) => CaseError::Harness(format!("{reason} ({note})")),
            CaseError::Hung {
                after_s,
                blocked_in,
            } => CaseError::Hung {
                after_s,
                blocked_in: format!("{blocked_in} ({note})"),
            },
            CaseError::Crashed {
                process,
                signal,
                signal_name,
                stderr_tail,
            } => CaseError::Crashed {
                process,
                signal,
                signal_name,
                stderr_tail: format!("{stderr_tail}\n{note}"),
            },
        }
    }

    pub fn into_outcome(self) -> Outcome {
        match self {
            CaseError::Unsupported { reason, error } => Outcome::Unsupported { reason, error },
            CaseError::Fault(error) => Outcome::Fault { error },
            CaseError::Broken(e) => Outcome::Fail {
                reason: FailReason::Api(e),
            },
            CaseError::Mismatch(m) => Outcome::mismatch(*m),
            CaseError::Skip(reason) => Outcome::Skip { reason },
            CaseError::Harness(reason) => Outcome::Error { reason },
            CaseError::Hung {
                after_s,
                blocked_in,
            } => Outcome::Timeout {
                after_s,
                blocked_in,
            },
            CaseError::Crashed {
                process,
                signal,
                signal_name,
                stderr_tail,
            } => Outcome::Crash {
                signal,
                signal_name,
                stderr_tail,
                process,
            },
        }
    }
}

impl From<Mismatch> for CaseError {
    fn from(m: Mismatch) -> Self {
        CaseError::Mismatch(Box::new(m))
    }
}

/// Classify an API error by when it came. A device memory fault is `fault` whenever it is
/// seen (a sticky fault can surface in any later call, an allocation included). Any other error
/// code is the driver saying no, cleanly: `unsupported` with the call and its code, never
/// `fail`, which is kept for wrong data and for what a driver advertises but breaks.
pub trait Phase<T> {
    /// Setting up the combination.
    fn refused(self, what: &str) -> Result<T, CaseError>;
    /// Running a combination the setup accepted.
    fn running(self) -> Result<T, CaseError>;
}

impl<T> Phase<T> for Result<T, ApiError> {
    fn refused(self, what: &str) -> Result<T, CaseError> {
        self.map_err(|e| {
            if e.is_device_fault() {
                CaseError::Fault(e)
            } else {
                CaseError::Unsupported {
                    reason: what.to_string(),
                    error: Some(e),
                }
            }
        })
    }

    fn running(self) -> Result<T, CaseError> {
        self.map_err(|e| {
            if e.is_device_fault() {
                CaseError::Fault(e)
            } else {
                CaseError::Unsupported {
                    reason: "refused while the case ran".into(),
                    error: Some(e),
                }
            }
        })
    }
}

impl ApiError {
    /// Codes by which a runtime reports that a device touched memory it must not. NVIDIA's
    /// OpenCL reports a kernel's illegal address as CL_OUT_OF_RESOURCES on the next call and
    /// fails dependent commands with CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST.
    pub fn is_device_fault(&self) -> bool {
        match self.api {
            Api::OpenCl => matches!(self.code, -5 | -14),
            Api::Cuda | Api::Hip => matches!(
                self.name.as_str(),
                "CUDA_ERROR_ILLEGAL_ADDRESS"
                    | "CUDA_ERROR_LAUNCH_FAILED"
                    | "CUDA_ERROR_ILLEGAL_INSTRUCTION"
                    | "CUDA_ERROR_MISALIGNED_ADDRESS"
                    | "hipErrorIllegalAddress"
                    | "hipErrorLaunchFailure"
            ),
            Api::Host => false,
        }
    }
}

impl std::error::Error for ApiError {}

/// BLAS `op(X)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transpose {
    /// `X`
    None,
    /// `X^T`
    Trans,
    /// `X^H`
    ConjTrans,
}

/// Which triangle of a Hermitian matrix LAPACK reads and overwrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Uplo {
    Upper,
    Lower,
}

#[cfg(test)]
mod tests;
