use super::*;

fn pocl_host() -> Pair {
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

#[test]
fn case_id_is_readable_and_stable() {
    let case = Case {
        pair: pocl_host(),
        path: PathKind::ClSvmFine,
        sync: SyncMode::Map,
        op: Op::Fft,
        n: 4096,
        env: Default::default(),
    };
    assert_eq!(case.id(), "pocl0+host/cl-svm-fine/map/fft/n=4096");
}

#[test]
fn a_device_of_one_of_several_installs_carries_the_install_in_its_id() {
    let rocm = ClDeviceRef {
        platform_index: 0,
        device_index: 0,
        label: "rocm0".into(),
    };
    let hip0 = Peer {
        api: Api::Hip,
        ordinal: 0,
    };
    let one = Pair {
        opencl: rocm.clone(),
        peer: hip0.clone(),
        install: None,
        cl_gpu: None,
    };
    assert_eq!(
        (one.id(), one.participant()),
        ("rocm0+hip0".into(), "hip".into())
    );
    let several = Pair {
        install: Some("6.3.2".into()),
        cl_gpu: None,
        ..one.clone()
    };
    assert_eq!(several.id(), "rocm0+hip@6.3.2:0");
    assert_eq!(several.participant(), "hip@6.3.2");
    // The JSON of a single-install pair is what it was before installs existed.
    let json = serde_json::to_value(&one).unwrap();
    assert!(json.get("install").is_none(), "{json}");
    let back: Pair = serde_json::from_value(json).unwrap();
    assert_eq!(back, one);
    let back: Pair = serde_json::from_value(serde_json::to_value(&several).unwrap()).unwrap();
    assert_eq!(back, several);
}

#[test]
fn names_round_trip() {
    for p in PathKind::ALL {
        assert_eq!(p.name().parse::<PathKind>().unwrap(), *p);
    }
    for s in SyncMode::ALL {
        assert_eq!(s.name().parse::<SyncMode>().unwrap(), *s);
    }
    for o in Op::ALL {
        assert_eq!(o.name().parse::<Op>().unwrap(), *o);
    }
    let err = "mapp".parse::<SyncMode>().unwrap_err();
    assert!(err.contains("expected one of: finish, event, map"), "{err}");
}

#[test]
fn non_finite_errors_survive_json() {
    let m = Mismatch {
        what: "x".into(),
        index: 3,
        got: "NaN".into(),
        want: "1".into(),
        count: 1,
        len: 4,
        max_abs_err: f64::NAN,
        max_rel_err: f64::INFINITY,
        bound: 0.5,
        formula: "f".into(),
    };
    let back: Mismatch = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
    assert!(back.max_abs_err.is_nan() && back.max_rel_err.is_nan());
    assert_eq!(back.bound, 0.5);
}

#[test]
fn notes_reach_every_kind_of_error() {
    let note = "0x4100 refused: CL_INVALID_VALUE";
    let fault = CaseError::Fault(ApiError {
        api: Api::Cuda,
        call: "cuStreamSynchronize".into(),
        code: 700,
        name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        detail: String::new(),
    });
    for e in [
        fault,
        CaseError::unsupported("refused"),
        CaseError::Skip("unfit".into()),
    ] {
        let reason = e.with_note(note).into_outcome().reason();
        assert!(reason.contains(note), "{reason}");
    }
}

#[test]
fn a_capability_that_disappears_is_a_regression() {
    // The baseline's driver passed it (it is not listed); now the driver refuses it.
    assert_eq!(
        Expectation::Pass.verdict(OutcomeKind::Unsupported),
        Verdict::Regression
    );
    assert_eq!(
        Expectation::Pass.verdict(OutcomeKind::Skip),
        Verdict::Regression
    );
    // With no baseline at all nothing was known to pass: a refusal is not a loss.
    assert_eq!(
        Expectation::Unbaselined.verdict(OutcomeKind::Unsupported),
        Verdict::ExpectedNonPass
    );
    assert_eq!(
        Expectation::Unbaselined.verdict(OutcomeKind::Fail),
        Verdict::Regression
    );
}

#[test]
fn a_known_non_pass_that_passes_asks_for_a_baseline_update() {
    for known in [
        OutcomeKind::Fail,
        OutcomeKind::Fault,
        OutcomeKind::Crash,
        OutcomeKind::Unsupported,
    ] {
        let v = Expectation::Known(known).verdict(OutcomeKind::Pass);
        assert_eq!(v, Verdict::UnexpectedPass, "{known}");
        assert!(!v.fails_run());
    }
    // Better but not a pass (a known fault now cleanly refused): also an update.
    assert_eq!(
        Expectation::Known(OutcomeKind::Fault).verdict(OutcomeKind::Unsupported),
        Verdict::UnexpectedPass
    );
    assert_eq!(
        Expectation::Known(OutcomeKind::Pass).verdict(OutcomeKind::Pass),
        Verdict::Pass
    );
}

#[test]
fn a_known_fault_that_becomes_wrong_data_is_a_regression() {
    assert_eq!(
        Expectation::Known(OutcomeKind::Fault).verdict(OutcomeKind::Fail),
        Verdict::Regression
    );
    assert_eq!(
        Expectation::Known(OutcomeKind::Unsupported).verdict(OutcomeKind::Fault),
        Verdict::Regression
    );
    // Sideways (a known fault that now crashes) needs a look too.
    assert_eq!(
        Expectation::Known(OutcomeKind::Fault).verdict(OutcomeKind::Crash),
        Verdict::Regression
    );
    // A harness error is never the driver's, whatever was expected.
    for e in [
        Expectation::Pass,
        Expectation::Unbaselined,
        Expectation::NegativeControl,
        Expectation::Known(OutcomeKind::Error),
    ] {
        assert_eq!(e.verdict(OutcomeKind::Error), Verdict::HarnessError);
    }
}

/// Every outcome against every expectation, verdict and exit: the whole table, so that a
/// change to any one cell (a hang that is no regression without a baseline, a harness
/// error that no longer fails the run) fails here.
#[test]
fn a_broken_api_on_a_negative_control_is_no_caught_stale_read() {
    let api = Outcome::Fail {
        reason: FailReason::Api(ApiError {
            api: Api::OpenCl,
            call: "clSVMAlloc".into(),
            code: 0,
            name: "NULL".into(),
            detail: "although CL_DEVICE_SVM_CAPABILITIES advertises it".into(),
        }),
    };
    let stale = Outcome::mismatch(Mismatch {
        what: "fft output read by host".into(),
        index: 3,
        got: "(0, 0)".into(),
        want: "(1, 0)".into(),
        count: 1,
        len: 4,
        max_abs_err: 1.0,
        max_rel_err: 1.0,
        bound: 1e-6,
        formula: "test".into(),
    });
    let e = Expectation::NegativeControl;
    assert_eq!(e.verdict_of(&api), Verdict::Regression);
    assert!(e.verdict_of(&api).fails_run());
    assert_eq!(e.verdict_of(&stale), Verdict::CaughtStaleRead);
    // Elsewhere an API failure reads as any fail.
    assert_eq!(Expectation::Pass.verdict_of(&api), Verdict::Regression);
    assert_eq!(
        Expectation::Known(OutcomeKind::Fail).verdict_of(&api),
        Verdict::ExpectedNonPass
    );
}

#[test]
fn every_outcome_against_every_expectation_has_its_verdict_and_exit() {
    use OutcomeKind as K;
    use Verdict::{
        CaughtStaleRead as Caught, ExpectedNonPass as Enp, HarnessError as He, Pass as P,
        Regression as Reg, UnexpectedPass as Up,
    };
    let kinds = [
        K::Pass,
        K::Skip,
        K::Unsupported,
        K::Fault,
        K::Crash,
        K::Timeout,
        K::Fail,
        K::Error,
    ];
    let table = [
        (Expectation::Pass, [P, Reg, Reg, Reg, Reg, Reg, Reg, He]),
        (
            Expectation::Unbaselined,
            [P, Enp, Enp, Reg, Reg, Reg, Reg, He],
        ),
        (
            Expectation::Known(K::Pass),
            [P, Reg, Reg, Reg, Reg, Reg, Reg, He],
        ),
        (
            Expectation::Known(K::Skip),
            [Up, Enp, Reg, Reg, Reg, Reg, Reg, He],
        ),
        (
            Expectation::Known(K::Unsupported),
            [Up, Up, Enp, Reg, Reg, Reg, Reg, He],
        ),
        (
            Expectation::Known(K::Fault),
            [Up, Up, Up, Enp, Reg, Reg, Reg, He],
        ),
        (
            Expectation::Known(K::Crash),
            [Up, Up, Up, Reg, Enp, Reg, Reg, He],
        ),
        (
            Expectation::Known(K::Timeout),
            [Up, Up, Up, Reg, Reg, Enp, Reg, He],
        ),
        (
            Expectation::Known(K::Fail),
            [Up, Up, Up, Up, Up, Up, Enp, He],
        ),
        (
            Expectation::Known(K::Error),
            [Up, Reg, Reg, Reg, Reg, Reg, Reg, He],
        ),
        (
            Expectation::NegativeControl,
            [P, Enp, Enp, Reg, Reg, Reg, Caught, He],
        ),
    ];
    for (expectation, verdicts) in table {
        for (kind, want) in kinds.into_iter().zip(verdicts) {
            assert_eq!(
                expectation.verdict(kind),
                want,
                "{kind} against {expectation:?}"
            );
            assert_eq!(
                expectation.is_unexpected(kind),
                matches!(want, Reg | He),
                "{kind} against {expectation:?}: fails the run?"
            );
        }
    }
    for (verdict, fails) in [
        (P, false),
        (Enp, false),
        (Caught, false),
        (Up, false),
        (Verdict::Flaky, false),
        (Reg, true),
        (He, true),
    ] {
        assert_eq!(verdict.fails_run(), fails, "{}", verdict.name());
    }
}

#[test]
fn negative_controls_tolerate_fail_but_not_crash() {
    let e = Expectation::NegativeControl;
    assert!(!e.is_unexpected(OutcomeKind::Fail));
    assert!(!e.is_unexpected(OutcomeKind::Pass));
    assert!(e.is_unexpected(OutcomeKind::Crash));
    assert!(Expectation::Pass.is_unexpected(OutcomeKind::Fail));
    assert!(!Expectation::Known(OutcomeKind::Fault).is_unexpected(OutcomeKind::Fault));
    assert!(Expectation::Known(OutcomeKind::Fault).is_unexpected(OutcomeKind::Fail));
}

/// Which cases get a negative control's latitude: every `none`, and `finish` on exactly the
/// paths whose memory OpenCL hands over only by map/unmap (USE_HOST_PTR) or acquire/release
/// (imported memory). No other sync makes one, on any path.
#[test]
fn negative_controls_are_no_sync_and_finish_where_the_path_needs_more() {
    use PathKind::*;
    let finish_breaks_a_rule = [
        UseHostPtr,
        PinnedUseHostPtr,
        DeviceUseHostPtr,
        ManagedUseHostPtr,
        SubBufferUseHostPtr,
        RegisteredUseHostPtr,
        RegisteredUnalignedUseHostPtr,
        VmmFdClImport,
        VkMemoryImport,
    ];
    let finish_is_enough = [
        Copy,
        ClSvmCoarse,
        ClSvmFine,
        DevicePtrAsClArg,
        ClSvmCoarseMemcpy,
        ClSvmFineMemcpy,
        HostPtrSvmMemcpy,
        HostPtrUnalignedSvmMemcpy,
        ClGpuVa,
        ClDmabufHipImport,
        IpcDevicePtrAsClArg,
    ];
    assert_eq!(
        finish_breaks_a_rule.len() + finish_is_enough.len(),
        PathKind::ALL.len()
    );
    let case = |path, sync| Case {
        pair: pocl_host(),
        path,
        sync,
        op: Op::Handoff,
        n: 1,
        env: Default::default(),
    };
    for path in finish_breaks_a_rule.into_iter().chain(finish_is_enough) {
        let finish = finish_breaks_a_rule.contains(&path);
        assert!(is_negative_control(path, SyncMode::None), "{path}");
        assert_eq!(
            is_negative_control(path, SyncMode::Finish),
            finish,
            "{path}"
        );
        assert!(case(path, SyncMode::None).is_negative_control(), "{path}");
        assert_eq!(
            case(path, SyncMode::Finish).is_negative_control(),
            finish,
            "{path}"
        );
        for sync in [
            SyncMode::Event,
            SyncMode::Map,
            SyncMode::AcquireRelease,
            SyncMode::Semaphore,
        ] {
            assert!(!is_negative_control(path, sync), "{path}/{sync}");
            assert!(!case(path, sync).is_negative_control(), "{path}/{sync}");
        }
    }
}

/// The codes each runtime reports a device memory fault by, and neighbours that are not one.
#[test]
fn device_faults_are_named_by_each_runtimes_own_codes() {
    let error = |api, code, name: &str| ApiError {
        api,
        call: "call".into(),
        code,
        name: name.into(),
        detail: String::new(),
    };
    let opencl = |code| error(Api::OpenCl, code, "CL_ERROR").is_device_fault();
    assert!(opencl(-5) && opencl(-14));
    assert!(!opencl(-4) && !opencl(-36) && !opencl(0));
    for (api, name, fault) in [
        (Api::Cuda, "CUDA_ERROR_ILLEGAL_ADDRESS", true),
        (Api::Cuda, "CUDA_ERROR_LAUNCH_FAILED", true),
        (Api::Cuda, "CUDA_ERROR_ILLEGAL_INSTRUCTION", true),
        (Api::Cuda, "CUDA_ERROR_MISALIGNED_ADDRESS", true),
        (Api::Cuda, "CUDA_ERROR_OUT_OF_MEMORY", false),
        (Api::Hip, "hipErrorIllegalAddress", true),
        (Api::Hip, "hipErrorLaunchFailure", true),
        (Api::Hip, "hipErrorInvalidValue", false),
        (Api::Host, "hipErrorIllegalAddress", false),
    ] {
        assert_eq!(
            error(api, 700, name).is_device_fault(),
            fault,
            "{api:?} {name}"
        );
    }
    assert!(!error(Api::Host, -5, "CL_OUT_OF_RESOURCES").is_device_fault());
}

/// gemm and cholesky need a BLAS/solver library on the peer (placement a device): the host
/// peer gets no such case; they are the matrix ops.
#[test]
fn ops_apply_to_the_peers_that_can_run_them() {
    let hip = Api::Hip;
    for op in [Op::Handoff, Op::Fft, Op::Pipeline] {
        assert!(op.applies_to(Api::Host) && op.applies_to(hip), "{op}");
        assert!(!op.is_matrix(), "{op}");
    }
    for op in [Op::Gemm, Op::Cholesky, Op::Placement] {
        assert!(
            !op.applies_to(Api::Host) && op.applies_to(hip) && op.applies_to(Api::Cuda),
            "{op}"
        );
    }
    assert!(Op::Gemm.is_matrix() && Op::Cholesky.is_matrix() && !Op::Placement.is_matrix());
}

#[test]
fn a_variant_adds_a_last_segment_and_a_plain_case_keeps_its_id() {
    let plain = Case {
        pair: pocl_host(),
        path: PathKind::Copy,
        sync: SyncMode::Finish,
        op: Op::Handoff,
        n: 4097,
        env: EnvVariant::default(),
    };
    assert_eq!(plain.id(), "pocl0+host/copy/finish/handoff/n=4097");
    assert_eq!(plain.table(), "pocl0+host");
    // A results file written before variants existed has no `env`; it reads as the plain one.
    let mut json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("env").is_none(), "{json}");
    assert_eq!(serde_json::from_value::<Case>(json.clone()).unwrap(), plain);

    let sdma = Case {
        env: EnvVariant::new([("HSA_ENABLE_SDMA", "0")]).unwrap(),
        ..plain.clone()
    };
    assert_eq!(
        sdma.id(),
        "pocl0+host/copy/finish/handoff/n=4097/env:HSA_ENABLE_SDMA=0"
    );
    assert_eq!(sdma.table(), "pocl0+host env:HSA_ENABLE_SDMA=0");
    assert_ne!(sdma, plain);
    json["env"] = serde_json::json!({"HSA_ENABLE_SDMA": "0"});
    assert_eq!(serde_json::from_value::<Case>(json).unwrap(), sdma);
}

/// A pass with a kernel warning is a pass in every verdict; a case the run died during fails
/// the run unless it is known.
#[test]
fn a_warn_is_a_pass_and_an_incomplete_case_needs_a_look() {
    use OutcomeKind as K;
    for e in [
        Expectation::Pass,
        Expectation::Unbaselined,
        Expectation::NegativeControl,
        Expectation::Known(K::Warn),
    ] {
        assert_eq!(e.verdict(K::Warn), Verdict::Pass, "{e:?}");
    }
    assert_eq!(
        Expectation::Known(K::Crash).verdict(K::Warn),
        Verdict::UnexpectedPass
    );
    for e in [
        Expectation::Pass,
        Expectation::Unbaselined,
        Expectation::NegativeControl,
        Expectation::Known(K::Crash),
    ] {
        assert_eq!(e.verdict(K::Incomplete), Verdict::Regression, "{e:?}");
    }
    assert_eq!(
        Expectation::Known(K::Incomplete).verdict(K::Incomplete),
        Verdict::ExpectedNonPass
    );
    assert_eq!(
        Outcome::Warn {
            warning: "amdgpu: x".into()
        }
        .reason(),
        "pass, with a kernel warning: amdgpu: x"
    );
}
