//! `clhip repro`: one case as a standalone C program a driver engineer can attach to a bug.
//!
//! The program uses the vendor APIs alone (OpenCL for host pairs; CUDA's driver API, NVRTC,
//! cuBLAS and cuSOLVER beside OpenCL for cuda pairs; HIP's runtime API, hiprtc, rocBLAS and
//! rocSOLVER for hip pairs), makes the case's input in-file with clhip's own generator from
//! the data seed, or the simple input it was shrunk to (bit-identical: `tests/repro.rs`
//! compiles the C generator and compares it word for word with `generate`), runs the path's
//! and the sync's calls in clhip's order with clhip's kernels, and holds the result to clhip's
//! bound, written in the file as a formula with its source. Its exit code says the outcome.
//!
//! One file per concern: `emit` (the case's steps as C: paths, syncs, ops), `host`, `cuda` and
//! `hip` (each target API's names and build script), `device` (what the cuda and hip targets
//! share), `shrink` (the smallest size, then the simplest data, that still give the outcome,
//! found by running the case through clhip's workers), `kernels` (clhip's kernel sources,
//! trimmed to what a case launches), `make` (the command from request to files: the outcome
//! learned, the shrink through the workers, the writing). The C text lives in `templates/`.

mod all;
mod cuda;
mod device;
mod emit;
mod hip;
mod host;
mod interop;
mod issue;
mod kernels;
mod make;
mod shrink;
mod tidy;

use std::fmt;

use anyhow::{Context, bail};

use crate::generate::DataKind;
use crate::model::{Api, EnvVariant, Op, OutcomeKind, PathKind, Peer, SyncMode};
use crate::ops::{Plant, data_seed};
use crate::paths::PathFacts;

pub use all::{AllRequest, Chosen, Written, choose, make_all};
pub use make::{AlreadyShrunk, Made, Request, make};
pub use shrink::{RunCases, Shrunk, SimplerData, candidates, has_data, shrink, simplify_data};

/// A case as its id names it: the OpenCL device by its label, the peer, path, sync, op, size
/// and environment variant. The reproducer needs no more (it finds the device by the label
/// rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReproCase {
    /// `pocl0`, `nvidia0`.
    pub cl_label: String,
    pub peer: Peer,
    pub path: PathKind,
    pub sync: SyncMode,
    pub op: Op,
    pub n: usize,
    /// The variables the case ran under (`/env:...` in its id); empty: the plain environment.
    pub env: EnvVariant,
}

impl fmt::Display for ReproCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}+{}/{}/{}/{}/n={}",
            self.cl_label,
            self.peer.label(),
            self.path,
            self.sync,
            self.op,
            self.n
        )?;
        if !self.env.is_empty() {
            write!(f, "/{}", self.env.id_segment())?;
        }
        Ok(())
    }
}

impl ReproCase {
    /// Parse `pair/path/sync/op/n=N[/env:NAME=value+...]`, e.g.
    /// `pocl0+host/use-host-ptr/map/handoff/n=4097`, and check that the combination is one
    /// clhip runs.
    pub fn parse(id: &str) -> anyhow::Result<Self> {
        let usage = "a case id reads `<opencl label>+<peer>/<path>/<sync>/<op>/n=<size>`, \
                     with `/env:NAME=value+...` after it for an environment variant, \
                     e.g. `pocl0+host/use-host-ptr/map/handoff/n=4097` (`clhip list` prints them)";
        let parts: Vec<&str> = id.split('/').collect();
        let (pair, path, sync, op, size, env) = match parts[..] {
            [pair, path, sync, op, size] => (pair, path, sync, op, size, EnvVariant::default()),
            [pair, path, sync, op, size, env] => (
                pair,
                path,
                sync,
                op,
                size,
                EnvVariant::parse_segment(env)
                    .map_err(|e| anyhow::anyhow!("case id `{id}`: {e}"))?,
            ),
            _ => bail!("case id `{id}`: {usage}"),
        };
        if pair.ends_with(crate::model::ACROSS_GPUS) {
            bail!(
                "case id `{id}`: a pair across GPUs (`{}`) has no reproducer yet: the \
                 reproducer opens OpenCL and the peer on one GPU",
                crate::model::ACROSS_GPUS
            );
        }
        let (cl_label, peer) = pair
            .split_once('+')
            .with_context(|| format!("case id `{id}`: no `+` in the pair `{pair}`; {usage}"))?;
        label_parts(cl_label).with_context(|| {
            format!("case id `{id}`: `{cl_label}` is no OpenCL label (a family and an index, e.g. pocl0)")
        })?;
        let peer = parse_peer(peer).with_context(|| format!("case id `{id}`"))?;
        let path: PathKind = path
            .parse()
            .map_err(|e: String| anyhow::anyhow!("case id `{id}`: {e}"))?;
        let sync: SyncMode = sync
            .parse()
            .map_err(|e: String| anyhow::anyhow!("case id `{id}`: {e}"))?;
        let op: Op = op
            .parse()
            .map_err(|e: String| anyhow::anyhow!("case id `{id}`: {e}"))?;
        let n: usize = size
            .strip_prefix("n=")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("case id `{id}`: `{size}` is not `n=<size>`"))?;
        let case = ReproCase {
            cl_label: cl_label.to_string(),
            peer,
            path,
            sync,
            op,
            n,
            env,
        };
        case.validate()
            .with_context(|| format!("case id `{id}` names no case clhip runs"))?;
        Ok(case)
    }

    /// The same case at another size.
    pub fn with_n(&self, n: usize) -> Self {
        ReproCase { n, ..self.clone() }
    }

    /// `pocl0+host`.
    pub fn pair_id(&self) -> String {
        format!("{}+{}", self.cl_label, self.peer.label())
    }

    fn validate(&self) -> anyhow::Result<()> {
        let api = self.peer.api;
        if !self.path.applies_to(api) {
            bail!("path {} has no {} peer", self.path, api.name());
        }
        if !self.path.syncs(api).contains(&self.sync) {
            let takes: Vec<&str> = self.path.syncs(api).iter().map(|s| s.name()).collect();
            bail!(
                "path {} with a {} peer takes sync {}, not {}",
                self.path,
                api.name(),
                takes.join(", "),
                self.sync
            );
        }
        if !self.op.applies_to(api) {
            bail!("op {} needs a device peer, not {}", self.op, api.name());
        }
        if self.n == 0 {
            bail!("n = 0 is no case");
        }
        if matches!(self.op, Op::Fft | Op::Pipeline)
            && !(crate::fft::supports(self.n) && self.n > 1)
        {
            bail!(
                "the {} op takes powers of two from 2 to {}, not {}",
                self.op,
                crate::fft::MAX_N,
                self.n
            );
        }
        Ok(())
    }
}

/// The word a platform's lower-cased name holds for clhip to give its devices `family`'s labels
/// (runtimes/opencl/devices.rs `family`); none for `cl`, the family of names no rule knows.
fn platform_word(family: &str) -> Option<&'static str> {
    Some(match family {
        "pocl" => "portable computing language",
        "nvidia" => "nvidia",
        "rocm" => "amd",
        "rusticl" => "rusticl",
        "clover" => "clover",
        "intel" => "intel",
        _ => return None,
    })
}

/// `pocl0` -> (`pocl`, 0).
fn label_parts(label: &str) -> Option<(&str, u32)> {
    let at = label.find(|c: char| c.is_ascii_digit())?;
    let (family, index) = label.split_at(at);
    if family.is_empty() || !family.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    Some((family, index.parse().ok()?))
}

fn parse_peer(s: &str) -> anyhow::Result<Peer> {
    if s == "host" {
        return Ok(Peer::HOST);
    }
    let digits = s.find(|c: char| c.is_ascii_digit()).unwrap_or(s.len());
    let (api, ordinal) = s.split_at(digits);
    let api: Api = api.parse().map_err(anyhow::Error::msg)?;
    let ordinal: usize = ordinal
        .parse()
        .with_context(|| format!("peer `{s}`: expected host, cuda<N> or hip<N>"))?;
    if matches!(api, Api::Host | Api::OpenCl) {
        bail!("peer `{s}`: expected host, cuda<N> or hip<N>");
    }
    Ok(Peer { api, ordinal })
}

/// What the reproducer generator covers; anything else is refused by name, never emitted
/// wrong.
pub fn check_covered(case: &ReproCase) -> anyhow::Result<()> {
    let family = label_parts(&case.cl_label).map_or("", |(f, _)| f);
    if platform_word(family).is_none() {
        bail!(
            "{case}: the reproducer finds its OpenCL device by the vendor's platform name, and \
             `{family}` is no vendor clhip knows (pocl, nvidia, rocm, rusticl, clover, intel)"
        );
    }
    let ops: &[Op] = match case.peer.api {
        Api::Host => host::OPS,
        Api::Cuda => cuda::OPS,
        Api::Hip => hip::OPS,
        Api::OpenCl => bail!("{case}: OpenCL is no peer"),
    };
    // The paths: each room says whether it has C, for the peers its paths apply to.
    let api = case.peer.api;
    let paths: Vec<PathKind> = PathKind::ALL
        .iter()
        .copied()
        .filter(|p| p.has_reproducer(api))
        .collect();
    let names = |xs: Vec<&str>| xs.join(", ");
    if !paths.contains(&case.path) {
        bail!(
            "{case}: the reproducer generator does not cover path {} on {} pairs yet (it covers {})",
            case.path,
            case.peer.api.name(),
            names(paths.iter().map(|p| p.name()).collect())
        );
    }
    if !ops.contains(&case.op) {
        bail!(
            "{case}: the reproducer generator does not cover op {} on {} pairs yet (it covers {})",
            case.op,
            case.peer.api.name(),
            names(ops.iter().map(|o| o.name()).collect())
        );
    }
    Ok(())
}

/// What the header says beside the case: what clhip saw, where from, and what was shrunk.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The run seed (`--seed`).
    pub seed: u64,
    /// The outcome clhip saw for the case as emitted, with its reason.
    pub seen: Option<(OutcomeKind, String)>,
    /// Where that outcome comes from: a results file, or a run of this build.
    pub seen_from: String,
    /// One line on shrinking the size: from what to what, or why not.
    pub shrink: String,
    /// One line on simplifying the data: from what to what, or why not.
    pub data: String,
    /// The driver fingerprint's lines that concern the pair.
    pub fingerprint: Vec<String>,
    /// Where the fingerprint comes from.
    pub fingerprint_from: String,
    /// What clhip expected and observed, and the bound, for ISSUE.md ([`issue_facts`]).
    pub facts: Vec<(String, String)>,
}

pub use issue::facts as issue_facts;

/// A reproducer: its C source and the files beside it.
#[derive(Debug, Clone)]
pub struct Reproducer {
    pub source: String,
    pub build_sh: String,
    pub readme: String,
    /// The bug report in the vendor's issue form's fields.
    pub issue: String,
}

/// The files a reproducer is, in its directory.
pub const FILES: [&str; 4] = ["repro.c", "build.sh", "README.md", "ISSUE.md"];

impl Reproducer {
    /// Writes `repro.c`, `build.sh` (executable) and `README.md` into `dir` (made if missing,
    /// but not the directories above it), replacing only clhip's own earlier files there.
    pub fn write(&self, dir: &std::path::Path) -> anyhow::Result<()> {
        self.write_to(&crate::output::check_dir("-o", dir, &FILES)?)
    }

    /// [`Reproducer::write`] into a directory checked before the case ran.
    pub fn write_to(&self, dir: &crate::output::DirTarget) -> anyhow::Result<()> {
        dir.write(&[
            (FILES[0], self.source.as_bytes(), 0o666),
            (FILES[1], self.build_sh.as_bytes(), 0o777),
            (FILES[2], self.readme.as_bytes(), 0o666),
            (FILES[3], self.issue.as_bytes(), 0o666),
        ])
    }
}

/// The reproducer of `case` on data `kind` under run seed `header.seed`; with `plant`
/// (`skip-sync`), the sync clhip runs where the peer takes OpenCL's output is left out, or
/// (`straddle-2mib`, host pairs) a word past 2 MiB of memory that reaches past it is flipped
/// there.
pub fn generate(
    case: &ReproCase,
    kind: DataKind,
    header: &Header,
    plant: Option<Plant>,
) -> anyhow::Result<Reproducer> {
    check_covered(case)?;
    check_plant(case, plant)?;
    let seed = data_seed(header.seed, case.op, case.n);
    let (source, build_sh) = match case.peer.api {
        Api::Cuda => cuda::program(
            case,
            &emit::body(case, seed, kind, Some(&cuda::API.dialect), plant)?,
        ),
        Api::Hip => hip::program(
            case,
            &emit::body(case, seed, kind, Some(&hip::API.dialect), plant)?,
        ),
        _ => host::program(case, &emit::body(case, seed, kind, None, plant)?),
    };
    let text = header_text(case, header, seed, kind, plant);
    let source = format!(
        "{}{source}",
        c_comment(&format!("{text}Driver fingerprint: README.md\n"))
    );
    let readme = format!(
        "# Reproducer: {}\n\n{}\nBuild with `./build.sh`, run `{}./repro`. ISSUE.md is the bug report, in the fields of the vendor's issue form.\n",
        crate::escape::markdown_text(&case.to_string()),
        crate::escape::markdown_fence("", &format!("{text}{}", fingerprint_text(header))),
        run_prefix(case),
    );
    let issue = issue::issue(case, header, &build_sh);
    Ok(Reproducer {
        source,
        build_sh,
        readme,
        issue,
    })
}

/// The plants a reproducer can contain: those that change the calls (skip-sync, skip-one-sync)
/// or the memory (straddle-2mib) at a point the program has too. `skip-one-sync` only where
/// clhip plants it: a reuse case handed over with a wait or a map (elsewhere clhip skips the
/// case, and a program without the plant would pass for one with it).
pub fn check_plant(case: &ReproCase, plant: Option<Plant>) -> anyhow::Result<()> {
    match plant {
        None | Some(Plant::SkipSync | Plant::Straddle2Mib) => Ok(()),
        Some(Plant::SkipOneSync) if case.op != Op::Reuse => bail!(
            "the skip-one-sync plant leaves out one crossing's sync of the reuse op, not of {}: \
             clhip skips such a case",
            case.op
        ),
        Some(Plant::SkipOneSync) if !crate::ops::reuse::skip_one_sync_applies(case.sync) => {
            bail!(
                "the skip-one-sync plant leaves out a wait or a map, not a {} handover: clhip \
                 skips such a case",
                case.sync
            )
        }
        Some(Plant::SkipOneSync) => Ok(()),
        Some(p) => bail!(
            "only the skip-sync, skip-one-sync and straddle-2mib plants have a reproducer, not {p:?}"
        ),
    }
}

/// The header's lines (without comment markers).
fn header_text(
    case: &ReproCase,
    h: &Header,
    seed: u64,
    kind: DataKind,
    plant: Option<Plant>,
) -> String {
    let mut t = format!("clhip reproducer for {case}\n");
    match &h.seen {
        Some((kind, reason)) => {
            t.push_str(&format!("Outcome clhip saw ({}): {kind}", h.seen_from));
            if !reason.is_empty() {
                t.push_str(&format!(": {reason}"));
            }
            t.push('\n');
        }
        None => t.push_str("Outcome clhip saw: not run\n"),
    }
    t.push_str(&format!("Size: {}\n", h.shrink));
    if !case.op.checks_a_pattern() {
        t.push_str(&format!("Data: {}", data_text(kind)));
        if !h.data.is_empty() {
            t.push_str(&format!("; {}", h.data));
        }
        t.push('\n');
    }
    t.push_str(&format!(
        "Data seed {seed:#018x} = ops::data_seed(run seed {}, {}, {})\n",
        h.seed, case.op, case.n
    ));
    if plant == Some(Plant::SkipSync) {
        t.push_str(
            "PLANTED: the sync clhip runs where the peer takes OpenCL's output is left out \
             (--plant skip-sync): this program should see a stale read and exit non-zero.\n",
        );
    }
    if plant == Some(Plant::SkipOneSync) {
        t.push_str(&format!(
            "PLANTED: crossing {} is handed over with no sync, OpenCL's write for it held back \
             by a user event until the peer has looked (--plant skip-one-sync): this program \
             should fail at that crossing, and there only, and exit 1.\n",
            crate::ops::reuse::PLANTED_CROSSING
        ));
    }
    if plant == Some(Plant::Straddle2Mib) {
        t.push_str(
            "PLANTED: where the peer takes OpenCL's output, memory that reaches past 2 MiB has \
             bit 30 of its first word past the boundary flipped (--plant straddle-2mib): at a size \
             past the boundary this program should see wrong data and exit non-zero.\n",
        );
    }
    if !case.env.is_empty() {
        t.push_str(&format!(
            "Environment: clhip ran the case with {} set; run the program so too.\n",
            case.env
        ));
    }
    t.push_str(&format!(
        "Build: ./build.sh; run: {}./repro.",
        run_prefix(case)
    ));
    t.push_str(
        " Exit 0: pass; 1: wrong data (clhip: fail); 2: an API\n  \
         call refused (unsupported); 3: a device memory fault (fault); a signal: a crash.\n",
    );
    t
}

/// What goes before `./repro` on the command line: the case's variables (`HSA_ENABLE_SDMA=0 `),
/// or nothing. Names and values are plain characters ([`EnvVariant`] holds them to that), so
/// the line needs no quoting.
fn run_prefix(case: &ReproCase) -> String {
    case.env.vars().map(|(k, v)| format!("{k}={v} ")).collect()
}

/// The driver fingerprint's lines, for README.md.
fn fingerprint_text(h: &Header) -> String {
    let mut t = format!("Driver fingerprint ({}):\n", h.fingerprint_from);
    for l in &h.fingerprint {
        t.push_str(&format!("  {l}\n"));
    }
    t
}

/// `text` as a block comment; nothing in it (a reason's `/opt/rocm-*/lib`, a terminal escape)
/// can end the comment or reach the compiler as itself.
fn c_comment(text: &str) -> String {
    let mut out = String::from("/*\n");
    for l in crate::escape::c_comment(text).lines() {
        out.push_str(format!(" * {l}").trim_end());
        out.push('\n');
    }
    out.push_str(" */\n");
    out
}

/// The fingerprint lines that concern `case`'s pair: its OpenCL device, its peer's runtime,
/// the kernel modules, the host.
pub fn pair_fingerprint(lines: &[String], case: &ReproCase) -> Vec<String> {
    let cl = format!("opencl {} ", case.cl_label);
    let peer = format!("{} ", case.peer.api.name());
    lines
        .iter()
        .filter(|l| {
            l.starts_with(&cl)
                || (case.peer.api != Api::Host && l.starts_with(&peer))
                || l.starts_with("kernel module")
                || l.starts_with("host cpu")
                || l.starts_with("os kernel")
        })
        .cloned()
        .collect()
}

/// What the program's data are, in words.
fn data_text(kind: DataKind) -> &'static str {
    match kind {
        DataKind::Seeded => "clhip's seeded draw (ChaCha20 keyed by the data seed, generate.rs)",
        DataKind::Ones => "every element (1, 0) (generate::DataKind::Ones)",
        DataKind::Impulse => {
            "an impulse: element 0 (1, 0), every other 0 (generate::DataKind::Impulse)"
        }
        DataKind::SmallIntegers => {
            "small integers from the index and the seed (generate::DataKind::SmallIntegers)"
        }
    }
}

/// A section of the common C template by name (`check_gemm`, `check_exact`, ...), for the tests
/// that run a check on planted data.
pub fn template_section(name: &str) -> &'static str {
    emit::section(emit::COMMON, name)
}

/// The C of imported memory, its syncs and the Vulkan broker (templates/interop.c), for the test
/// that holds its Vulkan declarations to the Vulkan headers.
pub fn interop_template() -> &'static str {
    interop::TEMPLATE
}

/// The C generator of data `kind` alone (every stream's function, the pattern and the reuse
/// op's crossing seeds), for the test that compares it word for word with `generate`.
pub fn generator_source(kind: DataKind) -> String {
    emit::generator_source(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_variant_is_part_of_the_id_and_of_the_run_line() {
        let id = "rocm0+hip0/copy/finish/handoff/n=4097/env:HSA_ENABLE_SDMA=0";
        let case = ReproCase::parse(id).unwrap();
        assert_eq!(case.to_string(), id);
        // Shrinking keeps the environment: a smaller case of another one is another case.
        assert_eq!(
            case.with_n(1).to_string(),
            "rocm0+hip0/copy/finish/handoff/n=1/env:HSA_ENABLE_SDMA=0"
        );
        let plain = ReproCase::parse("rocm0+hip0/copy/finish/handoff/n=4097").unwrap();
        assert!(plain.env.is_empty());
        assert_eq!(plain.to_string(), "rocm0+hip0/copy/finish/handoff/n=4097");

        let made = generate(&case, DataKind::Seeded, &Header::default(), None).unwrap();
        assert!(
            made.source
                .contains("run: HSA_ENABLE_SDMA=0 ./repro. Exit 0"),
            "{}",
            made.source
        );
        assert!(
            made.readme
                .contains("Build with `./build.sh`, run `HSA_ENABLE_SDMA=0 ./repro`."),
            "{}",
            made.readme
        );
        let plain = generate(&plain, DataKind::Seeded, &Header::default(), None).unwrap();
        assert!(plain.source.contains("run: ./repro. Exit 0"));
        assert!(!plain.source.contains("Environment:"));

        for (bad, says) in [
            (
                "rocm0+hip0/copy/finish/handoff/n=1/HSA_ENABLE_SDMA=0",
                "expected `env:",
            ),
            (
                "rocm0+hip0/copy/finish/handoff/n=1/env:B=1+A=0",
                "byte order",
            ),
            (
                "rocm0+hip0/copy/finish/handoff/n=1/env:hsa=0",
                "no variable name",
            ),
            (
                "rocm0+hip0/copy/finish/handoff/n=1/env:A=1/x",
                "a case id reads",
            ),
        ] {
            let e = format!("{:#}", ReproCase::parse(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_pair_across_gpus_is_refused_by_name_not_misread() {
        let err = ReproCase::parse("nvidia0+cuda1.xgpu/copy/finish/handoff/n=4097")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a pair across GPUs (`.xgpu`) has no reproducer yet"),
            "{err}"
        );
        assert!(ReproCase::parse("nvidia0+cuda1/copy/finish/handoff/n=4097").is_ok());
    }
}
