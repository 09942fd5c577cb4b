//! The case's steps as C: each op's sequence (ops/*.rs), in clhip's order, with each path's
//! allocation, poison, handovers and release in the C of the path's room (paths/). The handovers are
//! decided here, at generation time, from the path and the sync, so the program holds only the
//! calls this case makes, in the order it makes them. [`assemble`] then puts around it only
//! the helpers, kernels and checks those calls use.

mod reuse;

use crate::generate::DataKind;
use crate::model::{Op, SyncMode};
use crate::ops::Plant;
use crate::paths::c::{CMem as Mem, CWriter, waits};
use crate::paths::{self, Owner, PathFacts};
use crate::sync::Access;

pub(super) use crate::paths::c::Dialect;

use super::ReproCase;
use super::kernels;
use super::tidy::{
    collapse_repeated_syncs, drop_unused, drop_unused_functions, merge_declarations,
};

pub(super) const COMMON: &str = include_str!("templates/common.c");

/// The text after a template's `/*@ name @*/` line, up to the next such line.
pub(super) fn section(template: &'static str, name: &str) -> &'static str {
    let marker = format!("/*@ {name} @*/\n");
    let Some(start) = template.find(&marker) else {
        unreachable!("template section `{name}` is missing")
    };
    let rest = &template[start + marker.len()..];
    let end = rest.find("/*@ ").unwrap_or(rest.len());
    &rest[..end]
}

/// Which of clhip's generators the op draws from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Draws {
    Vectors,
    Matrices,
    Hpd,
}

/// What [`assemble`] needs around the body.
pub(super) struct Body {
    /// Common sections the body calls.
    pub common: Vec<&'static str>,
    /// OpenCL kernels launched.
    pub cl_kernels: Vec<&'static str>,
    /// The peer's kernels launched (device peers).
    pub peer_kernels: Vec<&'static str>,
    /// Constants and tables (`static const ...`) before the functions.
    pub constants: String,
    /// `int main(void)`.
    pub main: String,
    /// The data generator's sections, for the case's data kind.
    pub generator: Vec<&'static str>,
    /// Peer needs: BLAS (gemm), the solver (cholesky), a scratch allocation (the peer's
    /// pattern check, cpotrf's info), an event (the event sync).
    pub blas: bool,
    pub solver: bool,
    pub scratch: bool,
    pub event: bool,
}

/// C statements with an indent of four, and fresh names for events.
#[derive(Default)]
struct Out {
    text: String,
    events: usize,
}

impl Out {
    fn line(&mut self, s: impl AsRef<str>) {
        for l in s.as_ref().lines() {
            if l.is_empty() {
                self.text.push('\n');
            } else {
                self.text.push_str("    ");
                self.text.push_str(l);
                self.text.push('\n');
            }
        }
    }

    fn comment(&mut self, s: &str) {
        self.line(format!("/* {} */", crate::escape::c_comment(s)));
    }

    /// Prints a step, so that a crash's last line says where it happened.
    fn step(&mut self, s: &str) {
        self.line(format!(
            "puts({});",
            crate::escape::c_string(&format!("-- {s}"))
        ));
    }

    fn event(&mut self, stem: &str) -> String {
        self.events += 1;
        format!("{stem}{}", self.events)
    }
}

/// `launch(...)` of `kernel` over `global` work-items.
fn launch_call(kernel: &str, global: &str, args: &[String], wait: Option<&str>) -> String {
    format!(
        "launch(\"{kernel}\", {global}, {}, (struct arg[]){{{}}}, {});",
        args.len(),
        args.join(", "),
        waits(wait)
    )
}

/// The generator as the case uses it.
struct Gen<'a> {
    case: &'a ReproCase,
    dialect: Option<&'a Dialect>,
    out: Out,
    decls: Vec<String>,
    /// The sync of the handover where the peer takes OpenCL's output (the plant's target).
    take_sync: SyncMode,
    /// The `straddle-2mib` plant: where the peer takes OpenCL's output, memory that reaches
    /// past 2 MiB has a bit of its first word past the boundary flipped.
    straddle: bool,
    /// Common sections the handovers and paths call.
    extra: Vec<&'static str>,
    /// OpenCL kernels the path launches (cl-gpu-va's address kernel).
    path_kernels: Vec<&'static str>,
    /// Why the program cannot be written, if a path's room has no C for a step.
    refused: Option<String>,
}

impl Gen<'_> {
    fn peer_name(&self) -> String {
        self.case.peer.label()
    }

    /// A peer sync: nothing to wait for on the host, whose work is done when it returns.
    fn peer_sync(&mut self) {
        if self.dialect.is_some() {
            self.out.line("peer_synchronize();");
        }
    }

    /// ops::peer_done: the peer's own work waited for before the memory goes back, except
    /// under `semaphore`, whose signal on the peer's stream orders OpenCL after it.
    fn peer_done(&mut self) {
        if self.case.sync != SyncMode::Semaphore {
            self.peer_sync();
        }
    }

    fn uses(&mut self, section: &'static str) {
        if !self.extra.contains(&section) {
            self.extra.push(section);
        }
    }

    fn declare(&mut self, d: impl Into<String>) {
        let d = d.into();
        if !self.decls.contains(&d) {
            self.decls.push(d);
        }
    }

    fn mem(&self, v: &'static str, len: &str) -> Mem {
        Mem {
            v,
            path: self.case.path,
            len: len.to_string(),
            // Imported memory starts out its exporter's: OpenCL acquires it first (Made::owner).
            owner: if self.case.path.is_imported() {
                Owner::Peer
            } else {
                Owner::OpenCl
            },
            mapped: false,
            svm_mapped: false,
        }
    }

    /// `Shared::create` and its poison, in the C of the path's room.
    fn create(&mut self, m: &Mem) {
        let (v, len) = (m.v, m.len.clone());
        self.declare("cl_int err;");
        self.declare(format!("uint64_t {v}_peer;"));
        self.out
            .step(&format!("{} memory {v} of {len} complex floats", m.path));
        paths::room(m.path).c_create(self, m);
    }

    /// `Shared::release`: both sides let go, mappings undone, memory freed by the path's room.
    fn release(&mut self, m: &Mem) {
        let v = m.v;
        self.out.step(&format!("release {v}"));
        self.out.line("CHECK(CL, clFinish(queue));");
        self.peer_sync();
        if m.mapped {
            self.out.line(format!(
                "CHECK(CL, clEnqueueUnmapMemObject(queue, {v}_buf, {v}_map, 0, NULL, NULL));"
            ));
        }
        if m.svm_mapped {
            self.out.line(format!(
                "CHECK(CL, clEnqueueSVMUnmap(queue, {v}_svm, 0, NULL, NULL));"
            ));
        }
        if m.mapped || m.svm_mapped {
            self.out.line("CHECK(CL, clFinish(queue));");
        }
        let sync = self.case.sync;
        crate::paths::c::release_handovers(self, m, sync);
        let lines = paths::room(m.path).c_release(self, m);
        self.out.line(lines);
    }

    /// `paths::to_peer`: hand `m` to the peer after OpenCL work ending with `last`.
    fn hand_to_peer(&mut self, m: &mut Mem, sync: SyncMode, last: Option<&str>, access: Access) {
        if m.owner == Owner::Peer {
            return;
        }
        let v = m.v;
        self.out.comment(&format!(
            "hand {v} to the peer (sync {sync}{})",
            if sync == SyncMode::None {
                ": nothing orders the peer after OpenCL"
            } else {
                ""
            }
        ));
        // The semaphore is every path's (paths::to_peer_with); the rest, the path's room's.
        if sync == SyncMode::Semaphore {
            crate::paths::c::semaphore_to_peer(self, m, last);
        } else {
            paths::room(m.path).c_to_peer(self, m, sync, last, access);
        }
        m.owner = Owner::Peer;
    }

    /// `paths::to_cl`: hand `m` back to OpenCL after the peer's work; the event the next
    /// OpenCL command must wait on, if any.
    fn hand_to_cl(&mut self, m: &mut Mem, sync: SyncMode) -> Option<String> {
        if m.owner == Owner::OpenCl {
            return None;
        }
        let v = m.v;
        self.out
            .comment(&format!("hand {v} back to OpenCL (sync {sync})"));
        match sync {
            SyncMode::None | SyncMode::Semaphore => {}
            SyncMode::Event if self.dialect.is_some() => self.out.line("peer_event_sync();"),
            _ => self.peer_sync(),
        }
        let ready = if sync == SyncMode::Semaphore {
            crate::paths::c::semaphore_to_cl(self, m)
        } else {
            paths::room(m.path).c_to_cl(self, m, sync)
        };
        m.owner = Owner::OpenCl;
        ready
    }

    /// ops::take_output: the handover where the peer takes OpenCL's output, which the
    /// skip-sync plant leaves out.
    fn take_output(&mut self, m: &mut Mem, last: Option<&str>, access: Access) {
        let sync = self.take_sync;
        if sync != self.case.sync {
            self.out.comment(&format!(
                "PLANTED (skip-sync): clhip runs sync {} here; it is left out",
                self.case.sync
            ));
        }
        self.hand_to_peer(m, sync, last, access);
        if self.straddle {
            self.flip_past_boundary(m);
        }
    }

    /// The `straddle-2mib` plant as ops::take_output plants it: `m`'s first word past 2 MiB
    /// gets bit 30 flipped, when `m` reaches past 2 MiB. Decided here, at generation time:
    /// the size is the case's.
    fn flip_past_boundary(&mut self, m: &Mem) {
        let elements = match m.len.as_str() {
            "N" => Some(self.case.n),
            "N * N" => self.case.n.checked_mul(self.case.n),
            _ => None,
        };
        let Some(bytes) = elements.and_then(|e| e.checked_mul(8)) else {
            self.refuse(format!(
                "the straddle-2mib plant has no C for memory of {} complex floats",
                m.len
            ));
            return;
        };
        let Some(word) = Plant::straddle_word(bytes) else {
            self.out.comment(&format!(
                "PLANTED (straddle-2mib): {} ends before 2 MiB, so nothing is flipped",
                m.v
            ));
            return;
        };
        if self.dialect.is_some() {
            self.refuse(
                "the straddle-2mib plant's reproducer is written for host pairs only".into(),
            );
            return;
        }
        let v = m.v;
        self.out.comment(&format!(
            "PLANTED (straddle-2mib): {v} reaches past 2 MiB; word {word}, the first past the boundary, gets bit 30 flipped"
        ));
        self.out.line(format!(
            "((volatile uint32_t *)(uintptr_t){v}_peer)[{word}] ^= {:#010x}u;",
            Plant::FLIP_BIT
        ));
    }

    /// A kernel launch statement whose event the next step waits on; returns its variable.
    fn launch(
        &mut self,
        kernel: &str,
        global: &str,
        args: &[String],
        wait: Option<&str>,
    ) -> String {
        let ev = self.out.event("ev");
        self.declare(format!("cl_event {ev};"));
        self.out.line(format!(
            "{ev} = {}",
            launch_call(kernel, global, args, wait)
        ));
        ev
    }

    /// ops::produce_on_cl: OpenCL's kernel writes `data` into `m` from a staging buffer.
    fn produce_on_cl(&mut self, m: &mut Mem, data: &str) -> String {
        let v = m.v;
        self.declare(format!("cl_mem {v}_in;"));
        self.out.step(&format!("OpenCL writes {data} into {v}"));
        self.out
            .line(format!("{v}_in = device_buffer({}, {data});", m.bytes()));
        let ready = self.hand_to_cl(m, self.case.sync);
        let ev = self.launch(
            "ccopy",
            &m.len.clone(),
            &[format!("mem({v}_in)"), m.arg(), format!("u32({})", m.len)],
            ready.as_deref(),
        );
        self.out.line(format!("clReleaseMemObject({v}_in);"));
        ev
    }

    /// ops::consume_on_cl and the read after it: `m` copied by OpenCL into `out` (floats).
    fn consume_on_cl(&mut self, m: &Mem, ready: Option<&str>, out: &str) {
        let v = m.v;
        self.declare(format!("cl_mem {v}_out;"));
        self.out.step(&format!("OpenCL reads {v} back"));
        self.out
            .line(format!("{v}_out = device_buffer({}, NULL);", m.bytes()));
        self.out.line(launch_call(
            "ccopy",
            &m.len,
            &[m.arg(), format!("mem({v}_out)"), format!("u32({})", m.len)],
            ready,
        ));
        self.out.line(format!(
            "CHECK(CL, clEnqueueReadBuffer(queue, {v}_out, CL_TRUE, 0, {}, {out}, 0, NULL, NULL));",
            m.bytes()
        ));
    }
}

impl CWriter for Gen<'_> {
    fn line(&mut self, s: &str) {
        self.out.line(s);
    }

    fn comment(&mut self, s: &str) {
        self.out.comment(s);
    }

    fn event(&mut self, stem: &str) -> String {
        self.out.event(stem)
    }

    fn declare(&mut self, d: String) {
        Gen::declare(self, d);
    }

    fn uses(&mut self, section: &'static str) {
        Gen::uses(self, section);
    }

    fn launches(&mut self, kernel: &'static str) {
        self.path_kernels.push(kernel);
    }

    fn dialect(&self) -> Option<Dialect> {
        self.dialect.copied()
    }

    fn peer_sync(&mut self) {
        Gen::peer_sync(self);
    }

    fn refuse(&mut self, why: String) {
        self.refused.get_or_insert(why);
    }
}

/// The body of `case`'s program with data seed `seed` and data `kind`; `dialect` is the
/// device peer's (none for the host).
pub(super) fn body(
    case: &ReproCase,
    seed: u64,
    kind: DataKind,
    dialect: Option<&Dialect>,
    plant: Option<Plant>,
) -> anyhow::Result<Body> {
    let mut g = Gen {
        case,
        dialect,
        out: Out::default(),
        decls: Vec::new(),
        take_sync: if plant == Some(Plant::SkipSync) {
            SyncMode::None
        } else {
            case.sync
        },
        straddle: plant == Some(Plant::Straddle2Mib),
        extra: Vec::new(),
        path_kernels: Vec::new(),
        refused: None,
    };
    let mut b = Body {
        common: vec![],
        cl_kernels: vec![],
        peer_kernels: vec![],
        constants: format!(
            "static const uint64_t SEED = {seed:#018x}ull; /* the data seed */\nstatic const size_t N = {};\n",
            case.n
        ),
        main: String::new(),
        generator: vec![],
        blas: false,
        solver: false,
        scratch: false,
        event: dialect.is_some() && case.sync == SyncMode::Event,
    };
    let draws = match case.op {
        Op::Handoff => {
            handoff(&mut g, &mut b);
            None
        }
        Op::Fft => {
            fft(&mut g, &mut b)?;
            Some(Draws::Vectors)
        }
        Op::Pipeline => {
            pipeline(&mut g, &mut b)?;
            Some(Draws::Vectors)
        }
        Op::Gemm => {
            gemm(&mut g, &mut b);
            Some(Draws::Matrices)
        }
        Op::Cholesky => {
            cholesky(&mut g, &mut b);
            Some(Draws::Hpd)
        }
        Op::Reuse => {
            reuse::reuse(&mut g, &mut b, plant);
            None
        }
        Op::Placement => {
            placement(&mut g, &mut b);
            // The op draws clhip's seeded vector whatever the data kind (ops/placement.rs).
            b.generator = generator_sections(DataKind::Seeded, Draws::Vectors);
            None
        }
    };
    if let Some(why) = g.refused.take() {
        anyhow::bail!("{}: {why}", g.case);
    }
    if let Some(d) = draws {
        b.generator = generator_sections(kind, d);
    }
    for s in g.extra {
        if !b.common.contains(&s) {
            b.common.push(s);
        }
    }
    for k in g.path_kernels {
        if !b.cl_kernels.contains(&k) {
            b.cl_kernels.push(k);
        }
    }
    let text = collapse_repeated_syncs(&g.out.text);
    let mut text = text;
    let decls = drop_unused(&mut text, &g.decls);
    // A device peer's verdict goes through finish(), which asks for a pending fault first.
    let head = ["int main(void)", "static int run_case(void)"][usize::from(dialect.is_some())];
    let mut main = format!("{head}\n{{\n");
    for d in merge_declarations(&decls) {
        main.push_str(&format!("    {d}\n"));
    }
    main.push_str("    setvbuf(stdout, NULL, _IOLBF, 0);\n    cl_open();\n");
    if dialect.is_some() {
        main.push_str("    peer_open();\n");
        if !b.peer_kernels.is_empty() {
            main.push_str("    peer_load_kernels();\n");
        }
    }
    main.push_str(&text);
    main.push_str("}\n");
    if dialect.is_some() {
        // The IPC path's exporter is this program run again, which must not run the case.
        let exporter = ["", "    ipc_exporter();\n"][usize::from(b.common.contains(&"ipc"))];
        main.push_str(&format!(
            "\n/* The case's verdict, or a fault where one is pending on the device after it. */\n\
             int main(void)\n{{\n{exporter}    finish(run_case());\n}}\n",
        ));
    }
    b.main = main;
    Ok(b)
}

/// The data generator's sections for `kind`: clhip's seeded generator, or the simple kind's
/// formula under the same function names.
fn generator_sections(kind: DataKind, draws: Draws) -> Vec<&'static str> {
    let mut s = match kind {
        DataKind::Seeded => vec!["chacha"],
        DataKind::Ones => vec!["simple_ones"],
        DataKind::Impulse => vec!["simple_impulse"],
        DataKind::SmallIntegers => vec!["simple_integers"],
    };
    let seeded = kind.is_seeded();
    s.extend(match (draws, seeded) {
        (Draws::Vectors, true) => &["gen_cvec"][..],
        (Draws::Matrices, true) => &["gen_matrix"][..],
        (Draws::Hpd, true) => &["hpd_from", "gen_hpd"][..],
        (Draws::Vectors, false) => &["simple_cvec"][..],
        (Draws::Matrices, false) => &["simple_matrix"][..],
        (Draws::Hpd, false) => &["hpd_from", "simple_hpd"][..],
    });
    s
}

fn handoff(g: &mut Gen, b: &mut Body) {
    b.common = vec!["pattern", "device_buffer", "cl_pattern"];
    b.cl_kernels = vec!["pattern_check", "pattern_observe", "pattern_fill"];
    b.peer_kernels = vec!["clhip_pattern_fill", "clhip_pattern_check"];
    b.scratch = true;
    let peer = g.peer_name();
    g.declare(
        "uint32_t a = (uint32_t)(SEED ^ (SEED >> 32)), b = a ^ 0x55555555u, c = a ^ 0xAAAAAAAAu;",
    );
    g.declare("const uint32_t init[4] = {0, 0xFFFFFFFFu, 0, 0};");
    g.declare("uint64_t seen_b[3] = {0, 0, 0};");
    g.declare("uint32_t words_a[4], words_c[4];");
    g.declare("cl_mem result_a, result_c;");
    g.out.comment("ops/handoff.rs: the peer writes pattern a; OpenCL checks it and writes b; the peer checks b and writes c; OpenCL checks c");
    g.out.line(format!(
        "result_a = device_buffer(16, init);\n\
         check_written(\"OpenCL pattern check's result buffer for the pattern written by {peer}\", result_a, init);\n\
         result_c = device_buffer(16, init);\n\
         check_written(\"OpenCL pattern check's result buffer for the pattern rewritten by {peer}\", result_c, init);"
    ));
    let mut m = g.mem("m", "N");
    g.create(&m);
    g.hand_to_peer(&mut m, g.case.sync, None, Access::Write);
    g.out.step(&format!("{peer} writes pattern a"));
    g.out.line("peer_fill_pattern(m_peer, a);");
    g.peer_done();
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL checks pattern a, writes pattern b");
    let checked = g.out.event("checked");
    g.declare(format!("cl_event {checked};"));
    g.out.line(format!(
        "{checked} = cl_check_pattern({}, a, result_a, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    let filled = g.launch(
        "pattern_fill",
        "2 * N",
        &[m.arg(), "u32(b)".into(), "u32(2 * N)".into()],
        Some(&checked),
    );
    g.take_output(&mut m, Some(&filled), Access::ReadWrite);
    g.out
        .step(&format!("{peer} checks pattern b, writes pattern c"));
    g.out
        .line("peer_check_pattern(m_peer, b, seen_b);\npeer_fill_pattern(m_peer, c);");
    g.peer_done();
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL checks pattern c");
    g.out.line(format!(
        "cl_check_pattern({}, c, result_c, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    g.release(&m);
    g.out.comment(
        "every step has run: OpenCL's result words read, then the verdicts (bit-exact), the first wrong crossing first",
    );
    g.out.line(format!(
        "read_words(result_a, words_a);\nread_words(result_c, words_c);\n\
         if (cl_pattern_verdict(\"pattern written by {peer}, read by OpenCL\", words_a, a) ||\n    \
         pattern_verdict(\"pattern written by OpenCL, read by {peer}\", seen_b, b) ||\n    \
         cl_pattern_verdict(\"pattern rewritten by {peer}, read by OpenCL\", words_c, c))\n    return 1;\n\
         printf(\"PASS: %zu words bit-exact across 4 crossings\\n\", 2 * N);\nreturn 0;"
    ));
}

/// The FFT plan's passes as a C table, and the kernels they launch.
fn fft_plan(b: &mut Body, n: usize) -> anyhow::Result<()> {
    let plan = crate::fft::plan(n).map_err(|e| anyhow::anyhow!("{e}"))?;
    let passes: Vec<String> = plan
        .passes
        .iter()
        .map(|p| format!("{{{}, {}, {}}}", p.radix, p.ns, p.tw_off))
        .collect();
    b.constants.push_str(&format!(
        "/* clhip's FFT plan for N (src/fft.rs plan): {{radix, ns, twiddle offset}} per pass */\n\
         static const struct {{ unsigned radix, ns, tw_off; }} FFT_PASSES[] = {{{}}};\n\
         enum {{ FFT_NPASSES = {}, FFT_TWIDDLES = {} }};\n",
        passes.join(", "),
        plan.passes.len(),
        plan.twiddles
    ));
    for p in &plan.passes {
        let k = match p.radix {
            2 => "fft_radix2",
            4 => "fft_radix4",
            _ => "fft_radix8",
        };
        if !b.cl_kernels.contains(&k) {
            b.cl_kernels.push(k);
        }
    }
    if !b.cl_kernels.contains(&"ccopy") {
        b.cl_kernels.push("ccopy");
    }
    Ok(())
}

fn fft(g: &mut Gen, b: &mut Body) -> anyhow::Result<()> {
    b.common = vec!["fft_cl", "ref_fft", "check_fft"];
    fft_plan(b, g.case.n)?;
    let peer = g.peer_name();
    g.declare("float *input = complex_vec(SEED, N), *got = malloc(8 * N);");
    g.out.comment("ops/fft.rs: the peer uploads the input, OpenCL transforms it in place, the peer reads the result");
    let mut m = g.mem("m", "N");
    g.create(&m);
    g.hand_to_peer(&mut m, g.case.sync, None, Access::Write);
    g.out.step(&format!("{peer} uploads the input"));
    g.out.line("peer_upload(m_peer, input, 8 * N);");
    g.peer_done();
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL FFT");
    g.declare("cl_event done;");
    g.out.line(format!(
        "done = fft_forward({}, N, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    g.take_output(&mut m, Some("done"), Access::Read);
    g.out.step(&format!("{peer} reads the result"));
    g.out.line("peer_download(m_peer, got, 8 * N);");
    g.release(&m);
    g.out.line(format!(
        "if (check_fft(\"OpenCL FFT output read by {peer}\", got, reference_fft(input, NULL, N), N))\n    return 1;\n\
         puts(\"PASS: within both bounds\");\nreturn 0;"
    ));
    Ok(())
}

fn pipeline(g: &mut Gen, b: &mut Body) -> anyhow::Result<()> {
    b.common = vec!["device_buffer", "fft_cl", "ref_fft", "check_pipeline"];
    b.cl_kernels.push("cadd");
    fft_plan(b, g.case.n)?;
    b.peer_kernels = vec!["clhip_cscale", "clhip_cmagnitude"];
    let peer = g.peer_name();
    g.declare("float *in_a = complex_vec(SEED, N), *in_b = complex_vec(SEED + 1, N), *got = malloc(8 * N);");
    g.declare("cl_mem b_buf, out;");
    g.out.comment("ops/pipeline.rs: OpenCL add and FFT, peer scale by 1/N and magnitude, read back through OpenCL");
    g.out
        .line("b_buf = device_buffer(8 * N, in_b);\nout = device_buffer(8 * N, NULL);");
    let mut m = g.mem("m", "N");
    g.create(&m);
    g.hand_to_peer(&mut m, g.case.sync, None, Access::Write);
    g.out.step(&format!("{peer} uploads a"));
    g.out.line("peer_upload(m_peer, in_a, 8 * N);");
    g.peer_done();
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL adds b, transforms");
    let added = g.launch(
        "cadd",
        "N",
        &[m.arg(), "mem(b_buf)".into(), m.arg(), "u32(N)".into()],
        ready.as_deref(),
    );
    g.declare("cl_event transformed;");
    g.out.line(format!(
        "transformed = fft_forward({}, N, 1, &{added});",
        m.arg()
    ));
    g.take_output(&mut m, Some("transformed"), Access::ReadWrite);
    g.out.step(&format!("{peer} scales and takes magnitudes"));
    g.out
        .line("peer_scale(m_peer, 1.0f / (float)N);\npeer_magnitude(m_peer);");
    g.peer_done();
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL reads the result back");
    g.out.line(launch_call(
        "ccopy",
        "N",
        &[m.arg(), "mem(out)".into(), "u32(N)".into()],
        ready.as_deref(),
    ));
    g.release(&m);
    g.out.line(format!(
        "CHECK(CL, clEnqueueReadBuffer(queue, out, CL_TRUE, 0, 8 * N, got, 0, NULL, NULL));\n\
         if (check_pipeline(\"pipeline magnitude (scaled on {peer}) read back through OpenCL\", got, reference_fft(in_a, in_b, N), 1.0f / (float)N, N))\n    return 1;\n\
         puts(\"PASS: within the bound\");\nreturn 0;"
    ));
    Ok(())
}

fn gemm(g: &mut Gen, b: &mut Body) {
    b.common = vec!["device_buffer", "check_gemm"];
    b.cl_kernels = vec!["ccopy"];
    b.blas = true;
    let peer = g.peer_name();
    g.declare("float *a = matrix(SEED, N), *b = matrix(SEED + 1, N), *c = matrix(SEED + 2, N), *got = malloc(8 * N * N);");
    g.declare("const double beta[2] = {-0.5, 0.25};");
    g.out.comment("ops/gemm.rs: OpenCL writes A, B, C into three allocations of the path; the peer's BLAS computes C = A B + beta C; OpenCL reads C back");
    let mut ma = g.mem("ma", "N * N");
    let mut mb = g.mem("mb", "N * N");
    let mut mc = g.mem("mc", "N * N");
    g.create(&ma);
    g.create(&mb);
    g.create(&mc);
    let ea = g.produce_on_cl(&mut ma, "a");
    let eb = g.produce_on_cl(&mut mb, "b");
    let ec = g.produce_on_cl(&mut mc, "c");
    g.take_output(&mut ma, Some(&ea), Access::Read);
    g.hand_to_peer(&mut mb, g.case.sync, Some(&eb), Access::Read);
    g.hand_to_peer(&mut mc, g.case.sync, Some(&ec), Access::ReadWrite);
    g.out.step(&format!("cgemm on {peer}"));
    g.out.line("peer_cgemm(ma_peer, mb_peer, mc_peer, beta);");
    g.hand_to_cl(&mut ma, g.case.sync);
    g.hand_to_cl(&mut mb, g.case.sync);
    let ready = g.hand_to_cl(&mut mc, g.case.sync);
    g.consume_on_cl(&mc, ready.as_deref(), "got");
    g.release(&mc);
    g.release(&mb);
    g.release(&ma);
    g.out.line(format!(
        "if (check_gemm(\"cgemm on {peer} read back through OpenCL\", got, a, b, c, beta, N))\n    return 1;\n\
         puts(\"PASS: within the bound\");\nreturn 0;"
    ));
}

fn cholesky(g: &mut Gen, b: &mut Body) {
    b.common = vec!["device_buffer", "check_cholesky"];
    b.cl_kernels = vec!["ccopy"];
    b.solver = true;
    b.scratch = true;
    let peer = g.peer_name();
    g.declare("size_t bad_info_want, want_info;");
    g.declare("float *hpd = hpd_matrix(SEED, N), *non_hpd = non_hpd_matrix(SEED + 1, N, &bad_info_want), *got = malloc(8 * N * N);");
    g.declare("double *want = malloc(16 * N * N), *scratch_l = malloc(16 * N * N);");
    g.declare("int info, bad_info;");
    g.out.comment("ops/cholesky.rs: OpenCL writes an HPD matrix, the peer's cpotrf factors it in place, OpenCL reads the factor back; then the same memory takes a non-HPD matrix, whose info must be the reference's");
    let mut m = g.mem("m", "N * N");
    g.create(&m);
    let ev = g.produce_on_cl(&mut m, "hpd");
    g.take_output(&mut m, Some(&ev), Access::ReadWrite);
    g.out.step(&format!("cpotrf on {peer} (HPD)"));
    g.out.line("info = peer_cpotrf(m_peer);");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.consume_on_cl(&m, ready.as_deref(), "got");
    let ev = g.produce_on_cl(&mut m, "non_hpd");
    g.hand_to_peer(&mut m, g.case.sync, Some(&ev), Access::ReadWrite);
    g.out.step(&format!("cpotrf on {peer} (non-HPD)"));
    g.out.line("bad_info = peer_cpotrf(m_peer);");
    g.release(&m);
    g.out.line(format!(
        "/* info must be LAPACK's: 0 if HPD, else the 1-based order of the first non-PD leading minor (rocSOLVER clients) */\n\
         if (info != 0) {{\n    printf(\"FAIL: cpotrf info on {peer} (HPD input): got info = %d want info = 0\\n\", info);\n    return 1;\n}}\n\
         if (reference_cholesky(hpd, N, want) != 0) {{\n    puts(\"ERROR: the generator's HPD matrix did not factor in double\");\n    return 2;\n}}\n\
         if (check_cholesky(\"cpotrf factor on {peer} read back through OpenCL\", got, want, N))\n    return 1;\n\
         want_info = reference_cholesky(non_hpd, N, scratch_l);\n\
         if ((size_t)bad_info != want_info) {{\n    printf(\"FAIL: cpotrf info on {peer} (non-HPD input): got info = %d want info = %zu\\n\", bad_info, want_info);\n    return 1;\n}}\n\
         printf(\"PASS: within the bound; non-HPD info %d as the reference (the generator says %zu)\\n\", bad_info, bad_info_want);\nreturn 0;"
    ));
}

fn placement(g: &mut Gen, b: &mut Body) {
    b.common = vec!["device_buffer", "check_exact"];
    b.cl_kernels = vec!["ccopy"];
    b.peer_kernels = vec!["clhip_cscale"];
    let peer = g.peer_name();
    g.declare("float *input = complex_vec(SEED, N), *got = malloc(8 * N);");
    g.declare("struct timespec t0, t1;");
    g.out.comment("ops/placement.rs: OpenCL writes the input through the path; the peer scales it by 2 on the shared memory, once untimed and 20 times timed; OpenCL reads it back, which must be 2^21 times the input bit for bit. (clhip also times the passes on the peer's own device and pinned memory, a note beside the verdict, left out here.)");
    let mut m = g.mem("m", "N");
    g.create(&m);
    let ev = g.produce_on_cl(&mut m, "input");
    g.take_output(&mut m, Some(&ev), Access::ReadWrite);
    g.out.step(&format!("{peer} scales by 2, 21 times"));
    g.out.line(
        "peer_scale(m_peer, 2.0f);
peer_synchronize();
clock_gettime(CLOCK_MONOTONIC, &t0);
         for (int i = 0; i < 20; i++)
    peer_scale(m_peer, 2.0f);
peer_synchronize();
         clock_gettime(CLOCK_MONOTONIC, &t1);
         printf(\"%.3f ms per scale pass over %zu bytes of shared memory\\n\", ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / 20, 8 * N);",
    );
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.consume_on_cl(&m, ready.as_deref(), "got");
    g.release(&m);
    g.out.line(format!(
        "if (check_exact(\"data scaled on {peer} read back through OpenCL\", got, input, 2097152.0f, N))\n    return 1;\n\
         puts(\"PASS: bit-exact\");\nreturn 0;"
    ));
}

/// The common sections named, in order.
pub(super) fn common_sections(names: &[&str]) -> String {
    names.iter().map(|n| section(COMMON, n)).collect()
}

/// Every stream's generator for data `kind` (and the pattern, with the reuse op's crossing
/// seeds), for the test that holds it to clhip's generator word for word.
pub(super) fn generator_source(kind: DataKind) -> String {
    let mut names = vec!["std_includes"];
    let mut gens = generator_sections(kind, Draws::Vectors);
    for d in [Draws::Matrices, Draws::Hpd] {
        for s in generator_sections(kind, d) {
            if !gens.contains(&s) {
                gens.push(s);
            }
        }
    }
    names.extend(gens);
    names.extend(["pattern", "crossing_seed"]);
    common_sections(&names)
}

/// What a target adds around the body (host.rs, cuda.rs, hip.rs).
pub(super) struct Target {
    /// `#include` lines of the target's APIs.
    pub includes: String,
    /// The CHECK macro and its function (with the `enum api` it takes).
    pub check: String,
    /// The peer's constants (`PEER_ORDINAL`).
    pub constants: String,
    /// The peer's functions.
    pub peer: String,
    /// The name of the peer's kernel source string, if its kernels are compiled at run time.
    pub peer_source: Option<&'static str>,
}

/// The whole program (without its header comment).
pub(super) fn assemble(case: &ReproCase, b: &Body, t: &Target) -> String {
    let mut s = String::new();
    s.push_str(section(COMMON, "includes"));
    s.push_str(&t.includes);
    s.push_str(section(COMMON, "std_includes"));
    if b.main.contains("clock_gettime") {
        s.push_str("#include <time.h>\n");
    }
    s.push('\n');
    s.push_str(section(COMMON, "cl_errors"));
    s.push_str(&t.check);
    for name in &b.generator {
        s.push_str(section(COMMON, name));
    }
    for name in ["pattern", "crossing_seed"] {
        if b.common.contains(&name) {
            s.push_str(section(COMMON, name));
        }
    }
    let (family, index) = super::label_parts(&case.cl_label).unwrap_or(("cl", 0));
    s.push_str(&format!(
        "\n/* The case; its OpenCL device as clhip labels it (runtimes/opencl/devices.rs family) */\n\
         static const char *CL_LABEL = {}, *PLATFORM_WORD = {};\nenum {{ CL_INDEX = {index} }};\n{}{}",
        crate::escape::c_string(&case.cl_label),
        crate::escape::c_string(super::platform_word(family).unwrap_or_default()),
        t.constants,
        b.constants
    ));
    s.push_str(&format!(
        "/* clhip's OpenCL kernels this case launches (the .cl files of kernels/) */\n{}",
        kernels::c_string("CL_SOURCE", &kernels::opencl(&b.cl_kernels))
    ));
    if let (Some(name), false) = (t.peer_source, b.peer_kernels.is_empty()) {
        s.push_str(&format!(
            "/* clhip's peer kernels this case launches (the .hip files of kernels/) */\n{}",
            kernels::c_string(name, &kernels::peer(&b.peer_kernels))
        ));
    }
    s.push_str(section(COMMON, "cl_open"));
    s.push_str(section(COMMON, "cl_launch"));
    for name in [
        "device_buffer",
        "poison",
        "svm_alloc",
        "map_check",
        "cl_pattern",
        "reuse",
        "fft_cl",
        "ref_fft",
        "check_fft",
        "check_pipeline",
        "check_gemm",
        "check_cholesky",
        "check_exact",
        "host_alloc",
    ] {
        if b.common.contains(&name) {
            s.push_str(section(COMMON, name));
        }
    }
    // The exporter process, whose allocation and handle the peer's `ipc` section makes.
    if b.common.contains(&"ipc") {
        s.push_str(section(COMMON, "ipc_process"));
    }
    s.push_str(&super::interop::sections(&b.common, false));
    s.push_str(&t.peer);
    s.push_str(&super::interop::sections(&b.common, true));
    s.push('\n');
    s.push_str(&b.main);
    drop_unused_functions(&s)
}
