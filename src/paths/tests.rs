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
    // dma-buf export takes coarse-grain SVM: its room says so.
    assert!(
        svm_refusal(PathKind::ClDmabufHipImport, &none)
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

/// The model's negative controls (a rule broken on purpose) are read from the rooms'
/// declarations: `finish` on the paths whose memory OpenCL hands over only by map/unmap
/// (CL_MEM_USE_HOST_PTR) or acquire/release (imported memory), `none` everywhere. The paths
/// that were there when the declarations came are pinned by name, so that a room that loses
/// its declaration is seen; a path added since answers for itself.
#[test]
fn the_negative_controls_are_the_declared_rule_breakers() {
    use PathKind::*;
    let map = [
        UseHostPtr,
        PinnedUseHostPtr,
        DeviceUseHostPtr,
        ManagedUseHostPtr,
    ];
    let acquire = [VmmFdClImport, VkMemoryImport];
    let neither = [
        Copy,
        ClSvmCoarse,
        ClSvmFine,
        DevicePtrAsClArg,
        ClSvmCoarseMemcpy,
        ClSvmFineMemcpy,
        ClGpuVa,
        ClDmabufHipImport,
        IpcDevicePtrAsClArg,
    ];
    for &path in PathKind::ALL {
        let want = path.only_handed_over_by();
        let pinned = if map.contains(&path) {
            Some(Some(SyncMode::Map))
        } else if acquire.contains(&path) {
            Some(Some(SyncMode::AcquireRelease))
        } else if neither.contains(&path) {
            Some(None)
        } else {
            None
        };
        if let Some(pinned) = pinned {
            assert_eq!(want, pinned, "{path}");
        }
        assert_eq!(
            path.is_use_host_ptr(),
            want == Some(SyncMode::Map),
            "{path}"
        );
        assert_eq!(
            path.is_imported(),
            want == Some(SyncMode::AcquireRelease),
            "{path}"
        );
        for &sync in SyncMode::ALL {
            let control = sync == SyncMode::None || (sync == SyncMode::Finish && want.is_some());
            assert_eq!(
                crate::model::is_negative_control(path, sync),
                control,
                "{path}/{sync}"
            );
        }
    }
}

/// A room that declares the one sync OpenCL may hand its memory over by takes that sync, and
/// `finish` (the negative control that leaves it out), wherever its paths apply: the declared
/// rule and the syncs the room offers are one answer.
#[test]
fn a_declared_handover_is_a_sync_its_room_takes() {
    for &path in PathKind::ALL {
        let Some(only) = path.only_handed_over_by() else {
            continue;
        };
        for api in [Api::Host, Api::Cuda, Api::Hip] {
            if path.applies_to(api) {
                let syncs = path.syncs(api);
                assert!(syncs.contains(&only), "{path} on {api:?}: {syncs:?}");
                assert!(syncs.contains(&SyncMode::Finish), "{path} on {api:?}");
            }
        }
    }
}

/// The reproducer generator covers what the rooms with C say, for the peers their paths apply
/// to: at least the four host paths and the ten device paths whose C was written when the
/// rooms came to say so, the imported paths, and ROCm's dma-buf import on hip pairs; and, every
/// room having C now, every path wherever it applies (a path added without C fails here).
#[test]
fn the_rooms_with_c_are_the_reproducers_paths() {
    use PathKind::*;
    let covered = |api| -> Vec<PathKind> {
        PathKind::ALL
            .iter()
            .copied()
            .filter(|p| p.has_reproducer(api))
            .collect()
    };
    let host = [Copy, ClSvmCoarse, ClSvmFine, UseHostPtr];
    let device = [
        Copy,
        ClSvmCoarse,
        ClSvmFine,
        PinnedUseHostPtr,
        DeviceUseHostPtr,
        ManagedUseHostPtr,
        DevicePtrAsClArg,
        ClSvmCoarseMemcpy,
        ClSvmFineMemcpy,
        ClGpuVa,
        IpcDevicePtrAsClArg,
    ];
    let imported = [VmmFdClImport, VkMemoryImport];
    for (api, with_c) in [
        (Api::Host, &host[..]),
        (Api::Cuda, &[&device[..], &imported[..]].concat()),
        (
            Api::Hip,
            &[&device[..], &imported[..], &[ClDmabufHipImport]].concat(),
        ),
    ] {
        let covered = covered(api);
        for path in with_c {
            assert!(covered.contains(path), "{path} on {api:?}: {covered:?}");
        }
        // Every room has C: each path is covered wherever it applies.
        for &path in PathKind::ALL {
            assert_eq!(
                covered.contains(&path),
                path.applies_to(api),
                "{path} on {api:?}"
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
