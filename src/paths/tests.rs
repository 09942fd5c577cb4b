use super::*;
use crate::runtimes::opencl::SvmCaps;

/// What the runner decides from the probe and what a worker's allocation meets are this one
/// text, so a case decided without a worker reads as it would have from one.
#[test]
fn svm_refusal_names_the_missing_kind_for_svm_paths_only() {
    let coarse_only = SvmCaps {
        coarse_grain_buffer: true,
        ..SvmCaps::default()
    };
    let refused = svm_refusal(PathKind::ClSvmFine, &coarse_only).unwrap();
    assert_eq!(
        refused,
        "device lacks fine-grain buffer SVM (CL_DEVICE_SVM_CAPABILITIES: coarse buffer yes, fine buffer no, fine system no, atomics no)"
    );
    assert!(svm_refusal(PathKind::ClSvmFineMemcpy, &coarse_only).is_some());
    assert!(svm_refusal(PathKind::ClSvmCoarse, &coarse_only).is_none());
    assert!(svm_refusal(PathKind::ClSvmCoarseMemcpy, &coarse_only).is_none());
    let none = SvmCaps::default();
    assert!(
        svm_refusal(PathKind::ClSvmCoarse, &none)
            .unwrap()
            .contains("coarse-grain")
    );
    for other in [PathKind::Copy, PathKind::UseHostPtr, PathKind::ClGpuVa] {
        assert_eq!(svm_refusal(other, &none), None, "{other}");
    }
}

/// A NULL from clSVMAlloc of a kind the device advertises (svm_refusal let it through) is
/// the driver's failure, fine- or coarse-grain; only a size the device never promised stays
/// unsupported.
#[test]
fn an_advertised_svm_kind_that_allocates_null_fails() {
    let fail = |e: CaseError| match e.into_outcome() {
        o @ crate::model::Outcome::Fail { .. } => o.reason(),
        other => panic!("not a fail: {other:?}"),
    };
    assert_eq!(
        fail(svm_null(true, 8192, 0x401, Some(1 << 30))),
        "clSVMAlloc(CL_MEM_SVM_FINE_GRAIN_BUFFER) returned NULL (0): 8192 bytes, flags 0x401, although CL_DEVICE_SVM_CAPABILITIES advertises CL_DEVICE_SVM_FINE_GRAIN_BUFFER"
    );
    let coarse = fail(svm_null(false, 8192, 0x1, None));
    assert!(
        coarse.contains("advertises CL_DEVICE_SVM_COARSE_GRAIN_BUFFER"),
        "{coarse}"
    );
    match svm_null(true, 1 << 31, 0x401, Some(1 << 30)) {
        CaseError::Unsupported { reason, error } => {
            assert!(reason.contains("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), "{reason}");
            assert_eq!(error.map(|e| e.name), Some("NULL".into()));
        }
        other => panic!("{other:?}"),
    }
}

/// The model's negative controls (a rule broken on purpose) name the paths whose rooms say
/// they hand over by map/unmap or by acquire/release: `model` is below the rooms and cannot
/// ask them, so this holds the two to one answer.
#[test]
fn the_models_negative_controls_are_the_rooms_rule_breakers() {
    for &path in PathKind::ALL {
        for &sync in SyncMode::ALL {
            let rooms = sync == SyncMode::None
                || (sync == SyncMode::Finish && (path.is_use_host_ptr() || path.is_imported()));
            assert_eq!(
                crate::model::is_negative_control(path, sync),
                rooms,
                "{path}/{sync}"
            );
        }
    }
}

/// Every room takes `none` (the negative control) wherever it applies, and nothing where it
/// does not: a path whose room forgets a peer would silently drop its cases.
#[test]
fn every_room_takes_the_negative_control_where_it_applies() {
    for &path in PathKind::ALL {
        assert!(
            [Api::Host, Api::Cuda, Api::Hip]
                .iter()
                .any(|&a| path.applies_to(a)),
            "{path} applies to no peer"
        );
        for api in [Api::Host, Api::Cuda, Api::Hip] {
            if path.applies_to(api) {
                assert!(
                    path.syncs(api).contains(&SyncMode::None),
                    "{path} on {api:?}"
                );
            }
        }
    }
}
