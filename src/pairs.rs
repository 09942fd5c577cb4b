//! Pair discovery: which OpenCL device works with which participant. The host pairs with every
//! OpenCL device; a device runtime's device pairs with the OpenCL device that is the same
//! physical GPU, matched by UUID or else PCI bus id, never by name (the APIs name GPUs
//! differently: "NVIDIA H200" vs "NVIDIA H200 NVL", "gfx908" vs "AMD Instinct MI100").

use crate::model::{ApiError, ClDeviceRef, Pair, Peer};
pub use crate::probe::same_gpu;
use crate::probe::{DeviceProbe, Probe, Queried, ROCM_OPENCL};
use crate::runtimes::opencl;

/// The ROCm install a worker loads HIP from when its pair is one of several installs' (the
/// worker's `--rocm-path` otherwise). Set by the runner per worker, read by the worker only.
pub const WORKER_ROCM_PATH_ENV: &str = "CLHIP_WORKER_ROCM_PATH";

/// Every host pair on this machine, in OpenCL enumeration order (in-process; tests use it).
pub fn discover() -> Result<Vec<Pair>, ApiError> {
    let devices = opencl::enumerate()?;
    Ok(devices
        .into_iter()
        .map(|d| Pair {
            opencl: d.r,
            peer: Peer::HOST,
            install: None,
            cl_gpu: None,
        })
        .collect())
}

fn cl_ref(d: &DeviceProbe) -> ClDeviceRef {
    ClDeviceRef {
        platform_index: d.platform_index,
        device_index: d.device_index,
        label: d.label.clone(),
    }
}

/// The pairs a probe found (the CLI's: its probe runs in a child process). Host pairs first,
/// then each device runtime's devices with their OpenCL twins: CUDA's, then HIP's, each install
/// of several in the order given, so that one GPU seen by two installs is two pairs. Last, where
/// one runtime sees two or more GPUs that OpenCL sees too, pairs across GPUs
/// ([`across_gpus`]).
pub fn from_probe(probe: &Probe) -> Vec<Pair> {
    let cl: Vec<&DeviceProbe> = probe.platforms.iter().flat_map(|p| &p.devices).collect();
    let mut pairs: Vec<Pair> = cl
        .iter()
        .map(|d| Pair {
            opencl: cl_ref(d),
            peer: Peer::HOST,
            install: None,
            cl_gpu: None,
        })
        .collect();
    for rt in probe.device_runtimes() {
        for dev in &rt.status.devices {
            if let Some(twin) = same_gpu(dev, &cl) {
                pairs.push(Pair {
                    opencl: cl_ref(twin),
                    peer: Peer {
                        api: rt.api,
                        ordinal: dev.ordinal,
                    },
                    install: rt.install.map(|i| i.label.clone()),
                    cl_gpu: None,
                });
            }
        }
    }
    pairs.extend(across_gpus(probe));
    pairs
}

/// Pairs across two GPUs of one runtime (and install): each GPU's OpenCL device with the next
/// GPU's peer, round the ring of the GPUs that OpenCL sees too, in the runtime's order. So every
/// GPU is once OpenCL's and once the peer's, and a host of N GPUs has N such pairs, not N(N-1):
/// two on two GPUs (`nvidia0+cuda1.xgpu`, `nvidia1+cuda0.xgpu`), none on one.
pub fn across_gpus(probe: &Probe) -> Vec<Pair> {
    let cl: Vec<&DeviceProbe> = probe.platforms.iter().flat_map(|p| &p.devices).collect();
    let mut pairs = Vec::new();
    for rt in probe.device_runtimes() {
        let twinned: Vec<(usize, &DeviceProbe)> = rt
            .status
            .devices
            .iter()
            .filter_map(|d| same_gpu(d, &cl).map(|twin| (d.ordinal, twin)))
            .collect();
        if twinned.len() < 2 {
            continue;
        }
        for (i, &(cl_gpu, twin)) in twinned.iter().enumerate() {
            let (peer_gpu, peer_twin) = twinned[(i + 1) % twinned.len()];
            // Two devices of one runtime that OpenCL sees as one device are no two GPUs.
            if peer_twin.label == twin.label {
                continue;
            }
            pairs.push(Pair {
                opencl: cl_ref(twin),
                peer: Peer {
                    api: rt.api,
                    ordinal: peer_gpu,
                },
                install: rt.install.map(|i| i.label.clone()),
                cl_gpu: Some(cl_gpu),
            });
        }
    }
    pairs
}

/// What a worker running `pair`'s cases needs in its environment, the OpenCL label aside: only
/// its OpenCL device's vendor library loaded (so a vendor that hangs or crashes in
/// enumeration, or a second LLVM, never enters its process), and, for a pair of one of several
/// ROCm installs, that install. Its OpenCL is then the install's own ROCm OpenCL where the
/// device is ROCm's and the install has one: libamdocl64 and libamdhip64 share one HSA runtime,
/// so the registered libamdocl64 of another install would put that install's HSA under this
/// install's HIP (which HIP's loading refuses as a mixed install).
pub fn worker_env(probe: &Probe, pair: &Pair) -> Vec<(String, String)> {
    let install = pair.install.as_deref().and_then(|l| probe.hip_install(l));
    let device = probe.cl_device(&pair.opencl.label);
    let rocm_opencl = device
        .and_then(|d| d.icd_library.as_deref())
        .is_some_and(|lib| {
            std::path::Path::new(lib)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(ROCM_OPENCL))
        });
    let own_opencl = install
        .and_then(|i| i.opencl_library.as_deref())
        .filter(|_| rocm_opencl);
    let mut env = match own_opencl {
        Some(lib) => opencl::single_vendor_env(lib),
        None => probe.icd_env(&pair.opencl.label).unwrap_or_default(),
    };
    if let Some(i) = install {
        env.push((
            WORKER_ROCM_PATH_ENV.to_string(),
            i.root.display().to_string(),
        ));
    }
    if std::env::var_os(CUDA_CONNECTIONS_ENV).is_none() {
        env.push((CUDA_CONNECTIONS_ENV.to_string(), "1".to_string()));
    }
    env
}

/// CUDA's hardware work queues per context (default 8), read by the CUDA driver under both
/// CUDA and NVIDIA's OpenCL, and by nothing else. Each is a channel the driver sets up when the
/// context is made, and the NVIDIA driver makes contexts one at a time across processes; a run
/// starts a worker, with a CUDA context and NVIDIA OpenCL's own, after every crash or fault.
/// With 1, the full H200 matrix at `-j 4` took 38 s instead of 78 s. A case uses one stream or
/// queue per context, so no case loses concurrency it had. A value set in the runner's
/// environment is kept.
pub const CUDA_CONNECTIONS_ENV: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// What pairing could not see, one line each: OpenCL vendor libraries that crashed, hung or
/// exited while probed (their devices are in no pair), then device-runtime devices that no
/// OpenCL device matched, with what was compared. A GPU that OpenCL cannot see is worth a line
/// in the run's output, not silence.
pub fn unpaired(probe: &Probe) -> Vec<String> {
    let broken = probe
        .broken_vendors()
        .into_iter()
        .map(|line| format!("{line} (its devices are in no pair)"));
    let cl: Vec<&DeviceProbe> = probe.platforms.iter().flat_map(|p| &p.devices).collect();
    let devices = probe.device_runtimes().into_iter().flat_map(|rt| {
        rt.status
            .devices
            .iter()
            .filter(|d| same_gpu(d, &cl).is_none())
            .map(|d| {
                format!(
                    "{} ({}, UUID {}, PCI {}) matches no OpenCL device",
                    rt.device_label(d.ordinal),
                    d.name,
                    d.uuid,
                    d.pci_bus_id
                )
            })
            .collect::<Vec<_>>()
    });
    broken.chain(devices).collect()
}

/// Keeps the pairs of the GPUs `selectors` name, for fleets that give each runner one GPU.
/// A selector is a device-runtime index (`0`, as `cuda0`/`hip0` and nvidia-smi number them),
/// a UUID (with or without nvidia-smi's `GPU-` prefix), a PCI bus id (`0000:3b:00.0`, any
/// case or domain width), or an OpenCL device label (`nvidia1`). A GPU's pairs are every pair
/// of its device-runtime device and of its OpenCL twin. A selector that names nothing
/// is an error listing what there is.
pub fn select(probe: &Probe, pairs: Vec<Pair>, selectors: &[String]) -> anyhow::Result<Vec<Pair>> {
    let cl: Vec<&DeviceProbe> = probe.platforms.iter().flat_map(|p| &p.devices).collect();
    let norm_uuid = |s: &str| s.trim().trim_start_matches("GPU-").to_ascii_lowercase();
    let norm_pci = |s: &str| crate::runtimes::text::normalise_pci_bus_id(s);
    let mut peers: Vec<Peer> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for sel in selectors {
        let mut hit = false;
        for rt in probe.device_runtimes() {
            for dev in &rt.status.devices {
                let is = sel.trim().parse::<usize>().is_ok_and(|i| i == dev.ordinal)
                    || (!dev.uuid.is_empty() && norm_uuid(sel) == norm_uuid(&dev.uuid))
                    || norm_pci(sel).is_some_and(|p| Some(p) == norm_pci(&dev.pci_bus_id));
                if is {
                    hit = true;
                    peers.push(Peer {
                        api: rt.api,
                        ordinal: dev.ordinal,
                    });
                    if let Some(twin) = same_gpu(dev, &cl) {
                        labels.push(twin.label.clone());
                    }
                }
            }
        }
        for d in &cl {
            let uuid = match &d.uuid {
                Queried::Value(u) => Some(norm_uuid(u)),
                _ => None,
            };
            let pci = match &d.pci_bus_id {
                Queried::Value(p) => norm_pci(p),
                _ => None,
            };
            if d.label == *sel
                || uuid.is_some_and(|u| u == norm_uuid(sel))
                || pci.is_some_and(|p| Some(p) == norm_pci(sel))
            {
                hit = true;
                labels.push(d.label.clone());
            }
        }
        if !hit {
            let mut known: Vec<String> = Vec::new();
            for rt in probe.device_runtimes() {
                for d in &rt.status.devices {
                    known.push(format!(
                        "{} (UUID {}, PCI {})",
                        rt.device_label(d.ordinal),
                        d.uuid,
                        d.pci_bus_id
                    ));
                }
            }
            known.extend(cl.iter().map(|d| d.label.clone()));
            anyhow::bail!(
                "--devices `{sel}` names no GPU; there are: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        }
    }
    // A pair across GPUs keeps both busy: it is kept only where both were selected, each by
    // its device-runtime device or its OpenCL twin.
    let twin_of = |p: &Pair, ordinal: usize| {
        probe
            .device_runtimes()
            .into_iter()
            .filter(|rt| rt.api == p.peer.api && rt.install.map(|i| &i.label) == p.install.as_ref())
            .flat_map(|rt| rt.status.devices.iter())
            .find(|d| d.ordinal == ordinal)
            .and_then(|d| same_gpu(d, &cl))
            .map(|twin| twin.label.clone())
    };
    let gpu_selected = |p: &Pair, ordinal: usize| {
        let peer = Peer {
            api: p.peer.api,
            ordinal,
        };
        peers.contains(&peer) || twin_of(p, ordinal).is_some_and(|l| labels.contains(&l))
    };
    let selected = |p: &Pair| match p.cl_gpu {
        None => peers.contains(&p.peer) || labels.contains(&p.opencl.label),
        Some(cl_gpu) => gpu_selected(p, cl_gpu) && gpu_selected(p, p.peer.ordinal),
    };
    Ok(pairs.into_iter().filter(selected).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Queried;
    use crate::runtimes::device::DeviceInfo;

    fn cl_dev(label: &str, uuid: Option<&str>, pci: Option<&str>) -> DeviceProbe {
        let q = |v: Option<&str>| match v {
            Some(v) => Queried::Value(v.to_string()),
            None => Queried::Absent("no extension".into()),
        };
        let mut d: DeviceProbe = serde_json::from_value(serde_json::json!({
            "label": label, "platform_index": 0, "device_index": 0, "name": "x",
            "vendor": {"value": "v"}, "device_version": {"value": "v"},
            "driver_version": {"value": "v"}, "opencl_c_version": {"value": "v"},
            "svm": {"absent": "n/a"}, "max_work_group_size": {"value": 1},
            "global_mem_bytes": {"value": 1}, "max_alloc_bytes": {"value": 1},
            "interop_extensions": {}, "external_memory_import_handle_types": {"absent": "n/a"},
            "semaphore_types": {"absent": "n/a"}, "semaphore_import_handle_types": {"absent": "n/a"},
            "semaphore_export_handle_types": {"absent": "n/a"}, "uuid": {"absent": "n/a"},
            "pci_bus_id": {"absent": "n/a"}, "pci_bus_id_source": "", "extensions": {"value": []}
        }))
        .unwrap();
        d.uuid = q(uuid);
        d.pci_bus_id = q(pci);
        d
    }

    fn gpu(uuid: &str, pci: &str) -> DeviceInfo {
        DeviceInfo {
            uuid: uuid.into(),
            pci_bus_id: pci.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_broken_vendor_is_a_warning_line_before_the_unpaired_devices() {
        let mut p: Probe =
            serde_json::from_str(include_str!("../tests/fixtures/nvidia-h200-probe.json")).unwrap();
        assert!(unpaired(&p).is_empty(), "{:?}", unpaired(&p));
        p.opencl_vendors.push(crate::probe::VendorProbe {
            library: "/opt/bad/libbad.so".into(),
            listed_in: "OCL_ICD_FILENAMES".into(),
            state: crate::probe::VendorState::Hung {
                limit_s: 20.0,
                during: "in clGetPlatformIDs".into(),
            },
            platforms: 0,
            stderr_tail: Vec::new(),
        });
        assert_eq!(
            unpaired(&p),
            [
                "OpenCL vendor library /opt/bad/libbad.so (listed in OCL_ICD_FILENAMES): hung: no \
              answer within 20 s in clGetPlatformIDs (its devices are in no pair)"
            ]
        );
    }

    fn two_installs() -> Probe {
        serde_json::from_str(include_str!(
            "../tests/fixtures/two-rocm-installs-probe.json"
        ))
        .unwrap()
    }

    fn var<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn one_gpu_seen_by_two_installs_is_a_pair_per_install() {
        let p = two_installs();
        let ids: Vec<String> = from_probe(&p).iter().map(Pair::id).collect();
        assert_eq!(
            ids,
            ["rocm0+host", "rocm0+hip@6.3.2:0", "rocm0+hip@7.0.0:0"]
        );
        // A GPU picked by index, PCI bus id or OpenCL label keeps every install's pair of it.
        for sel in ["0", "0000:c3:00.0", "rocm0"] {
            let kept = select(&p, from_probe(&p), &[sel.to_string()]).unwrap();
            assert!(kept.len() >= 2, "{sel}: {kept:?}");
            assert!(kept.iter().any(|k| k.install.as_deref() == Some("6.3.2")));
            assert!(kept.iter().any(|k| k.install.as_deref() == Some("7.0.0")));
        }
        let err = select(&p, from_probe(&p), &["7".to_string()]).unwrap_err();
        assert!(
            err.to_string()
                .contains("hip@6.3.2:0 (UUID , PCI 0000:c3:00.0)")
                && err.to_string().contains("hip@7.0.0:0"),
            "{err}"
        );
        // A device no OpenCL device matches is named with its install.
        let mut lonely = two_installs();
        lonely.hip_installs[1].runtime.devices[0].pci_bus_id = "0000:99:00.0".into();
        assert_eq!(
            unpaired(&lonely),
            ["hip@7.0.0:0 (AMD Instinct MI100, UUID , PCI 0000:99:00.0) matches no OpenCL device"]
        );
        assert_eq!(from_probe(&lonely).len(), 2);
    }

    #[test]
    fn workers_get_one_cuda_work_queue_unless_the_runner_was_given_a_number() {
        let p = two_installs();
        let pairs = from_probe(&p);
        let env = worker_env(&p, &pairs[0]);
        match std::env::var(CUDA_CONNECTIONS_ENV) {
            // The runner's own setting is inherited by the worker, not overridden.
            Ok(_) => assert_eq!(var(&env, CUDA_CONNECTIONS_ENV), None),
            Err(_) => assert_eq!(var(&env, CUDA_CONNECTIONS_ENV), Some("1")),
        }
    }

    #[test]
    fn each_install_s_workers_get_its_root_and_its_own_rocm_opencl() {
        let p = two_installs();
        let pairs = from_probe(&p);
        let env = |i: usize| worker_env(&p, &pairs[i]);
        let (host, old, new) = (env(0), env(1), env(2));
        // The host pair loads HIP from no install and the registered ROCm OpenCL.
        assert_eq!(var(&host, WORKER_ROCM_PATH_ENV), None);
        assert_eq!(var(&host, "OCL_ICD_FILENAMES"), Some("libamdocl64.so"));
        for (env, root) in [(&old, "/opt/rocm-6.3.2"), (&new, "/opt/rocm-7.0.0")] {
            assert_eq!(var(env, WORKER_ROCM_PATH_ENV), Some(root));
            let own = format!("{root}/lib/libamdocl64.so");
            assert_eq!(var(env, "OCL_ICD_FILENAMES"), Some(own.as_str()));
            assert_eq!(var(env, "OCL_ICD_VENDORS"), Some(own.as_str()));
        }
        // Without an OpenCL of its own, the install's workers load the registered one.
        let mut bare = two_installs();
        bare.hip_installs[1].opencl_library = None;
        let env = worker_env(&bare, &pairs[2]);
        assert_eq!(var(&env, "OCL_ICD_FILENAMES"), Some("libamdocl64.so"));
        assert_eq!(var(&env, WORKER_ROCM_PATH_ENV), Some("/opt/rocm-7.0.0"));
        // An OpenCL device that is not ROCm's keeps its own vendor library.
        let mut other = two_installs();
        other.platforms[0].devices[0].icd_library = Some("libpocl.so.2".into());
        let env = worker_env(&other, &pairs[1]);
        assert_eq!(var(&env, "OCL_ICD_FILENAMES"), Some("libpocl.so.2"));
        // A single-install probe names no install: its workers get the run's --rocm-path.
        let one: Probe =
            serde_json::from_str(include_str!("../tests/fixtures/mi100-like-probe.json")).unwrap();
        let pairs = from_probe(&one);
        assert_eq!(
            pairs.iter().map(Pair::id).collect::<Vec<_>>(),
            ["rocm0+host", "rocm0+hip0"]
        );
        assert_eq!(
            var(&worker_env(&one, &pairs[1]), WORKER_ROCM_PATH_ENV),
            None
        );
    }

    #[test]
    fn uuid_wins_then_pci_and_never_the_name() {
        let a = cl_dev(
            "nvidia0",
            Some("01382DE0-e496-54af-6b27-59d9267404a3"),
            Some("0000:00:06.0"),
        );
        let b = cl_dev("rocm0", None, Some("0000:c3:00.0"));
        let cl = [&a, &b];
        let by_uuid = gpu("01382de0-e496-54af-6b27-59d9267404a3", "0000:99:00.0");
        assert_eq!(same_gpu(&by_uuid, &cl).unwrap().label, "nvidia0");
        // ROCm OpenCL has no cl_khr_device_uuid: the PCI bus id (CL_DEVICE_TOPOLOGY_AMD) pairs.
        let by_pci = gpu("ffffffff-0000-0000-0000-000000000000", "0000:C3:00.0");
        assert_eq!(same_gpu(&by_pci, &cl).unwrap().label, "rocm0");
        assert!(same_gpu(&gpu("", ""), &cl).is_none());
    }
}
