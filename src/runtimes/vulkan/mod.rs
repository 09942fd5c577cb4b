//! The `vulkan` broker: a third API that exports what OpenCL and the peer can only import. HIP
//! and CUDA import external semaphores and memory but export no semaphore, and no OpenCL we can
//! reach exports one either; Vulkan's VK_KHR_external_semaphore_fd and VK_KHR_external_memory_fd
//! export both as opaque fds, which is how ROCm's hip-tests (`vulkan_interop`) and Khronos's
//! OpenCL-CTS (`test_vulkan`) share them.
//!
//! The loader (libvulkan.so.1) is opened at run time through ash's `loaded` entry: nothing is
//! linked, and a missing loader, ICD, matching device or extension is a refusal with its reason,
//! never a start-up failure. The broker opens the physical device whose deviceUUID is the pair's
//! GPU's, so that all three APIs share one GPU.
//!
//! Every fd the broker hands out is a fresh one (vkGetSemaphoreFdKHR / vkGetMemoryFdKHR per
//! importer): an importer that accepts an fd owns it from then on.

mod survey;

use std::os::fd::{FromRawFd, OwnedFd};

use ash::vk;
use serde::{Deserialize, Serialize};

use crate::model::CaseError;
use crate::runtimes::locate::Attempt;

pub use survey::{DeviceSurvey, Exports, version_string, vk_error};

/// The names the loader is opened under, in order: the soname every distribution ships, then
/// the development symlink.
pub const LOADER_CANDIDATES: [&str; 2] = ["libvulkan.so.1", "libvulkan.so"];

/// The environment variables by which the loader finds ICDs other than the registered ones:
/// what a person reads first when Vulkan sees no device.
pub const DRIVER_ENV: [&str; 3] = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"];

/// The Vulkan version the broker asks for: 1.1 made external memory and semaphore capability
/// queries core; 1.2 made timeline semaphores core. A newer instance is not needed.
const API_VERSION: u32 = vk::make_api_version(0, 1, 2, 0);

/// The driver environment as set, `NAME=value` each, for messages.
pub fn driver_env() -> Vec<String> {
    DRIVER_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
        .collect()
}

fn unsupported(reason: String) -> CaseError {
    CaseError::unsupported(format!("Vulkan broker: {reason}"))
}

/// The loader, and the file it was mapped from.
struct Loader {
    entry: ash::Entry,
    path: String,
}

impl Loader {
    /// Each candidate in order; every one that did not load is kept with dlerror's words.
    fn open() -> Result<Loader, Vec<Attempt>> {
        let mut tried = Vec::new();
        for c in LOADER_CANDIDATES {
            // SAFETY: loading the Vulkan loader runs its initialisers, which is the point; no
            // Vulkan call outlives `entry`, which the broker holds until its objects are gone.
            match unsafe { ash::Entry::load_from(c) } {
                Ok(entry) => {
                    let path = crate::runtimes::locate::mapped_file("vulkan").unwrap_or(c.into());
                    return Ok(Loader { entry, path });
                }
                Err(e) => tried.push(Attempt {
                    candidate: c.into(),
                    error: match &e {
                        ash::LoadingError::LibraryLoadFailure(l) => {
                            std::error::Error::source(l).map_or(l.to_string(), |s| s.to_string())
                        }
                        other => other.to_string(),
                    },
                }),
            }
        }
        Err(tried)
    }
}

/// "libvulkan.so.1 not found (tried libvulkan.so.1: <why>; libvulkan.so: <why>)".
fn not_found(tried: &[Attempt]) -> String {
    let each: Vec<String> = tried
        .iter()
        .map(|a| format!("{}: {}", a.candidate, a.error))
        .collect();
    format!(
        "no Vulkan loader: {} not found (tried {})",
        LOADER_CANDIDATES[0],
        each.join("; ")
    )
}

/// An instance of at least Vulkan 1.1, destroyed on drop.
struct Instance {
    raw: ash::Instance,
    version: u32,
}

impl Instance {
    fn create(entry: &ash::Entry) -> Result<Instance, String> {
        // SAFETY: a loader entry point that needs no instance.
        let version = match unsafe { entry.try_enumerate_instance_version() } {
            Ok(v) => v.unwrap_or(vk::API_VERSION_1_0),
            Err(e) => return Err(vk_error("vkEnumerateInstanceVersion", e)),
        };
        if version < vk::API_VERSION_1_1 {
            return Err(format!(
                "the loader is Vulkan {}: external memory and semaphore queries need 1.1",
                version_string(version)
            ));
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"clhip")
            .api_version(API_VERSION.min(version));
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: a valid create info whose pointers live for the call.
        let raw = unsafe { entry.create_instance(&info, None) }
            .map_err(|e| vk_error("vkCreateInstance", e))?;
        Ok(Instance { raw, version })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device made from this instance is destroyed first (the broker's field
        // order), and nothing else holds it.
        unsafe { self.raw.destroy_instance(None) };
    }
}

/// What the probe reports of Vulkan: the loader, the instance, and every physical device with
/// what the broker needs of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VulkanStatus {
    /// `ok`, or `unsupported: <why>`.
    pub status: String,
    /// The loader file that was mapped, if one loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader: Option<String>,
    /// Every loader name that did not load, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<Attempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_version: Option<String>,
    /// `VK_DRIVER_FILES=...` and its kin, as set in the probe's environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_env: Vec<String>,
    #[serde(default)]
    pub devices: Vec<DeviceSurvey>,
}

/// Looks at everything Vulkan offers without creating a device: never fails, and what cannot be
/// found is the status.
pub fn probe() -> VulkanStatus {
    let mut out = VulkanStatus {
        driver_env: driver_env(),
        ..VulkanStatus::default()
    };
    let loader = match Loader::open() {
        Ok(l) => l,
        Err(tried) => {
            // Each name's dlerror follows on a line of its own.
            let names: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
            out.status = format!(
                "unsupported: no Vulkan loader: {} not found (tried {})",
                LOADER_CANDIDATES[0],
                names.join(", ")
            );
            out.tried = tried;
            return out;
        }
    };
    out.loader = Some(loader.path.clone());
    let instance = match Instance::create(&loader.entry) {
        Ok(i) => i,
        Err(why) => {
            out.status = format!("unsupported: {why}");
            return out;
        }
    };
    out.instance_version = Some(version_string(instance.version));
    match survey::physical_devices(&instance.raw) {
        Ok(devices) => {
            out.status = if devices.is_empty() {
                format!("unsupported: {}", no_device(&loader.path))
            } else {
                "ok".into()
            };
            out.devices = devices.into_iter().map(|(_, s)| s).collect();
        }
        Err(why) => out.status = format!("unsupported: {why}"),
    }
    out
}

fn no_device(loader: &str) -> String {
    let env = driver_env();
    format!(
        "the loader ({loader}) found no physical device: no Vulkan driver (ICD) answered ({})",
        if env.is_empty() {
            "none of VK_DRIVER_FILES, VK_ICD_FILENAMES, VK_ADD_DRIVER_FILES is set; the \
             registered ICDs are in /usr/share/vulkan/icd.d and /etc/vulkan/icd.d"
                .to_string()
        } else {
            env.join(", ")
        }
    )
}

/// The kind of semaphore the broker makes. OpenCL's cl_khr_semaphore has binary semaphores
/// only, so the handover uses binary ones; timeline semaphores are made where the device has
/// them, for the peers that import them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemaphoreKind {
    Binary,
    Timeline,
}

/// A semaphore created exportable as an opaque fd. Destroyed with [`Broker::destroy_semaphore`].
#[derive(Debug)]
pub struct ExportedSemaphore {
    raw: vk::Semaphore,
    pub kind: SemaphoreKind,
}

/// A buffer's device memory allocated exportable as an opaque fd. Freed with
/// [`Broker::free_memory`].
#[derive(Debug)]
pub struct ExportedMemory {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    /// Bytes of the allocation, which is what an importer must be told (cuImportExternalMemory
    /// and hipImportExternalMemory take the whole allocation's size).
    pub size: u64,
    /// Allocated with VkMemoryDedicatedAllocateInfo because the driver asked for it: an
    /// importer must then say so (CUDA_EXTERNAL_MEMORY_DEDICATED, hipExternalMemoryDedicated).
    pub dedicated: bool,
    /// The memory type's index and flags, for messages.
    pub memory_type: String,
    /// The memory type it was allocated in: an opaque fd is imported into the very same type.
    pub type_index: u32,
}

/// A Vulkan device on one GPU, opened with the two external-fd extensions, that makes
/// exportable semaphores and memory. Field order is drop order: the device goes before its
/// instance, and the loader last.
pub struct Broker {
    device: ash::Device,
    /// VK_KHR_external_semaphore_fd, where the device exports semaphores.
    semaphore_fd: Option<ash::khr::external_semaphore_fd::Device>,
    /// VK_KHR_external_memory_fd, where the device exports buffer memory.
    memory_fd: Option<ash::khr::external_memory_fd::Device>,
    queue: vk::Queue,
    memory_types: vk::PhysicalDeviceMemoryProperties,
    pub survey: DeviceSurvey,
    /// The loader's file, for messages.
    pub loader: String,
    _instance: Instance,
    _loader: ash::Entry,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("device", &self.survey.name)
            .field("uuid", &self.survey.uuid)
            .field("loader", &self.loader)
            .finish()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // SAFETY: every semaphore and allocation was destroyed by its owner (the case's release);
        // the queue idles first so no submission of ours still runs.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
        }
    }
}

impl Broker {
    /// The Vulkan device whose deviceUUID is `uuid` (8-4-4-4-12 hex, as the probe prints every
    /// API's), opened with VK_KHR_external_semaphore_fd, VK_KHR_external_memory_fd and timeline
    /// semaphores, each where it has them: a device that exports only one of semaphores and
    /// memory still serves that one, and refuses the other when asked. Every reason it cannot
    /// be opened is `Unsupported`.
    pub fn open(uuid: &str) -> Result<Broker, CaseError> {
        let loader = Loader::open().map_err(|tried| unsupported(not_found(&tried)))?;
        let instance = Instance::create(&loader.entry).map_err(unsupported)?;
        let devices = survey::physical_devices(&instance.raw).map_err(unsupported)?;
        if devices.is_empty() {
            return Err(unsupported(no_device(&loader.path)));
        }
        let want = uuid.to_ascii_lowercase();
        let Some((physical, survey)) = devices.iter().find(|(_, s)| s.uuid == want).cloned() else {
            let seen: Vec<String> = devices
                .iter()
                .map(|(_, s)| format!("{} ({})", s.name, s.uuid))
                .collect();
            return Err(unsupported(format!(
                "no Vulkan device has the GPU's UUID {uuid} (Vulkan sees {})",
                seen.join(", ")
            )));
        };
        if let Some(why) = survey.refusal() {
            return Err(unsupported(format!("{} ({uuid}): {why}", survey.name)));
        }
        let raw = &instance.raw;
        // SAFETY: a physical device of this instance.
        let families = unsafe { raw.get_physical_device_queue_family_properties(physical) };
        // Any queue can signal a semaphore; one that also copies is a natural choice.
        let family = families
            .iter()
            .position(|f| f.queue_count > 0 && f.queue_flags.contains(vk::QueueFlags::TRANSFER))
            .or_else(|| families.iter().position(|f| f.queue_count > 0))
            .ok_or_else(|| unsupported(format!("{} has no queue family", survey.name)))?
            as u32;
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let (semaphores, memory) = (
            survey.semaphore_refusal().is_none(),
            survey.memory_refusal().is_none(),
        );
        let mut extensions = Vec::new();
        if semaphores {
            extensions.push(ash::khr::external_semaphore_fd::NAME.as_ptr());
        }
        if memory {
            extensions.push(ash::khr::external_memory_fd::NAME.as_ptr());
        }
        if survey.timeline_semaphores && survey.api_version_raw < vk::API_VERSION_1_2 {
            extensions.push(ash::khr::timeline_semaphore::NAME.as_ptr());
        }
        let mut timeline =
            vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&extensions);
        if survey.timeline_semaphores {
            info = info.push_next(&mut timeline);
        }
        // SAFETY: a valid create info whose pointers live for the call; the extensions were
        // checked present by the survey.
        let device = unsafe { raw.create_device(physical, &info, None) }.map_err(|e| {
            unsupported(format!(
                "{}: {}",
                survey.name,
                vk_error("vkCreateDevice", e)
            ))
        })?;
        // SAFETY: a queue family and index the device was created with.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: a physical device of this instance.
        let memory_types = unsafe { raw.get_physical_device_memory_properties(physical) };
        Ok(Broker {
            semaphore_fd: semaphores
                .then(|| ash::khr::external_semaphore_fd::Device::new(raw, &device)),
            memory_fd: memory.then(|| ash::khr::external_memory_fd::Device::new(raw, &device)),
            device,
            queue,
            memory_types,
            survey,
            loader: loader.path,
            _instance: instance,
            _loader: loader.entry,
        })
    }

    /// A semaphore exportable as an opaque fd; a timeline one starts at 0.
    pub fn semaphore(&self, kind: SemaphoreKind) -> Result<ExportedSemaphore, CaseError> {
        self.exporter(&self.semaphore_fd, self.survey.semaphore_refusal())?;
        if kind == SemaphoreKind::Timeline && !self.survey.timeline_semaphores {
            return Err(unsupported(format!(
                "{} has no timeline semaphores",
                self.survey.name
            )));
        }
        let mut export = vk::ExportSemaphoreCreateInfo::default()
            .handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let mut timeline = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut export);
        if kind == SemaphoreKind::Timeline {
            info = info.push_next(&mut timeline);
        }
        // SAFETY: a valid create info; the device lives as long as `self`.
        let raw = unsafe { self.device.create_semaphore(&info, None) };
        crate::calls::record("vkCreateSemaphore");
        let raw =
            raw.map_err(|e| unsupported(vk_error("vkCreateSemaphore(exportable, opaque fd)", e)))?;
        Ok(ExportedSemaphore { raw, kind })
    }

    /// A fresh opaque fd of `sem`'s payload, for one importer.
    pub fn semaphore_fd(&self, sem: &ExportedSemaphore) -> Result<OwnedFd, CaseError> {
        let info = vk::SemaphoreGetFdInfoKHR::default()
            .semaphore(sem.raw)
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let ext = self.exporter(&self.semaphore_fd, self.survey.semaphore_refusal())?;
        // SAFETY: a semaphore of this device, created exportable as an opaque fd.
        let fd = unsafe { ext.get_semaphore_fd(&info) };
        crate::calls::record("vkGetSemaphoreFdKHR");
        let fd = fd.map_err(|e| unsupported(vk_error("vkGetSemaphoreFdKHR", e)))?;
        owned(fd, "vkGetSemaphoreFdKHR")
    }

    /// Signals `sem` from the broker's own queue, with nothing before it: a semaphore that is
    /// signalled at once, whatever OpenCL and the peer are doing.
    pub fn signal_now(&self, sem: &ExportedSemaphore) -> Result<(), CaseError> {
        let signal = [sem.raw];
        let submit = [vk::SubmitInfo::default().signal_semaphores(&signal)];
        // SAFETY: the queue is used from this thread only; the semaphore is a binary one of
        // this device with no signal pending.
        unsafe {
            self.device
                .queue_submit(self.queue, &submit, vk::Fence::null())
        }
        .map_err(|e| unsupported(vk_error("vkQueueSubmit(signal)", e)))
    }

    pub fn destroy_semaphore(&self, sem: ExportedSemaphore) {
        // SAFETY: no submission of ours waits on or signals it any more (the queue idles
        // first); importers hold their own references to its payload.
        unsafe {
            let _ = self.device.queue_wait_idle(self.queue);
            crate::calls::record("vkQueueWaitIdle");
            self.device.destroy_semaphore(sem.raw, None);
            crate::calls::record("vkDestroySemaphore");
        }
    }

    /// A storage buffer of `bytes` over memory allocated exportable as an opaque fd: device-local
    /// memory where the buffer may live there, a dedicated allocation where the driver asks for
    /// one.
    pub fn memory(&self, bytes: u64) -> Result<ExportedMemory, CaseError> {
        self.exporter(&self.memory_fd, self.survey.memory_refusal())?;
        let handle = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default()
            .size(bytes.max(1))
            .usage(survey::BUFFER_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        let d = &self.device;
        // SAFETY: a valid create info; the device lives as long as `self`.
        let buffer = unsafe { d.create_buffer(&info, None) };
        crate::calls::record("vkCreateBuffer");
        let buffer =
            buffer.map_err(|e| unsupported(vk_error("vkCreateBuffer(external, opaque fd)", e)))?;
        let made = self.bind_exportable(buffer);
        if made.is_err() {
            // SAFETY: the buffer made above, bound to nothing that survives.
            unsafe { d.destroy_buffer(buffer, None) };
        }
        made
    }

    fn bind_exportable(&self, buffer: vk::Buffer) -> Result<ExportedMemory, CaseError> {
        let d = &self.device;
        let mut dedicated_req = vk::MemoryDedicatedRequirements::default();
        let mut req = vk::MemoryRequirements2::default().push_next(&mut dedicated_req);
        let query = vk::BufferMemoryRequirementsInfo2::default().buffer(buffer);
        // SAFETY: a buffer of this device; the out-structure chain lives for the call.
        unsafe { d.get_buffer_memory_requirements2(&query, &mut req) };
        crate::calls::record("vkGetBufferMemoryRequirements2");
        let needs = req.memory_requirements;
        let dedicated = dedicated_req.requires_dedicated_allocation == vk::TRUE
            || dedicated_req.prefers_dedicated_allocation == vk::TRUE
            || self.survey.exports.memory_dedicated_only;
        let type_index = survey::memory_type(&self.memory_types, needs.memory_type_bits)
            .ok_or_else(|| {
                unsupported(format!(
                    "no memory type of {} takes the buffer (allowed types {:#b})",
                    self.survey.name, needs.memory_type_bits
                ))
            })?;
        let flags = self.memory_types.memory_types[type_index as usize].property_flags;
        let mut export = vk::ExportMemoryAllocateInfo::default()
            .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let mut dedicated_info = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let mut alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(needs.size)
            .memory_type_index(type_index)
            .push_next(&mut export);
        if dedicated {
            alloc = alloc.push_next(&mut dedicated_info);
        }
        // SAFETY: a valid allocate info whose chain lives for the call.
        let memory = unsafe { d.allocate_memory(&alloc, None) };
        crate::calls::record("vkAllocateMemory");
        let memory = memory.map_err(|e| {
            unsupported(format!(
                "{} of {} bytes (type {type_index}: {flags:?}{})",
                vk_error("vkAllocateMemory(exportable, opaque fd)", e),
                needs.size,
                if dedicated { ", dedicated" } else { "" }
            ))
        })?;
        // SAFETY: fresh memory of a type the buffer allows, at offset 0.
        let bound = unsafe { d.bind_buffer_memory(buffer, memory, 0) };
        crate::calls::record("vkBindBufferMemory");
        if let Err(e) = bound {
            // SAFETY: the memory allocated above, bound to nothing.
            unsafe { d.free_memory(memory, None) };
            return Err(unsupported(vk_error("vkBindBufferMemory", e)));
        }
        Ok(ExportedMemory {
            buffer,
            memory,
            size: needs.size,
            dedicated,
            memory_type: format!("type {type_index}: {flags:?}"),
            type_index,
        })
    }

    /// A fresh opaque fd of `mem`, for one importer.
    pub fn memory_fd(&self, mem: &ExportedMemory) -> Result<OwnedFd, CaseError> {
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(mem.memory)
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let ext = self.exporter(&self.memory_fd, self.survey.memory_refusal())?;
        // SAFETY: memory of this device, allocated exportable as an opaque fd.
        let fd = unsafe { ext.get_memory_fd(&info) };
        crate::calls::record("vkGetMemoryFdKHR");
        let fd = fd.map_err(|e| unsupported(vk_error("vkGetMemoryFdKHR", e)))?;
        owned(fd, "vkGetMemoryFdKHR")
    }

    /// The extension's functions, or why this device has none.
    fn exporter<'a, T>(
        &self,
        ext: &'a Option<T>,
        refusal: Option<String>,
    ) -> Result<&'a T, CaseError> {
        ext.as_ref().ok_or_else(|| {
            unsupported(format!(
                "{} ({}): {}",
                self.survey.name,
                self.survey.uuid,
                refusal.unwrap_or_else(|| "the extension was not enabled".into())
            ))
        })
    }

    pub fn free_memory(&self, mem: ExportedMemory) {
        // SAFETY: the broker's own buffer and memory, freed once; importers hold their own
        // references to the allocation.
        unsafe {
            self.device.destroy_buffer(mem.buffer, None);
            crate::calls::record("vkDestroyBuffer");
            self.device.free_memory(mem.memory, None);
            crate::calls::record("vkFreeMemory");
        }
    }
}

fn owned(fd: i32, call: &str) -> Result<OwnedFd, CaseError> {
    if fd < 0 {
        return Err(unsupported(format!("{call} gave fd {fd}")));
    }
    // SAFETY: a fresh fd the driver handed over, owned by the caller from now on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests;
