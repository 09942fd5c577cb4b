//! Pairs across GPUs and one GPU per worker, as the plan makes them from a probe.

use super::*;
use crate::model::{Pair, PathKind};
use crate::peer::{PEER_GPUS_ENV, expected_gpu};
use crate::runtimes::hip::visible::RUN_ORDINALS_ENV;

/// The 2 x H200 host of reports/nvidia-2xh200-580.159.04-cuda13.0-probe.txt.
fn two_h200() -> Probe {
    serde_json::from_str(include_str!(
        "../../tests/fixtures/nvidia-2xh200-probe.json"
    ))
    .unwrap()
}

fn one_h200() -> Probe {
    serde_json::from_str(include_str!("../../tests/fixtures/nvidia-h200-probe.json")).unwrap()
}

/// The MI100-like probe with a second GPU, hip1, on bus c4 beside the first.
fn two_mi100() -> Probe {
    let mut p: Probe =
        serde_json::from_str(include_str!("../../tests/fixtures/mi100-like-probe.json")).unwrap();
    let mut cl = p.platforms[0].devices[0].clone();
    cl.label = "rocm1".into();
    cl.device_index = 1;
    cl.pci_bus_id = Queried::Value("0000:c4:00.0".into());
    p.platforms[0].devices.push(cl);
    let mut hip = p.hip.devices[0].clone();
    hip.ordinal = 1;
    hip.pci_bus_id = "0000:c4:00.0".into();
    p.hip.devices.push(hip);
    p
}

fn ids(pairs: &[Pair]) -> Vec<String> {
    pairs.iter().map(Pair::id).collect()
}

fn var<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn two_gpus_make_two_pairs_across_them_and_one_gpu_none() {
    let two = pairs::from_probe(&two_h200());
    assert_eq!(
        ids(&two),
        [
            "pocl0+host",
            "nvidia0+host",
            "nvidia1+host",
            "nvidia0+cuda0",
            "nvidia1+cuda1",
            "nvidia0+cuda1.xgpu",
            "nvidia1+cuda0.xgpu",
        ]
    );
    let across = &two[5];
    assert_eq!(across.cl_gpu, Some(0));
    assert_eq!(across.peer.ordinal, 1);
    assert!(
        !ids(&pairs::from_probe(&one_h200()))
            .iter()
            .any(|id| id.contains(".xgpu"))
    );
    // Every matrix case of a pair across GPUs is one of the paths that runs there.
    let cases = Matrix::default_matrix().expand(&two);
    let across: Vec<&Case> = cases.iter().filter(|c| c.pair.cl_gpu.is_some()).collect();
    let mut paths: Vec<PathKind> = across.iter().map(|c| c.path).collect();
    paths.sort();
    paths.dedup();
    assert_eq!(
        paths,
        [
            PathKind::Copy,
            PathKind::PinnedUseHostPtr,
            PathKind::ManagedUseHostPtr,
            PathKind::DevicePtrAsClArg,
            PathKind::ClSvmCoarseMemcpy,
            PathKind::ClSvmFineMemcpy,
            PathKind::IpcDevicePtrAsClArg,
        ]
    );
    assert!(
        across
            .iter()
            .all(|c| c.id().starts_with("nvidia") && c.id().contains(".xgpu/"))
    );
    // Each path's cases across GPUs are the same as on one GPU, path by path.
    let on_one: Vec<String> = cases
        .iter()
        .filter(|c| c.pair.id() == "nvidia0+cuda1.xgpu")
        .map(|c| c.id().replace("nvidia0+cuda1.xgpu/", ""))
        .collect();
    let same_gpu: Vec<String> = cases
        .iter()
        .filter(|c| c.pair.id() == "nvidia0+cuda0" && paths.contains(&c.path))
        .map(|c| c.id().replace("nvidia0+cuda0/", ""))
        .collect();
    assert_eq!(on_one, same_gpu);
    // One GPU's cases are what they were: no id of the one-GPU matrix changed.
    let one = Matrix::default_matrix().expand(&pairs::from_probe(&one_h200()));
    let one_ids: std::collections::BTreeSet<String> = one.iter().map(Case::id).collect();
    for id in [
        "nvidia0+cuda0/copy/finish/handoff/n=4097",
        "pocl0+host/copy/finish/handoff/n=4097",
    ] {
        assert!(one_ids.contains(id), "{id}");
    }
}

#[test]
fn a_pair_across_gpus_is_selected_only_with_both_its_gpus() {
    let p = two_h200();
    let keep = |sel: &[&str]| {
        let sel: Vec<String> = sel.iter().map(|s| s.to_string()).collect();
        ids(&pairs::select(&p, pairs::from_probe(&p), &sel).unwrap())
    };
    let one = keep(&["0"]);
    assert!(!one.iter().any(|id| id.contains(".xgpu")), "{one:?}");
    assert!(one.contains(&"nvidia0+cuda0".to_string()));
    for both in [
        &["0", "1"][..],
        &["nvidia0", "nvidia1"],
        &["0", "nvidia1"],
        &["9641a40c-7217-be29-fd01-f6f75e33669e", "0000:00:06.0"],
    ] {
        let kept = keep(both);
        assert!(
            kept.contains(&"nvidia0+cuda1.xgpu".to_string()),
            "{both:?}: {kept:?}"
        );
        assert!(
            kept.contains(&"nvidia1+cuda0.xgpu".to_string()),
            "{both:?}: {kept:?}"
        );
    }
}

#[test]
fn a_worker_is_told_the_gpus_its_peer_may_open_as_the_probe_saw_them() {
    let p = two_h200();
    let across = pairs::from_probe(&p)
        .into_iter()
        .find(|x| x.id() == "nvidia0+cuda1.xgpu")
        .unwrap();
    let env = worker_env(&p, &across);
    let listed = var(&env, PEER_GPUS_ENV);
    // The peer's GPU, and OpenCL's, where the IPC exporter allocates.
    let b = expected_gpu(listed, "cuda1").unwrap().unwrap();
    assert_eq!(b.uuid, "9641a40c-7217-be29-fd01-f6f75e33669e");
    assert_eq!(b.pci_bus_id, "0000:00:07.0");
    let a = expected_gpu(listed, "cuda0").unwrap().unwrap();
    assert_eq!(a.pci_bus_id, "0000:00:06.0");
    // A CUDA worker sees every GPU: NVIDIA's OpenCL would renumber under a list.
    assert_eq!(var(&env, "HIP_VISIBLE_DEVICES"), None);
    assert_eq!(var(&env, "CUDA_VISIBLE_DEVICES"), None);
    // A host pair has no device to hold to.
    let host = pairs::from_probe(&p)
        .into_iter()
        .find(|x| x.id() == "nvidia1+host")
        .unwrap();
    assert_eq!(var(&worker_env(&p, &host), PEER_GPUS_ENV), None);
}

#[test]
fn a_hip_worker_sees_only_its_pair_s_gpus_numbered_as_hip_then_numbers_them() {
    let p = two_mi100();
    let all = pairs::from_probe(&p);
    assert_eq!(
        ids(&all),
        [
            "rocm0+host",
            "rocm1+host",
            "rocm0+hip0",
            "rocm1+hip1",
            "rocm0+hip1.xgpu",
            "rocm1+hip0.xgpu",
        ]
    );
    let none = |_: &str| None;
    let env =
        |i: usize, inherited: &dyn Fn(&str) -> Option<String>| visible_hip_env(&all[i], inherited);
    let pairs_of = |e: Vec<(String, String)>| {
        (
            var(&e, "HIP_VISIBLE_DEVICES").map(String::from),
            var(&e, RUN_ORDINALS_ENV).map(String::from),
        )
    };
    let some = |a: &str, b: &str| (Some(a.to_string()), Some(b.to_string()));
    assert_eq!(pairs_of(env(3, &none)), some("1", "1"));
    // Across GPUs: both, in ascending order, as HIP will number them.
    assert_eq!(pairs_of(env(4, &none)), some("0,1", "0,1"));
    assert_eq!(pairs_of(env(5, &none)), some("0,1", "0,1"));
    // The runner's own list: the run's ordinals are places in it.
    let given = |k: &str| (k == "HIP_VISIBLE_DEVICES").then(|| "6, 2".to_string());
    assert_eq!(pairs_of(env(3, &given)), some("2", "1"));
    assert_eq!(pairs_of(env(4, &given)), some("6,2", "0,1"));
    // HIP reads CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset or empty.
    let cuda = |k: &str| match k {
        "HIP_VISIBLE_DEVICES" => Some(String::new()),
        "CUDA_VISIBLE_DEVICES" => Some("3,5".to_string()),
        _ => None,
    };
    assert_eq!(pairs_of(env(3, &cuda)), some("5", "1"));
    // A run ordinal the runner's list does not reach: the worker sees what the runner sees.
    let short = |k: &str| (k == "HIP_VISIBLE_DEVICES").then(|| "4".to_string());
    assert_eq!(env(3, &short), Vec::new());
    // The host pair's worker opens no HIP device.
    if std::env::var_os("HIP_VISIBLE_DEVICES").is_none()
        && std::env::var_os("CUDA_VISIBLE_DEVICES").is_none()
    {
        let w = worker_env(&p, &all[3]);
        assert_eq!(var(&w, "HIP_VISIBLE_DEVICES"), Some("1"));
        assert_eq!(var(&w, RUN_ORDINALS_ENV), Some("1"));
        let hip1 = expected_gpu(var(&w, PEER_GPUS_ENV), "hip1")
            .unwrap()
            .unwrap();
        assert_eq!(hip1.pci_bus_id, "0000:c4:00.0");
        assert_eq!(var(&worker_env(&p, &all[1]), "HIP_VISIBLE_DEVICES"), None);
    }
}
