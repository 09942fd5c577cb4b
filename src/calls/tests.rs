use super::*;

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_call_compares_by_the_function_it_calls() {
    assert_eq!(
        canonical("clCreateBuffer(CL_MEM_USE_HOST_PTR)"),
        "clCreateBuffer"
    );
    assert_eq!(
        canonical("clCreateBufferWithProperties(CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR)"),
        "clCreateBufferWithProperties"
    );
    assert_eq!(canonical("cuMemAlloc_v2"), "cuMemAlloc");
    assert_eq!(canonical("cuMemcpyHtoDAsync_v2"), "cuMemcpyHtoDAsync");
    assert_eq!(canonical("clFinish"), "clFinish");
    assert_eq!(canonical("host_alloc"), "host_alloc");
    // A reproducer's call text.
    assert_eq!(
        canonical("(m_buf = clCreateBuffer(context, CL_MEM_READ_WRITE, 8 * N, NULL, &err), err)"),
        "clCreateBuffer"
    );
    assert_eq!(canonical("cuMemAlloc(&m_dev, 8 * N)"), "cuMemAlloc");
    assert_eq!(canonical("free((void *)(uintptr_t)m_host)"), "free");
    assert_eq!(
        parse_line("open/clCreateContext"),
        (Some("open"), "clCreateContext")
    );
    let launch = "cuLaunchKernel(f, (unsigned)((threads + 255) / 256), 1, 1, 256)";
    assert_eq!(parse_line(launch), (None, launch));
    assert_eq!(canonical(parse_line(launch).1), "cuLaunchKernel");
}

/// What is not compared goes, every listed name and scope; what is, stays in order.
#[test]
fn normalising_keeps_the_compared_calls_in_order() {
    let text = "open/clGetPlatformIDs\nopen/clCreateContext\nclCreateBuffer(CL_MEM_USE_HOST_PTR)\n\
                clCreateKernel\nclSetKernelArg\nclGetKernelWorkGroupInfo\nclEnqueueNDRangeKernel\n\
                fft-plan/clCreateBuffer\nclGetDeviceInfo\ncuMemAlloc_v2\n\nclReleaseMemObject\n";
    assert_eq!(
        normalise(text),
        names(&[
            "clCreateBuffer",
            "clEnqueueNDRangeKernel",
            "cuMemAlloc",
            "clReleaseMemObject"
        ])
    );
    for (name, why) in UNCOMPARED_CALLS {
        assert!(normalise(name).is_empty(), "{name} is compared");
        assert!(!why.is_empty());
    }
    for (scope, _) in UNCOMPARED_SCOPES {
        assert!(normalise(&format!("{scope}/clFinish")).is_empty());
    }
    // A scope not listed is compared.
    assert_eq!(normalise("other/clFinish"), names(&["clFinish"]));
}

/// A run of syncs keeps each sync once; one after other work is a wait of its own.
#[test]
fn repeated_syncs_wait_once_and_syncs_after_work_stay() {
    let text = "clEnqueueNDRangeKernel\nclFinish\nclFinish\ncuStreamSynchronize\nclFinish\n\
                clEnqueueReadBuffer\nclFinish\n";
    assert_eq!(
        normalise(text),
        names(&[
            "clEnqueueNDRangeKernel",
            "clFinish",
            "cuStreamSynchronize",
            "clEnqueueReadBuffer",
            "clFinish"
        ])
    );
    // A dropped finish after an enqueue is a difference: the next call takes its place.
    let without = normalise("clEnqueueNDRangeKernel\nclEnqueueReadBuffer\n");
    let d = compare(&normalise(text), &without).expect("a finish is missing");
    assert_eq!(d.index, 1);
    assert_eq!(d.clhip.as_deref(), Some("clFinish"));
    assert_eq!(d.repro.as_deref(), Some("clEnqueueReadBuffer"));
}

#[test]
fn the_first_difference_is_found_with_both_sides() {
    let a = names(&[
        "clCreateBuffer",
        "clEnqueueFillBuffer",
        "clFinish",
        "clEnqueueMapBuffer",
    ]);
    assert_eq!(compare(&a, &a), None);
    // An extra call on clhip's side.
    let mut b = a.clone();
    b.insert(2, "clWaitForEvents".into());
    let d = compare(&b, &a).unwrap();
    assert_eq!(
        (d.index, d.clhip.as_deref(), d.repro.as_deref()),
        (2, Some("clWaitForEvents"), Some("clFinish"))
    );
    assert_eq!(d.before, names(&["clCreateBuffer", "clEnqueueFillBuffer"]));
    assert!(
        d.to_string()
            .contains("at call 2: clhip clWaitForEvents, reproducer clFinish")
    );
    // The reproducer stops short.
    let d = compare(&a, &a[..3]).unwrap();
    assert_eq!((d.index, d.repro.as_deref()), (3, None));
    assert!(d.to_string().contains("reproducer (no more calls)"));
}

/// A case's record holds the calls made while it ran, scoped ones marked, and nothing once
/// it ended. Other tests of this binary make OpenCL calls on their own threads, so only this
/// test's names are looked at.
#[test]
fn a_recorded_case_lists_its_calls_in_order() {
    let dir = tempfile::tempdir().unwrap();
    begin_case_in(dir.path(), "pocl0+host/copy/finish/handoff/n=1");
    record("testOnlyFirst");
    scoped(OPEN, || record("testOnlyOpened"));
    record("testOnlySecond");
    end_case();
    record("testOnlyAfter");
    let text = std::fs::read_to_string(dir.path().join("pocl0+host,copy,finish,handoff,n=1.calls"))
        .unwrap();
    let ours: Vec<&str> = text.lines().filter(|l| l.contains("testOnly")).collect();
    assert_eq!(
        ours,
        ["testOnlyFirst", "open/testOnlyOpened", "testOnlySecond"]
    );
}

/// A side that stopped is held to the other's calls up to where it stopped, no further.
#[test]
fn a_side_that_stopped_agrees_up_to_where_it_stopped() {
    let full = names(&[
        "clSVMAlloc",
        "clEnqueueNDRangeKernel",
        "clFinish",
        "clSVMFree",
    ]);
    let refused = names(&["clSVMAlloc", "clEnqueueNDRangeKernel"]);
    let reproducer_stopped = Stopped {
        clhip: false,
        repro: true,
    };
    assert_eq!(
        compare_until_stopped(&full, &refused, reproducer_stopped),
        None
    );
    // Stopped or not, what it did make must be clhip's.
    let other = names(&["clSVMAlloc", "clFinish"]);
    let d = compare_until_stopped(&full, &other, reproducer_stopped).unwrap();
    assert_eq!((d.index, d.repro.as_deref()), (1, Some("clFinish")));
    // A reproducer that made more calls than clhip before it stopped disagrees.
    let d = compare_until_stopped(&refused, &full, reproducer_stopped).unwrap();
    assert_eq!((d.index, d.clhip.as_deref()), (2, None));
    // clhip's worker died: the reproducer may go on.
    let died = Stopped {
        clhip: true,
        repro: false,
    };
    assert_eq!(compare_until_stopped(&refused, &full, died), None);
    // Neither stopped: the whole sequence.
    assert!(compare(&full, &refused).is_some());
    let both = Stopped {
        clhip: true,
        repro: true,
    };
    assert_eq!(compare_until_stopped(&full, &refused, both), None);
}
