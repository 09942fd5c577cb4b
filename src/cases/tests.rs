use super::*;
use crate::model::{ClDeviceRef, Peer};

fn pair() -> Pair {
    Pair {
        opencl: ClDeviceRef {
            platform_index: 0,
            device_index: 0,
            label: "pocl0".into(),
        },
        peer: Peer::HOST,
        install: None,
        cl_gpu: None,
    }
}

fn parse(text: &str) -> Result<Matrix, InputError> {
    Matrix::parse(Path::new("cases/test.toml"), text)
}

#[test]
fn shipped_matrix_is_valid_and_big_enough() {
    let m = Matrix::default_matrix();
    let cases = m.expand(&[pair()]);
    assert!(cases.len() >= 40, "only {} host-pair cases", cases.len());
    assert!(
        cases.iter().any(|c| c.op == Op::Fft && c.n == MAX_FFT),
        "the seed's 2^22 FFT must be in the default matrix"
    );
}

#[test]
fn unknown_sync_names_file_line_and_choices() {
    let e = parse(
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\", \"mapp\"]\nops = [\"fft\"]\nsizes = [4]\n",
    )
    .unwrap_err();
    assert_eq!((e.line, e.file.to_str().unwrap()), (4, "cases/test.toml"));
    assert!(e.message.contains("mapp"), "{e}");
    assert!(
        e.message
            .contains("expected one of `finish`, `event`, `map`"),
        "{e}"
    );
    assert!(e.to_string().starts_with("cases/test.toml:4:"), "{e}");
}

#[test]
fn sync_meaningless_for_every_path_is_rejected_at_its_line() {
    let e = parse(
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\",\n  \"map\"]\nops = [\"fft\"]\nsizes = [4]\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(e.message.contains("copy: finish, event, none"), "{e}");
}

#[test]
fn fft_size_must_be_a_power_of_two_in_range() {
    let e = parse(
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\", \"fft\"]\nsizes = [4, 1000]\n",
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (6, 13), "{e}");
    assert!(e.message.contains("power of two"), "{e}");
}

#[test]
fn typos_and_syntax_errors_are_located() {
    let e = parse("version = 1\n[[group]]\npath = [\"copy\"]\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(e.message.contains("unknown field `path`"), "{e}");
    let e = parse("version = 1\n[[group]\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    let e = parse("version = 2\n").unwrap_err();
    assert!(e.message.contains("version 2"), "{e}");
}

#[test]
fn expansion_skips_meaningless_combinations_and_duplicates() {
    let m = parse(
        "version = 1\n[[group]]\npaths = [\"copy\", \"cl-svm-coarse\"]\nsyncs = [\"finish\", \"map\"]\nops = [\"fft\", \"gemm\"]\nsizes = [4, 4]\n",
    )
    .unwrap();
    let ids: Vec<String> = m.expand(&[pair()]).iter().map(Case::id).collect();
    // copy takes finish, coarse SVM takes map; gemm needs a BLAS peer; 4 is listed twice.
    assert_eq!(
        ids,
        [
            "pocl0+host/copy/finish/fft/n=4",
            "pocl0+host/cl-svm-coarse/map/fft/n=4"
        ]
    );
}

#[test]
fn filters_glob_substring_and_reject_unknown() {
    let cases = Matrix::default_matrix().expand(&[pair()]);
    let total = cases.len();
    let fft = filter(cases.clone(), &["*/fft/*".into()]).unwrap();
    assert!(!fft.is_empty() && fft.len() < total);
    assert!(fft.iter().all(|c| c.op == Op::Fft));
    let sub = filter(cases.clone(), &["cl-svm-fine".into()]).unwrap();
    assert!(sub.iter().all(|c| c.path == PathKind::ClSvmFine));
    let e = filter(cases, &["no-such-path".into()]).unwrap_err();
    assert!(e.to_string().contains("`no-such-path` matches none"), "{e}");
}

/// The size of issue 15: 8 bytes x (2^61 + 1) wraps to 8 in 64 bits.
const WRAPS: usize = 2_305_843_009_213_693_953;

fn one_group(path: &str, sync: &str, op: &str, sizes: &str) -> String {
    format!(
        "version = 1\n[[group]]\npaths = [\"{path}\"]\nsyncs = [\"{sync}\"]\nops = [\"{op}\"]\nsizes = [{sizes}]\n"
    )
}

#[test]
fn a_size_whose_bytes_wrap_is_the_case_files_error_at_its_place() {
    for op in ["handoff", "placement", "gemm", "cholesky"] {
        let e = parse(&one_group("copy", "finish", op, &format!("4, {WRAPS}"))).unwrap_err();
        assert_eq!((e.line, e.column), (6, 13), "{op}: {e}");
        assert!(e.to_string().starts_with("cases/test.toml:6:13: "), "{e}");
        assert!(e.message.contains(&WRAPS.to_string()), "{e}");
        assert!(
            e.message
                .contains(&format!("op `{op}` takes sizes from 1 to")),
            "{e}"
        );
    }
    // Placement is a device peer's op: on a host-only machine the old parser's acceptance
    // silently gave 0 cases. Now the size itself is refused, whatever the pairs.
    let e = parse(&one_group(
        "copy",
        "finish",
        "placement",
        &WRAPS.to_string(),
    ))
    .unwrap_err();
    assert!(
        e.message.contains("do not fit the kernels' 32-bit counts"),
        "{e}"
    );
}

#[test]
fn every_size_is_held_to_each_op_of_its_group() {
    let limits = Limits::HARNESS;
    for &op in Op::ALL {
        let max = max_size(op, &limits).unwrap();
        assert!(check_size(op, max, &limits).is_ok(), "{op} {max}");
        let next = if matches!(op, Op::Fft | Op::Pipeline) {
            max * 2
        } else {
            max + 1
        };
        let e = check_size(op, next, &limits).unwrap_err();
        assert!(e.contains(&format!("size {next} for op `{op}`")), "{e}");
        let b = case_bytes(op, max).unwrap();
        assert!(
            b.buffer <= limits.max_buffer && b.total() <= limits.max_total,
            "{op}"
        );
    }
    // 2^29 complex f32 is 4 GiB exactly; one more element is over the per-buffer limit.
    assert_eq!(max_size(Op::Handoff, &limits), Some(1 << 29));
    let e = check_size(Op::Handoff, (1 << 29) + 1, &limits).unwrap_err();
    assert!(
        e.contains("over the harness limit of 4 GiB per buffer"),
        "{e}"
    );
    // A gemm whose one matrix fits 4 GiB but whose case does not fit 16 GiB.
    let e = check_size(Op::Gemm, 20_000, &limits).unwrap_err();
    assert!(e.contains("over the limit of 16 GiB per case"), "{e}");
    // The op is named: a size fine for handoff is refused for the fft beside it.
    let e = parse(&one_group("copy", "finish", "handoff\", \"fft", "3")).unwrap_err();
    assert!(e.message.contains("for op `fft`"), "{e}");
    assert!(parse(&one_group("copy", "finish", "handoff", "536870912")).is_ok());
}

#[test]
fn case_bytes_is_checked_arithmetic() {
    assert_eq!(case_bytes(Op::Handoff, WRAPS), None);
    assert_eq!(case_bytes(Op::Gemm, usize::MAX), None);
    assert_eq!(case_bytes(Op::Gemm, 1 << 32), None, "n*n*8 = 2^67");
    let b = case_bytes(Op::Gemm, 2048).unwrap();
    assert_eq!(b.buffer, 2048 * 2048 * 8);
    assert_eq!(case_bytes(Op::Fft, 4).unwrap().buffer, 32);
    let tight = Limits {
        max_buffer: 4 * GIB,
        max_total: 64,
    };
    assert_eq!(
        max_size(Op::Handoff, &tight),
        Some(2),
        "3 x 8 x 2 = 48 <= 64 < 72"
    );
    let none = Limits {
        max_buffer: 4,
        max_total: 64,
    };
    assert_eq!(max_size(Op::Fft, &none), None);
    let e = check_size(Op::Fft, 2, &none).unwrap_err();
    assert!(e.contains("takes no size under these limits"), "{e}");
}

#[test]
fn machine_limit_reads_meminfo() {
    assert_eq!(
        mem_total("MemFree: 1 kB\nMemTotal:       16384 kB\n"),
        Some(16 << 20)
    );
    assert_eq!(mem_total("nothing"), None);
    let l = Limits::this_machine();
    assert!(l.max_total <= Limits::HARNESS.max_total && l.max_total > 0);
}

#[test]
fn pathological_filters_finish_in_linear_time() {
    let pairs: Vec<Pair> = (0..8)
        .map(|i| Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: i,
                label: format!("pocl{i}"),
            },
            peer: if i % 2 == 0 {
                Peer::HOST
            } else {
                Peer {
                    api: crate::model::Api::Cuda,
                    ordinal: i,
                }
            },
            install: None,
            cl_gpu: None,
        })
        .collect();
    let cases = Matrix::default_matrix().expand(&pairs);
    assert!(cases.len() > 2500, "{} cases", cases.len());
    let start = std::time::Instant::now();
    for f in [
        "********Z",
        "*a*a*a*a*a*a*a*a*a*a*a*a*Z",
        "*/*/*/*/*/*/*/*/*/*/*=",
    ] {
        let e = filter(cases.clone(), &[f.to_string()]).unwrap_err();
        assert!(e.to_string().contains("matches none"), "{e}");
    }
    let n = filter(cases.clone(), &["**p*o*c*l*1*+*/*".to_string()])
        .unwrap()
        .len();
    assert!(n > 0);
    let took = start.elapsed();
    assert!(took.as_secs_f64() < 1.0, "filters took {took:?}");
}

#[test]
fn an_empty_filter_is_an_error() {
    let cases = Matrix::default_matrix().expand(&[pair()]);
    let e = filter(cases.clone(), &["fft".into(), String::new()]).unwrap_err();
    assert!(e.to_string().contains("an empty filter"), "{e}");
    assert_eq!(filter(cases.clone(), &[]).unwrap().len(), cases.len());
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = parse("version = 1\nbogus = \"ü€🚀\"; x = 1\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(e.column <= 15, "a character column, not a byte one: {e}");
}

/// A matrix of one handoff group naming `variants`, after `tables` (`[[variant]]`s).
fn with_variants(tables: &str, variants: &str) -> String {
    format!(
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\"]\nsizes = [1, 2]\nvariants = [{variants}]\n{tables}"
    )
}

const EAGER: &str = "[[variant]]\nname = \"eager\"\npeers = [\"cuda\"]\nenv = { CUDA_MODULE_LOADING = \"EAGER\" }\n";

#[test]
fn a_variant_runs_its_groups_on_the_pairs_of_its_peers_with_its_id_segment() {
    let m = parse(&with_variants(EAGER, "\"eager\"")).unwrap();
    assert_eq!(m.variants[0].peers, [Api::Cuda]);
    // The host pair has no such peer: its cases and ids are as without the variant.
    let host: Vec<String> = m.expand(&[pair()]).iter().map(Case::id).collect();
    assert_eq!(
        host,
        [
            "pocl0+host/copy/finish/handoff/n=1",
            "pocl0+host/copy/finish/handoff/n=2"
        ]
    );
    // The plain environment first, then the variant's: each environment's cases together.
    let cuda: Vec<String> = m
        .expand(&[Pair::nvidia0_cuda0()])
        .iter()
        .map(Case::id)
        .collect();
    assert_eq!(
        cuda,
        [
            "nvidia0+cuda0/copy/finish/handoff/n=1",
            "nvidia0+cuda0/copy/finish/handoff/n=2",
            "nvidia0+cuda0/copy/finish/handoff/n=1/env:CUDA_MODULE_LOADING=EAGER",
            "nvidia0+cuda0/copy/finish/handoff/n=2/env:CUDA_MODULE_LOADING=EAGER",
        ]
    );
    // Filters see the segment like any other part of the id.
    let cases = m.expand(&[Pair::nvidia0_cuda0()]);
    let only = filter(cases.clone(), &["*/env:CUDA_MODULE_LOADING=EAGER".into()]).unwrap();
    assert_eq!(only.len(), 2);
    assert!(only.iter().all(|c| !c.env.is_empty()));
    let sizes = filter(cases, &["*/n=1".into()]).unwrap();
    assert_eq!(sizes.len(), 1, "an anchored glob keeps to the plain case");
}

#[test]
fn a_group_without_the_variant_runs_only_in_the_plain_environment() {
    let text = format!(
        "{}[[group]]\npaths = [\"copy\"]\nsyncs = [\"event\"]\nops = [\"handoff\"]\nsizes = [1]\n",
        with_variants(EAGER, "\"eager\"")
    );
    let ids: Vec<String> = parse(&text)
        .unwrap()
        .expand(&[Pair::nvidia0_cuda0()])
        .iter()
        .map(Case::id)
        .collect();
    assert!(ids.contains(&"nvidia0+cuda0/copy/event/handoff/n=1".to_string()));
    assert!(
        !ids.iter()
            .any(|i| i.contains("/event/") && i.contains("env:")),
        "{ids:?}"
    );
}

#[test]
fn malformed_variants_are_errors_at_their_line() {
    let table = |body: &str| format!("[[variant]]\nname = \"v\"\n{body}\n");
    for (tables, names, line, says) in [
        // Lines: the group is 2-7, its `variants` line 7, the first table from line 8.
        (
            EAGER.to_string(),
            "\"eagre\"",
            7,
            "no [[variant]] is named `eagre`",
        ),
        (EAGER.to_string(), "\"eager\", \"eager\"", 7, "listed twice"),
        (
            table("peers = [\"opencl\"]\nenv = { A = \"1\" }"),
            "\"v\"",
            10,
            "unknown peer `opencl`",
        ),
        (
            table("peers = [\"hipp\"]\nenv = { A = \"1\" }"),
            "\"v\"",
            10,
            "unknown peer `hipp`",
        ),
        (
            table("peers = []\nenv = { A = \"1\" }"),
            "\"v\"",
            10,
            "empty `peers`",
        ),
        (
            table("peers = [\"hip\"]\nenv = {}"),
            "\"v\"",
            11,
            "sets no variable",
        ),
        (
            table("peers = [\"hip\"]\nenv = { HSA_ENABLE_SDMA = \"a/b\" }"),
            "\"v\"",
            11,
            "spelled in the case id",
        ),
        (
            table("peers = [\"hip\"]\nenv = { OCL_ICD_VENDORS = \"/tmp\" }"),
            "\"v\"",
            11,
            "clhip's to set",
        ),
        (
            table("peers = [\"hip\"]\nenv = { A = \"1\" }\nflavour = 1"),
            "\"v\"",
            12,
            "unknown field `flavour`",
        ),
        (
            format!("{EAGER}{EAGER}"),
            "\"eager\"",
            13,
            "a second [[variant]] named `eager`",
        ),
        (
            format!("{EAGER}{}", EAGER.replace("\"eager\"", "\"twin\"")),
            "\"eager\", \"twin\"",
            15,
            "the same environment as `eager`",
        ),
        // Defined, named by no group: nothing would run under it.
        (EAGER.to_string(), "", 8, "named by no group"),
    ] {
        let e = parse(&with_variants(&tables, names)).unwrap_err();
        assert_eq!(e.line, line, "{e}");
        assert!(e.message.contains(says), "{e}");
        assert!(e.to_string().starts_with("cases/test.toml:"), "{e}");
    }
}

#[test]
fn the_shipped_variants_apply_to_their_vendors_pairs_only() {
    let m = Matrix::default_matrix();
    let by_name = |n: &str| m.variants.iter().find(|v| v.name == n).unwrap();
    for (name, var, peer) in [
        ("sdma-off", "HSA_ENABLE_SDMA", Api::Hip),
        ("xnack-on", "HSA_XNACK", Api::Hip),
        ("serialize-copy", "AMD_SERIALIZE_COPY", Api::Hip),
        ("module-loading-eager", "CUDA_MODULE_LOADING", Api::Cuda),
    ] {
        let v = by_name(name);
        assert_eq!(v.peers, [peer], "{name}");
        assert!(v.env.vars().any(|(k, _)| k == var), "{name}");
        assert!(v.source.is_some(), "{name}: a variant says why it is there");
    }
    // The host pair runs what it ran before the variants.
    assert!(m.expand(&[pair()]).iter().all(|c| c.env.is_empty()));
    let cuda = m.expand(&[Pair::nvidia0_cuda0()]);
    assert!(
        cuda.iter()
            .any(|c| c.id().ends_with("/env:CUDA_MODULE_LOADING=EAGER"))
    );
    assert!(!cuda.iter().any(|c| c.id().contains("HSA_")));
}
