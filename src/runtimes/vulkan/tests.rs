//! The broker without a loader (CI), and with one: the device tests need a Vulkan ICD, any ICD
//! (Mesa's lavapipe on a CPU does), and are marked ignored where build.rs found none, unless
//! `CLHIP_REQUIRE_VULKAN=1`; an ICD none of whose devices the broker can use fails them. Each
//! export is imported back into the same Vulkan device and shown to carry its payload: a
//! semaphore's signal reaches the import's wait, and bytes written through the exported memory
//! are read through the import.

use std::os::fd::{AsRawFd, IntoRawFd};
use std::time::Duration;

use ash::vk;

use super::*;

/// The first device a Vulkan ICD offers that the broker can use, opened.
fn broker(test: &str) -> Broker {
    broker_for(test, DeviceSurvey::refusal)
}

/// As [`broker`], for a device that `refusal` does not refuse.
fn broker_for(test: &str, refusal: fn(&DeviceSurvey) -> Option<String>) -> Broker {
    let status = probe();
    let usable = status.devices.iter().find(|d| refusal(d).is_none());
    let Some(device) = usable else {
        panic!(
            "{test}: a Vulkan ICD was found when this was built, but no device the broker can \
             use ({}; devices: {:?})",
            status.status,
            status
                .devices
                .iter()
                .map(|d| format!("{}: {:?}", d.name, refusal(d)))
                .collect::<Vec<_>>()
        );
    };
    eprintln!("{test}: Vulkan device {device:#?}");
    match Broker::open(&device.uuid) {
        Ok(b) => b,
        Err(e) => panic!("{test}: the probe found {} usable, but: {e:?}", device.name),
    }
}

/// A broker for the semaphore tests. On a device that exports memory but no semaphore
/// (lavapipe 22.3), what such a device must do is checked instead: refuse a semaphore with its
/// reason and UUID; `None` then, the test's check done.
fn semaphore_broker(test: &str) -> Option<Broker> {
    let b = broker_for(test, DeviceSurvey::memory_refusal);
    let Some(why) = b.survey.semaphore_refusal() else {
        return Some(b);
    };
    let r = reason(b.semaphore(SemaphoreKind::Binary).unwrap_err());
    assert!(
        r.ends_with(&why) && r.contains(&b.survey.uuid),
        "{test}: {r}"
    );
    None
}

fn reason(e: CaseError) -> String {
    match e {
        CaseError::Unsupported {
            reason,
            error: None,
        } => reason,
        other => panic!("expected unsupported, got {other:?}"),
    }
}

/// Without a loader (CI) the broker and the probe say so, with every name tried and dlerror's
/// words, and nothing panics. Where a loader is installed this is not testable.
#[test]
#[cfg_attr(
    clhip_vulkan_loader,
    ignore = "a Vulkan loader is installed: its absence cannot be tested here"
)]
fn absent_loader_is_unsupported_with_what_was_tried() {
    assert!(
        Loader::open().is_err(),
        "build.rs found no Vulkan loader, but one opens: rebuild"
    );
    let r = reason(Broker::open("00000000-0000-0000-0000-000000000000").unwrap_err());
    assert!(
        r.starts_with(
            "Vulkan broker: no Vulkan loader: libvulkan.so.1 not found (tried libvulkan.so.1: "
        ),
        "{r}"
    );
    assert!(r.contains("; libvulkan.so: "), "{r}");
    let status = probe();
    assert!(
        status
            .status
            .starts_with("unsupported: no Vulkan loader: libvulkan.so.1 not found"),
        "{}",
        status.status
    );
    assert_eq!(status.tried.len(), LOADER_CANDIDATES.len());
    assert!(status.loader.is_none() && status.devices.is_empty());
}

#[test]
fn a_device_lacking_what_the_broker_needs_is_refused_naming_all_of_it() {
    let mut d = DeviceSurvey {
        name: "old".into(),
        api_version: "1.0.0".into(),
        api_version_raw: vk::API_VERSION_1_0,
        ..DeviceSurvey::default()
    };
    assert_eq!(
        d.refusal().as_deref(),
        Some("a Vulkan 1.0.0 device: external memory and semaphores need 1.1")
    );
    d.api_version_raw = vk::API_VERSION_1_3;
    assert_eq!(
        d.refusal().as_deref(),
        Some("lacks VK_KHR_external_semaphore_fd, lacks VK_KHR_external_memory_fd")
    );
    d.semaphore_fd = true;
    d.memory_fd = true;
    let both = d.refusal().unwrap();
    assert!(
        both.contains("exports no binary semaphore as an opaque fd"),
        "{both}"
    );
    assert!(both.contains("exports no storage-buffer memory"), "{both}");
    // One of the two is enough to open the device; the other is refused when asked for.
    d.exports.memory = true;
    assert_eq!(d.refusal(), None);
    assert_eq!(d.memory_refusal(), None);
    assert!(d.semaphore_refusal().is_some());
    d.exports.binary_semaphore = true;
    assert_eq!(d.semaphore_refusal(), None);
    assert_eq!(
        d.exports_line(),
        "binary semaphore yes, timeline semaphore no, buffer memory yes"
    );
}

#[test]
fn exportable_memory_prefers_a_device_local_type_it_is_allowed() {
    let mut props = vk::PhysicalDeviceMemoryProperties {
        memory_type_count: 3,
        ..Default::default()
    };
    props.memory_types[0].property_flags = vk::MemoryPropertyFlags::HOST_VISIBLE;
    props.memory_types[1].property_flags = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    props.memory_types[2].property_flags = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    assert_eq!(survey::memory_type(&props, 0b111), Some(1));
    assert_eq!(survey::memory_type(&props, 0b100), Some(2));
    assert_eq!(survey::memory_type(&props, 0b001), Some(0));
    // A bit past the device's types allows nothing.
    assert_eq!(survey::memory_type(&props, 0b1000), None);
}

#[test]
fn errors_read_as_the_other_apis_refusals() {
    assert_eq!(
        vk_error("vkCreateDevice", vk::Result::ERROR_EXTENSION_NOT_PRESENT),
        "vkCreateDevice returned VK_ERROR_EXTENSION_NOT_PRESENT (-7)"
    );
    assert_eq!(
        version_string(vk::make_api_version(0, 1, 3, 239)),
        "1.3.239"
    );
}

/// A device UUID no Vulkan device has is refused naming what Vulkan does see.
#[test]
#[cfg_attr(
    not(clhip_test_vulkan),
    ignore = "needs a Vulkan ICD; none was found when this was built"
)]
fn vulkan_device_of_another_uuid_is_refused_listing_the_devices_seen() {
    let b = broker("vulkan_device_of_another_uuid_is_refused_listing_the_devices_seen");
    let r = reason(Broker::open("ffffffff-ffff-ffff-ffff-ffffffffffff").unwrap_err());
    assert!(
        r.starts_with(
            "Vulkan broker: no Vulkan device has the GPU's UUID ffffffff-ffff-ffff-ffff-ffffffffffff (Vulkan sees "
        ),
        "{r}"
    );
    assert!(r.contains(&b.survey.uuid), "{r}");
}

/// Runs `submit` on the broker's queue and waits up to 5 s for `fence`.
fn submit_and_wait(b: &Broker, submit: &[vk::SubmitInfo<'_>], what: &str) {
    let d = &b.device;
    // SAFETY: test-only: a fence of this device, used once; the queue is used from this thread.
    unsafe {
        let fence = d
            .create_fence(&vk::FenceCreateInfo::default(), None)
            .unwrap();
        d.queue_submit(b.queue, submit, fence).unwrap();
        let waited = d.wait_for_fences(&[fence], true, Duration::from_secs(5).as_nanos() as u64);
        d.destroy_fence(fence, None);
        assert_eq!(waited, Ok(()), "{what}");
    }
}

/// A semaphore imported from `fd` (which the import takes), binary or timeline.
fn import_semaphore(b: &Broker, fd: OwnedFd, kind: SemaphoreKind) -> vk::Semaphore {
    let mut ty = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    let mut info = vk::SemaphoreCreateInfo::default();
    if kind == SemaphoreKind::Timeline {
        info = info.push_next(&mut ty);
    }
    // SAFETY: test-only: a fresh semaphore, then the import of an fd the broker exported;
    // Vulkan owns the fd once the import succeeds.
    unsafe {
        let sem = b.device.create_semaphore(&info, None).unwrap();
        let import = vk::ImportSemaphoreFdInfoKHR::default()
            .semaphore(sem)
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD)
            .fd(fd.as_raw_fd());
        b.semaphore_fd
            .as_ref()
            .unwrap()
            .import_semaphore_fd(&import)
            .unwrap();
        let _ = fd.into_raw_fd();
        sem
    }
}

#[test]
#[cfg_attr(
    not(clhip_test_vulkan),
    ignore = "needs a Vulkan ICD; none was found when this was built"
)]
fn vulkan_binary_semaphore_fd_carries_the_signal_to_its_import() {
    let Some(b) = semaphore_broker("vulkan_binary_semaphore_fd_carries_the_signal_to_its_import")
    else {
        return;
    };
    let sem = b.semaphore(SemaphoreKind::Binary).unwrap();
    let (one, two) = (b.semaphore_fd(&sem).unwrap(), b.semaphore_fd(&sem).unwrap());
    // One fd per importer: two distinct open files.
    assert_ne!(one.as_raw_fd(), two.as_raw_fd());
    assert!(nix::sys::stat::fstat(&two).is_ok());
    let imported = import_semaphore(&b, one, SemaphoreKind::Binary);
    // The broker signals its semaphore; a wait on the import must then complete (a fence after
    // it signals), which it could not if the fd carried anything but that payload.
    b.signal_now(&sem).unwrap();
    let waits = [imported];
    let stages = [vk::PipelineStageFlags::ALL_COMMANDS];
    let submit = [vk::SubmitInfo::default()
        .wait_semaphores(&waits)
        .wait_dst_stage_mask(&stages)];
    submit_and_wait(&b, &submit, "a wait on the import of a signalled semaphore");
    // SAFETY: test-only: the import is idle (the fence above) and used nowhere else.
    unsafe { b.device.destroy_semaphore(imported, None) };
    b.destroy_semaphore(sem);
}

#[test]
#[cfg_attr(
    not(clhip_test_vulkan),
    ignore = "needs a Vulkan ICD; none was found when this was built"
)]
fn vulkan_timeline_semaphore_fd_carries_its_value_where_the_device_has_them() {
    let Some(b) = semaphore_broker(
        "vulkan_timeline_semaphore_fd_carries_its_value_where_the_device_has_them",
    ) else {
        return;
    };
    if !b.survey.exports.timeline_semaphore {
        let r = reason(b.semaphore(SemaphoreKind::Timeline).unwrap_err());
        eprintln!(
            "no exportable timeline semaphores on {}: {r}",
            b.survey.name
        );
        assert!(
            !b.survey.timeline_semaphores || r.contains("timeline"),
            "{r}"
        );
        return;
    }
    let sem = b.semaphore(SemaphoreKind::Timeline).unwrap();
    let imported = import_semaphore(&b, b.semaphore_fd(&sem).unwrap(), SemaphoreKind::Timeline);
    let d = &b.device;
    // SAFETY: test-only: host signal of the broker's timeline semaphore to 7, and a host wait
    // on the import for that value; both semaphores live until the end.
    unsafe {
        d.signal_semaphore(
            &vk::SemaphoreSignalInfo::default()
                .semaphore(sem.raw)
                .value(7),
        )
        .unwrap();
        let (sems, values) = ([imported], [7u64]);
        let wait = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&values);
        assert_eq!(
            d.wait_semaphores(&wait, Duration::from_secs(5).as_nanos() as u64),
            Ok(())
        );
        assert_eq!(d.get_semaphore_counter_value(imported), Ok(7));
        d.destroy_semaphore(imported, None);
    }
    b.destroy_semaphore(sem);
}

#[test]
#[cfg_attr(
    not(clhip_test_vulkan),
    ignore = "needs a Vulkan ICD; none was found when this was built"
)]
fn vulkan_memory_fd_maps_the_same_bytes_in_its_import() {
    let b = broker_for(
        "vulkan_memory_fd_maps_the_same_bytes_in_its_import",
        DeviceSurvey::memory_refusal,
    );
    if let Some(why) = b.survey.semaphore_refusal() {
        // Opened for its memory; a semaphore is refused with the device's reason.
        let r = reason(b.semaphore(SemaphoreKind::Binary).unwrap_err());
        assert!(r.ends_with(&why) && r.contains(&b.survey.uuid), "{r}");
    }
    let bytes = 65_536u64;
    let mem = b.memory(bytes).unwrap();
    eprintln!("exported memory: {mem:?}");
    assert!(mem.size >= bytes, "{mem:?}");
    let (one, two) = (b.memory_fd(&mem).unwrap(), b.memory_fd(&mem).unwrap());
    assert_ne!(one.as_raw_fd(), two.as_raw_fd());
    drop(two);
    let d = &b.device;
    // SAFETY: test-only: the import of an fd the broker exported, into an allocation of the
    // same size and type (dedicated to a buffer of its own where the export was), mapped
    // beside the export where the type is host-visible.
    unsafe {
        // An opaque fd is imported with the very type it was allocated with (its fd
        // properties may not be asked: VUID-vkGetMemoryFdPropertiesKHR-handleType-00674).
        let type_index = mem.type_index;
        let own_buffer = d
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(bytes)
                    .usage(survey::BUFFER_USAGE)
                    .push_next(
                        &mut vk::ExternalMemoryBufferCreateInfo::default()
                            .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD),
                    ),
                None,
            )
            .unwrap();
        let mut import = vk::ImportMemoryFdInfoKHR::default()
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD)
            .fd(one.as_raw_fd());
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(own_buffer);
        let mut alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(mem.size)
            .memory_type_index(type_index)
            .push_next(&mut import);
        if mem.dedicated {
            alloc = alloc.push_next(&mut dedicated);
        }
        let imported = d.allocate_memory(&alloc, None).unwrap();
        let _ = one.into_raw_fd();
        let flags = b.memory_types.memory_types[type_index as usize].property_flags;
        if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
            let out = d
                .map_memory(mem.memory, 0, bytes, vk::MemoryMapFlags::empty())
                .unwrap()
                .cast::<u32>();
            let back = d
                .map_memory(imported, 0, bytes, vk::MemoryMapFlags::empty())
                .unwrap()
                .cast::<u32>();
            let words = (bytes / 4) as usize;
            let want = crate::generate::pattern(0xC1A5, words);
            std::ptr::copy_nonoverlapping(want.as_ptr(), out, words);
            let got = std::slice::from_raw_parts(back, words);
            let coherent = flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT);
            if coherent {
                assert_eq!(got, want.as_slice(), "bytes through the import");
            } else {
                eprintln!("memory type {type_index} is not host-coherent: bytes not compared");
            }
            d.unmap_memory(mem.memory);
            d.unmap_memory(imported);
        } else {
            eprintln!(
                "memory type {type_index} ({flags:?}) is not host-visible: bytes not compared"
            );
        }
        d.free_memory(imported, None);
        d.destroy_buffer(own_buffer, None);
    }
    b.free_memory(mem);
}
