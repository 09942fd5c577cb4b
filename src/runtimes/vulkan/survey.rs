//! What a physical device offers the broker, read without creating a device: its UUID, the two
//! external-fd extensions, timeline semaphores, and whether semaphores and buffer memory can be
//! exported as opaque fds at all. The probe shows it; the broker refuses a device by it.
//! Also the two ways every Vulkan message words a result and a version ([`vk_error`],
//! [`version_string`]), which the broker above shares.

use std::ffi::CStr;

use ash::vk;
use serde::{Deserialize, Serialize};

use crate::runtimes::text::uuid_string;

/// A `VkResult` error as `call returned VK_ERROR_... (code)`, the form every other API's refusal
/// takes in clhip's reports.
pub fn vk_error(call: &str, r: vk::Result) -> String {
    format!("{call} returned VK_{r:?} ({})", r.as_raw())
}

/// `1.3.239` from a packed Vulkan version.
pub fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

/// What the broker's buffers are for: kernels of both importers read and write them, and the
/// copy engines may move them.
pub(super) const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// Which opaque-fd exports the device allows (vkGetPhysicalDeviceExternalSemaphoreProperties,
/// vkGetPhysicalDeviceExternalBufferProperties).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exports {
    pub binary_semaphore: bool,
    pub timeline_semaphore: bool,
    pub memory: bool,
    /// Buffer memory exports only as a dedicated allocation.
    pub memory_dedicated_only: bool,
}

/// One physical device as the probe lists it and the broker judges it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceSurvey {
    /// Its place in vkEnumeratePhysicalDevices.
    pub index: usize,
    pub name: String,
    /// deviceUUID (VkPhysicalDeviceIDProperties), 8-4-4-4-12 hex: what pairs it with the other
    /// APIs' view of the same GPU.
    pub uuid: String,
    pub device_type: String,
    pub api_version: String,
    pub api_version_raw: u32,
    /// driverName and driverInfo (Vulkan 1.2), else the raw driverVersion.
    pub driver: String,
    pub semaphore_fd: bool,
    pub memory_fd: bool,
    pub timeline_semaphores: bool,
    pub exports: Exports,
}

impl DeviceSurvey {
    /// Why the broker cannot use this device at all: neither semaphores nor memory (the
    /// reasons of both), or a device older than Vulkan 1.1; `None` if it can use one of them.
    pub fn refusal(&self) -> Option<String> {
        if self.api_version_raw < vk::API_VERSION_1_1 {
            return Some(format!(
                "a Vulkan {} device: external memory and semaphores need 1.1",
                self.api_version
            ));
        }
        match (self.semaphore_refusal(), self.memory_refusal()) {
            (Some(s), Some(m)) => Some(format!("{s}, {m}")),
            _ => None,
        }
    }

    /// Why the broker cannot export a binary semaphore as an opaque fd here, if it cannot.
    pub fn semaphore_refusal(&self) -> Option<String> {
        if !self.semaphore_fd {
            return Some(format!(
                "lacks {}",
                ash::khr::external_semaphore_fd::NAME.to_string_lossy()
            ));
        }
        (!self.exports.binary_semaphore).then(|| {
            "exports no binary semaphore as an opaque fd \
             (vkGetPhysicalDeviceExternalSemaphoreProperties)"
                .into()
        })
    }

    /// Why the broker cannot export storage-buffer memory as an opaque fd here, if it cannot.
    pub fn memory_refusal(&self) -> Option<String> {
        if !self.memory_fd {
            return Some(format!(
                "lacks {}",
                ash::khr::external_memory_fd::NAME.to_string_lossy()
            ));
        }
        (!self.exports.memory).then(|| {
            "exports no storage-buffer memory as an opaque fd \
             (vkGetPhysicalDeviceExternalBufferProperties)"
                .into()
        })
    }

    /// One line of what it exports, for the probe.
    pub fn exports_line(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let e = &self.exports;
        format!(
            "binary semaphore {}, timeline semaphore {}, buffer memory {}{}",
            yes(e.binary_semaphore),
            yes(e.timeline_semaphore),
            yes(e.memory),
            if e.memory_dedicated_only {
                " (dedicated allocations only)"
            } else {
                ""
            }
        )
    }
}

/// Every physical device of `instance` with its survey.
pub(super) fn physical_devices(
    instance: &ash::Instance,
) -> Result<Vec<(vk::PhysicalDevice, DeviceSurvey)>, String> {
    // SAFETY: a live instance.
    let devices = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| vk_error("vkEnumeratePhysicalDevices", e))?;
    devices
        .into_iter()
        .enumerate()
        .map(|(index, pd)| survey(instance, pd, index).map(|s| (pd, s)))
        .collect()
}

fn has(extensions: &[vk::ExtensionProperties], name: &CStr) -> bool {
    extensions
        .iter()
        .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
}

fn survey(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    index: usize,
) -> Result<DeviceSurvey, String> {
    // SAFETY: a physical device of this instance; the out-structures live for each call.
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let name = props
        .device_name_as_c_str()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "<unnamed>".into());
    // SAFETY: as above.
    let extensions =
        unsafe { instance.enumerate_device_extension_properties(pd) }.map_err(|e| {
            format!(
                "{name}: {}",
                vk_error("vkEnumerateDeviceExtensionProperties", e)
            )
        })?;
    let mut s = DeviceSurvey {
        index,
        name,
        device_type: format!("{:?}", props.device_type).to_ascii_lowercase(),
        api_version: version_string(props.api_version),
        api_version_raw: props.api_version,
        driver: format!("driverVersion {:#x}", props.driver_version),
        semaphore_fd: has(&extensions, ash::khr::external_semaphore_fd::NAME),
        memory_fd: has(&extensions, ash::khr::external_memory_fd::NAME),
        ..DeviceSurvey::default()
    };
    if props.api_version < vk::API_VERSION_1_1 {
        // Neither the UUID nor the export queries exist for a 1.0 device.
        return Ok(s);
    }
    let driver_props = props.api_version >= vk::API_VERSION_1_2
        || has(&extensions, ash::khr::driver_properties::NAME);
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    if driver_props {
        props2 = props2.push_next(&mut driver);
    }
    // SAFETY: as above; the chain holds only structures this device's version defines.
    unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
    s.uuid = uuid_string(&id.device_uuid);
    if driver_props {
        let text = |c: Result<&CStr, _>| c.map(|c| c.to_string_lossy().into_owned());
        if let (Ok(n), Ok(i)) = (
            text(driver.driver_name_as_c_str()),
            text(driver.driver_info_as_c_str()),
        ) {
            s.driver = format!("{n} {i}").trim().to_string();
        }
    }
    let timeline_known = props.api_version >= vk::API_VERSION_1_2
        || has(&extensions, ash::khr::timeline_semaphore::NAME);
    if timeline_known {
        let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
        // SAFETY: as above.
        unsafe { instance.get_physical_device_features2(pd, &mut features) };
        s.timeline_semaphores = timeline.timeline_semaphore == vk::TRUE;
    }
    s.exports = exports(instance, pd, s.timeline_semaphores);
    Ok(s)
}

/// The opaque-fd export capabilities of a Vulkan 1.1 device.
fn exports(instance: &ash::Instance, pd: vk::PhysicalDevice, timeline: bool) -> Exports {
    let opaque = vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;
    let exportable = |kind: vk::SemaphoreType| {
        let mut ty = vk::SemaphoreTypeCreateInfo::default().semaphore_type(kind);
        let mut info = vk::PhysicalDeviceExternalSemaphoreInfo::default().handle_type(opaque);
        if kind == vk::SemaphoreType::TIMELINE {
            info = info.push_next(&mut ty);
        }
        let mut out = vk::ExternalSemaphoreProperties::default();
        // SAFETY: a 1.1 device; the structures live for the call.
        unsafe { instance.get_physical_device_external_semaphore_properties(pd, &info, &mut out) };
        out.external_semaphore_features
            .contains(vk::ExternalSemaphoreFeatureFlags::EXPORTABLE)
    };
    let info = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(BUFFER_USAGE)
        .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut buffer = vk::ExternalBufferProperties::default();
    // SAFETY: as above.
    unsafe { instance.get_physical_device_external_buffer_properties(pd, &info, &mut buffer) };
    let features = buffer.external_memory_properties.external_memory_features;
    Exports {
        binary_semaphore: exportable(vk::SemaphoreType::BINARY),
        timeline_semaphore: timeline && exportable(vk::SemaphoreType::TIMELINE),
        memory: features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE),
        memory_dedicated_only: features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY),
    }
}

/// The memory type for an exportable buffer among those `allowed`: device-local where one is
/// allowed (the GPU's own memory, where the importers' kernels run fastest), else the first.
pub(super) fn memory_type(props: &vk::PhysicalDeviceMemoryProperties, allowed: u32) -> Option<u32> {
    let types = &props.memory_types[..props.memory_type_count as usize];
    let ok = |i: usize| allowed & (1 << i) != 0;
    let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    (0..types.len())
        .find(|&i| ok(i) && types[i].property_flags.contains(local))
        .or_else(|| (0..types.len()).find(|&i| ok(i)))
        .map(|i| i as u32)
}
