//! The OpenCL queries of one device: the values interop depends on, each kept with its error
//! when the query fails, and the platforms of whichever vendors this process loads.

use super::records::{DeviceProbe, PlatformProbe, Queried};
use crate::model::ApiError;
use crate::runtimes::opencl::{self, SvmCaps, types::cl_device_id};

pub use crate::runtimes::text::uuid_string;

/// The extensions interop depends on, reported present or absent for every device.
pub const INTEROP_EXTENSIONS: &[&str] = &[
    "cl_khr_external_memory",
    "cl_khr_external_memory_opaque_fd",
    "cl_khr_external_memory_dma_buf",
    "cl_khr_external_semaphore",
    "cl_khr_external_semaphore_opaque_fd",
    "cl_khr_external_semaphore_sync_fd",
    "cl_khr_semaphore",
    "cl_khr_device_uuid",
    "cl_khr_pci_bus_info",
    "cl_amd_device_attribute_query",
    "cl_nv_device_attribute_query",
];

fn s(id: cl_device_id, p: u32) -> Queried<String> {
    opencl::device_string(id, p).into()
}

fn u(id: cl_device_id, p: u32) -> Queried<u64> {
    opencl::device_u64(id, p).into()
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Names of cl_khr_external_memory handle types (cl_ext.h).
pub fn memory_handle_name(t: u32) -> String {
    match t {
        0x2060 => "OPAQUE_FD".into(),
        0x2061 => "OPAQUE_WIN32".into(),
        0x2062 => "OPAQUE_WIN32_KMT".into(),
        0x2063 => "D3D11_TEXTURE".into(),
        0x2064 => "D3D11_TEXTURE_KMT".into(),
        0x2065 => "D3D12_HEAP".into(),
        0x2066 => "D3D12_RESOURCE".into(),
        0x2067 => "DMA_BUF".into(),
        0x2069 => "OPAQUE_WIN32_NAME".into(),
        0x2070 => "ANDROID_HARDWARE_BUFFER".into(),
        t => format!("{t:#x}"),
    }
}

/// Names of cl_khr_external_semaphore handle types (cl_ext.h).
pub fn semaphore_handle_name(t: u32) -> String {
    match t {
        0x2055 => "OPAQUE_FD".into(),
        0x2056 => "OPAQUE_WIN32".into(),
        0x2057 => "OPAQUE_WIN32_KMT".into(),
        0x2058 => "SYNC_FD".into(),
        0x2059 => "D3D12_FENCE".into(),
        0x2068 => "OPAQUE_WIN32_NAME".into(),
        t => format!("{t:#x}"),
    }
}

fn handle_list(
    id: cl_device_id,
    param: u32,
    ext: &str,
    has: &dyn Fn(&str) -> bool,
    name: fn(u32) -> String,
) -> Queried<Vec<String>> {
    if !has(ext) {
        return Queried::Absent(format!("no {ext}"));
    }
    opencl::device_bytes(id, param)
        .map(|b| u32s(&b).into_iter().filter(|&t| t != 0).map(name).collect())
        .into()
}

/// PCI location from the KHR query, AMD's topology or NVIDIA's attributes, whichever exists.
fn pci_bus_id(id: cl_device_id, has: &dyn Fn(&str) -> bool) -> (Queried<String>, String) {
    if has("cl_khr_pci_bus_info") {
        let q = opencl::device_bytes(id, 0x410F).and_then(|b| {
            let v = u32s(&b);
            if v.len() >= 4 {
                Ok(format!("{:04x}:{:02x}:{:02x}.{:x}", v[0], v[1], v[2], v[3]))
            } else {
                Err(size_error(b.len()))
            }
        });
        return (q.into(), "CL_DEVICE_PCI_BUS_INFO_KHR".into());
    }
    if has("cl_amd_device_attribute_query") {
        // cl_device_topology_amd: { cl_uint type; char unused[17]; char bus, device, function }
        // with type 1 = PCIe (cl_ext.h). No domain in this query.
        let q = opencl::device_bytes(id, 0x4037).and_then(|b| {
            if b.len() >= 24 && u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) == 1 {
                Ok(format!("0000:{:02x}:{:02x}.{:x}", b[21], b[22], b[23]))
            } else {
                Err(size_error(b.len()))
            }
        });
        return (q.into(), "CL_DEVICE_TOPOLOGY_AMD".into());
    }
    if has("cl_nv_device_attribute_query") {
        let bus = opencl::device_u64(id, 0x4008);
        let slot = opencl::device_u64(id, 0x4009);
        // CL_DEVICE_PCI_DOMAIN_ID_NV is newer than the extension; absent means domain 0.
        let domain = opencl::device_u64(id, 0x400A).unwrap_or(0);
        let q = bus.and_then(|bus| {
            slot.map(|slot| format!("{domain:04x}:{bus:02x}:{:02x}.{:x}", slot >> 3, slot & 7))
        });
        return (q.into(), "CL_DEVICE_PCI_BUS_ID_NV".into());
    }
    (
        Queried::Absent("no PCI query extension".into()),
        String::new(),
    )
}

fn size_error(n: usize) -> ApiError {
    let mut e = opencl::cl_error("clGetDeviceInfo", 0);
    e.name = "UNEXPECTED_SIZE".into();
    e.code = n as i64;
    e
}

fn probe_device(d: &opencl::ClDevice) -> DeviceProbe {
    use cl3::device::*;
    let id = d.id;
    let extensions: Queried<Vec<String>> = opencl::device_string(id, CL_DEVICE_EXTENSIONS)
        .map(|e| e.split_whitespace().map(str::to_string).collect())
        .into();
    let ext_list = match &extensions {
        Queried::Value(v) => v.clone(),
        _ => Vec::new(),
    };
    let has = |e: &str| ext_list.iter().any(|x| x == e);
    let (pci, pci_source) = pci_bus_id(id, &has);
    DeviceProbe {
        label: d.r.label.clone(),
        platform_index: d.r.platform_index,
        device_index: d.r.device_index,
        name: d.name.clone(),
        vendor: s(id, CL_DEVICE_VENDOR),
        device_version: s(id, CL_DEVICE_VERSION),
        driver_version: s(id, CL_DRIVER_VERSION),
        opencl_c_version: s(id, CL_DEVICE_OPENCL_C_VERSION),
        svm: SvmCaps::query(id).into(),
        max_work_group_size: u(id, CL_DEVICE_MAX_WORK_GROUP_SIZE),
        global_mem_bytes: u(id, CL_DEVICE_GLOBAL_MEM_SIZE),
        max_alloc_bytes: u(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE),
        interop_extensions: INTEROP_EXTENSIONS
            .iter()
            .map(|e| (e.to_string(), has(e)))
            .collect(),
        external_memory_import_handle_types: handle_list(
            id,
            0x204F,
            "cl_khr_external_memory",
            &has,
            memory_handle_name,
        ),
        semaphore_types: if has("cl_khr_semaphore") {
            opencl::device_bytes(id, 0x204C)
                .map(|b| {
                    u32s(&b)
                        .into_iter()
                        .map(|t| {
                            if t == 1 {
                                "BINARY".into()
                            } else {
                                format!("{t:#x}")
                            }
                        })
                        .collect()
                })
                .into()
        } else {
            Queried::Absent("no cl_khr_semaphore".into())
        },
        semaphore_import_handle_types: handle_list(
            id,
            0x204D,
            "cl_khr_external_semaphore",
            &has,
            semaphore_handle_name,
        ),
        semaphore_export_handle_types: handle_list(
            id,
            0x204E,
            "cl_khr_external_semaphore",
            &has,
            semaphore_handle_name,
        ),
        uuid: if has("cl_khr_device_uuid") {
            opencl::device_bytes(id, 0x106A)
                .map(|b| uuid_string(&b))
                .into()
        } else {
            Queried::Absent("no cl_khr_device_uuid".into())
        },
        pci_bus_id: pci,
        pci_bus_id_source: pci_source,
        extensions,
        icd_library: None,
        icd_label: None,
        device_type: opencl::device_u64(id, CL_DEVICE_TYPE)
            .ok()
            .map(device_type_name),
    }
}

/// `CL_DEVICE_TYPE`'s bits by name (OpenCL 3.0, table 5): `CPU`, `GPU+ACCELERATOR`.
fn device_type_name(bits: u64) -> String {
    let names = [(2, "CPU"), (4, "GPU"), (8, "ACCELERATOR"), (16, "CUSTOM")];
    let named: Vec<&str> = names
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if named.is_empty() {
        format!("{bits:#x}")
    } else {
        named.join("+")
    }
}

/// The platforms of whichever vendors the loader loads in this process. `stage` hears each
/// call before it is made, so a parent watching a vendor child can name the call it died in.
pub(super) fn probe_opencl(
    stage: &mut dyn FnMut(&str),
    one_vendor: bool,
) -> (String, Vec<PlatformProbe>) {
    stage("clGetPlatformIDs");
    let platforms = match cl3::platform::get_platform_ids() {
        Ok(p) => p,
        Err(code) => {
            let e = opencl::cl_error("clGetPlatformIDs", code);
            let hint = if code == cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED {
                " (no OpenCL ICD loader: install ocl-icd-libopencl1 and an ICD, e.g. pocl-opencl-icd)"
            } else if code == -1001 && one_vendor {
                " (the loader could not load this library, or it has no platform)"
            } else if code == -1001 {
                " (the loader found no ICD: check /etc/OpenCL/vendors or OCL_ICD_VENDORS)"
            } else {
                ""
            };
            return (format!("unsupported: {e}{hint}"), Vec::new());
        }
    };
    stage("clGetDeviceIDs");
    let devices = opencl::enumerate().unwrap_or_default();
    let mut out = Vec::new();
    for (i, &p) in platforms.iter().enumerate() {
        use cl3::platform::*;
        stage("clGetPlatformInfo");
        let ps = |param| -> Queried<String> { opencl::platform_string(p, param).into() };
        let mut platform = PlatformProbe {
            index: i,
            name: ps(CL_PLATFORM_NAME),
            vendor: ps(CL_PLATFORM_VENDOR),
            version: ps(CL_PLATFORM_VERSION),
            devices: Vec::new(),
        };
        for d in devices.iter().filter(|d| d.r.platform_index == i) {
            stage(&format!("clGetDeviceInfo on {}", d.r.label));
            platform.devices.push(probe_device(d));
        }
        out.push(platform);
    }
    ("ok".into(), out)
}
