use super::*;
use crate::model::{Op, OutcomeKind, Pair, PathKind, SyncMode};
use crate::ops::OPENCL_LABEL_ENV;

/// An H200 host with PoCL: pocl0 allocates at most 2^30 bytes at once of 4,098,478,080;
/// nvidia0 has coarse-grain buffer SVM only.
fn h200() -> Probe {
    serde_json::from_str(include_str!("../../tests/fixtures/nvidia-h200-probe.json")).unwrap()
}

fn pair(probe: &Probe, id: &str) -> Pair {
    pairs::from_probe(probe)
        .into_iter()
        .find(|p| p.id() == id)
        .unwrap_or_else(|| panic!("no pair {id}"))
}

fn case(probe: &Probe, pair_id: &str, path: PathKind, op: Op, n: usize) -> Case {
    Case {
        pair: pair(probe, pair_id),
        path,
        sync: SyncMode::Finish,
        op,
        n,
        env: Default::default(),
    }
}

fn device_mut<'a>(probe: &'a mut Probe, label: &str) -> &'a mut probe::DeviceProbe {
    probe
        .platforms
        .iter_mut()
        .flat_map(|p| &mut p.devices)
        .find(|d| d.label == label)
        .unwrap()
}

// A handoff's one buffer is 8 bytes an element; its device memory is three of them.
const FITS: usize = 1 << 27;

#[test]
fn a_buffer_of_exactly_the_largest_allocation_runs_and_one_more_element_does_not() {
    let p = h200();
    let at_limit = case(&p, "pocl0+host", PathKind::UseHostPtr, Op::Handoff, FITS);
    assert_eq!(too_big_for_device(&p, &at_limit), None);
    assert_eq!(decided_by_probe(&p, &at_limit), None);
    let over = case(
        &p,
        "pocl0+host",
        PathKind::UseHostPtr,
        Op::Handoff,
        FITS + 1,
    );
    assert_eq!(
        too_big_for_device(&p, &over).as_deref(),
        Some(
            "a 1073741832-byte buffer is more than pocl0 can allocate at once \
             (CL_DEVICE_MAX_MEM_ALLOC_SIZE 1073741824)"
        )
    );
    assert_eq!(decided_by_probe(&p, &over), too_big_for_device(&p, &over));
}

#[test]
fn all_of_a_case_s_buffers_are_held_to_the_device_s_memory() {
    let mut p = h200();
    let c = case(&p, "pocl0+host", PathKind::UseHostPtr, Op::Handoff, FITS);
    device_mut(&mut p, "pocl0").global_mem_bytes = Queried::Value(3 << 30);
    assert_eq!(too_big_for_device(&p, &c), None);
    device_mut(&mut p, "pocl0").global_mem_bytes = Queried::Value((3 << 30) - 1);
    assert_eq!(
        too_big_for_device(&p, &c).as_deref(),
        Some(
            "the case's 3221225472 bytes of device memory are more than pocl0 has \
             (CL_DEVICE_GLOBAL_MEM_SIZE 3221225471)"
        )
    );
}

#[test]
fn a_size_the_probe_could_not_read_decides_nothing() {
    let mut p = h200();
    let c = case(
        &p,
        "pocl0+host",
        PathKind::UseHostPtr,
        Op::Handoff,
        FITS * 4,
    );
    assert!(too_big_for_device(&p, &c).is_some());
    let d = device_mut(&mut p, "pocl0");
    d.max_alloc_bytes = Queried::Error("CL_INVALID_VALUE (-30)".into());
    d.global_mem_bytes = Queried::Absent("not asked".into());
    // The worker meets the device's own answer instead.
    assert_eq!(too_big_for_device(&p, &c), None);
    assert_eq!(decided_by_probe(&p, &c), None);
}

#[test]
fn an_svm_kind_the_device_lacks_is_decided_and_one_it_has_is_run() {
    let mut p = h200();
    let fine = case(&p, "nvidia0+host", PathKind::ClSvmFine, Op::Handoff, 4096);
    let coarse = case(&p, "nvidia0+host", PathKind::ClSvmCoarse, Op::Handoff, 4096);
    let why = decided_by_probe(&p, &fine).expect("nvidia0 has no fine-grain buffer SVM");
    assert!(
        why.starts_with("device lacks fine-grain buffer SVM"),
        "{why}"
    );
    assert_eq!(decided_by_probe(&p, &coarse), None);
    // Capabilities the probe could not read leave the case to the worker.
    device_mut(&mut p, "nvidia0").svm = Queried::Error("CL_INVALID_VALUE (-30)".into());
    assert_eq!(decided_by_probe(&p, &fine), None);
}

#[test]
fn decided_cases_are_unsupported_with_the_refusal_and_the_rest_run_in_order() {
    let p = h200();
    let items: Vec<Planned> = [
        case(&p, "pocl0+host", PathKind::UseHostPtr, Op::Handoff, 4096),
        case(&p, "nvidia0+host", PathKind::ClSvmFine, Op::Handoff, 4096),
        case(
            &p,
            "pocl0+host",
            PathKind::UseHostPtr,
            Op::Handoff,
            FITS + 1,
        ),
        case(&p, "nvidia0+host", PathKind::ClSvmCoarse, Op::Handoff, 4096),
    ]
    .into_iter()
    .map(|c| plan_item(&p, c, Expectation::Known(OutcomeKind::Unsupported)))
    .collect();
    let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
    let (run, decided) = decide_by_probe(&p, items);
    assert_eq!(
        run.iter().map(|r| &r.id).collect::<Vec<_>>(),
        [&ids[0], &ids[3]]
    );
    assert_eq!(
        decided.iter().map(|r| &r.id).collect::<Vec<_>>(),
        [&ids[1], &ids[2]]
    );
    for r in &decided {
        assert_eq!(r.outcome.kind(), OutcomeKind::Unsupported, "{}", r.id);
        assert_eq!(
            Some(r.outcome.reason()),
            r.work.case().and_then(|c| decided_by_probe(&p, c)),
        );
        assert_eq!(r.expectation, Expectation::Known(OutcomeKind::Unsupported));
    }
}

#[test]
fn a_worker_is_told_its_device_s_label_in_its_own_vendor_library() {
    let mut p = h200();
    let host = pair(&p, "nvidia0+host");
    let label_of = |env: &[(String, String)]| {
        env.iter()
            .find(|(k, _)| k == OPENCL_LABEL_ENV)
            .map(|(_, v)| v.clone())
    };
    // Unknown to the probe: the worker keeps the label it enumerates.
    assert_eq!(label_of(&worker_env(&p, &host)), None);
    device_mut(&mut p, "nvidia0").icd_label = Some("nvidia1".into());
    let env = worker_env(&p, &host);
    assert_eq!(label_of(&env).as_deref(), Some("nvidia0=nvidia1"));
    // On top of what every worker of the pair needs, not instead of it.
    let base = pairs::worker_env(&p, &host);
    assert_eq!(env[..base.len()], base[..]);
    assert_eq!(env.len(), base.len() + 1);
}

#[test]
fn a_case_keeps_busy_its_peer_s_gpu_or_else_its_opencl_device() {
    let p = h200();
    let e = Expectation::Unbaselined;
    let host = case(&p, "nvidia0+host", PathKind::UseHostPtr, Op::Handoff, 4096);
    assert_eq!(plan_item(&p, host, e).gpu, "nvidia0");
    let cuda = case(&p, "nvidia0+cuda0", PathKind::UseHostPtr, Op::Handoff, 4096);
    let item = plan_item(&p, cuda.clone(), e);
    assert_eq!(item.gpu, "cuda0");
    assert_eq!(item.env, worker_env(&p, &cuda.pair));
}

#[test]
fn the_selection_records_the_whole_plan_whatever_its_order() {
    let matrix = Matrix::default_matrix();
    let part: Partition = "hash:1/2".parse().unwrap();
    let ids = ["b", "a", "c"];
    let s = selection(&["x".into()], &[], Some(part), &matrix, ids.iter().copied());
    assert_eq!(s.planned, 3);
    assert_eq!(s.shards, [part]);
    assert_eq!(s.plan, Selection::plan_hash(["a", "b", "c"]));
    assert_ne!(s.plan, Selection::plan_hash(["a", "b"]));
    let whole = selection(&["x".into()], &[], None, &matrix, ids.iter().copied());
    assert!(whole.shards.is_empty());
    assert_eq!(whole.matrix, s.matrix);
}

#[test]
fn each_gpu_is_named_by_model_and_driver() {
    let ids = gpu_identities(&h200());
    let cuda = &ids["nvidia0+cuda0"];
    assert!(cuda.contains("H200") && cuda.contains("driver"), "{cuda}");
    assert!(ids["pocl0+host"].starts_with("OpenCL "), "{ids:?}");
}

#[test]
fn workers_are_held_to_the_case_limit_from_their_start_and_get_the_one_install() {
    let exe = WorkerExe::pin().unwrap();
    let args = |o: &crate::runner::RunOptions| {
        o.worker_args[crate::runner::worker_args(7).len()..].to_vec()
    };
    let one = RunOptionsBuilder::new(&exe, 7, 2.5)
        .rocm_paths(&["/opt/rocm-6.3.2".into()])
        .build();
    assert_eq!(one.seed, 7);
    assert_eq!(one.worker_exe, exe.path());
    assert_eq!(one.timeout, std::time::Duration::from_millis(2500));
    assert_eq!(one.startup_timeout, one.timeout);
    assert_eq!(args(&one), ["--rocm-path", "/opt/rocm-6.3.2"]);
    // Several installs: each pair's environment names its own, no worker argument does.
    let two = RunOptionsBuilder::new(&exe, 7, 2.5)
        .rocm_paths(&["/opt/a".into(), "/opt/b".into()])
        .build();
    assert!(args(&two).is_empty(), "{:?}", two.worker_args);
}

#[test]
fn a_plant_reaches_the_workers_with_the_cases_it_is_limited_to() {
    let exe = WorkerExe::pin().unwrap();
    let tail = |o: crate::runner::RunOptions| {
        o.worker_args[crate::runner::worker_args(1).len()..].join(" ")
    };
    let build = |plant, only: &[String]| {
        RunOptionsBuilder::new(&exe, 1, 1.0)
            .plant(plant, only)
            .unwrap()
            .build()
    };
    assert_eq!(tail(build(None, &["x".into()])), "");
    assert_eq!(
        tail(build(Some(crate::ops::Plant::SkipSync), &[])),
        "--plant skip-sync"
    );
    assert_eq!(
        tail(build(
            Some(crate::ops::Plant::FlipElement),
            &["a".into(), "b*".into()]
        )),
        "--plant flip-element --plant-only a,b*"
    );
    let batched = RunOptionsBuilder::new(&exe, 1, 1.0)
        .workers(8, 4, true)
        .retries(3)
        .build();
    assert_eq!(
        (
            batched.cases_per_worker,
            batched.jobs,
            batched.spare_workers,
            batched.retries
        ),
        (8, 4, true, 3)
    );
}

#[test]
fn only_a_queue_of_a_cpu_device_with_the_host_peer_uses_no_gpu() {
    let mut p = h200();
    let e = Expectation::Unbaselined;
    let items = |p: &Probe| {
        ["pocl0+host", "nvidia0+host", "nvidia0+cuda0"]
            .map(|pair| plan_item(p, case(p, pair, PathKind::Copy, Op::Handoff, 4096), e))
    };
    // A probe file older than the device type says nothing: every queue may touch a GPU.
    assert!(no_gpu_queues(&p, &items(&p)).is_empty());
    device_mut(&mut p, "pocl0").device_type = Some("CPU".into());
    device_mut(&mut p, "nvidia0").device_type = Some("GPU".into());
    let queues = no_gpu_queues(&p, &items(&p));
    assert_eq!(queues, ["pocl0".to_string()].into_iter().collect());
}
