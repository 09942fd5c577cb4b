//! The C of memory that crosses by import and of the syncs around it (templates/interop.c):
//! OpenCL's side of cl_khr_external_memory and cl_khr_external_semaphore, the Vulkan broker,
//! and the semaphores of the `semaphore` sync; and which of the peer's template sections they
//! call (templates/cuda.c, hip.c). A path's room names what it calls (`CWriter::uses`); what
//! that calls in turn is added here.

use super::emit::section;

pub(super) const TEMPLATE: &str = include_str!("templates/interop.c");

/// Each section a room or sync may name, what it calls of this template, and what of the
/// peer's.
const SECTIONS: &[(&str, &[&str], &[&str])] = &[
    ("cl_extensions", &[], &[]),
    ("cl_import", &["cl_extensions"], &[]),
    ("cl_external", &[], &[]),
    ("cl_semaphore", &["cl_extensions"], &[]),
    ("vulkan", &[], &["uuid"]),
    ("vk_semaphore", &["vulkan"], &[]),
    ("vk_memory", &["vulkan"], &["external_memory"]),
    (
        "semaphore",
        &[
            "cl_extensions",
            "cl_semaphore",
            "vk_semaphore",
            "cl_external",
        ],
        &["external_semaphore"],
    ),
    // The peer's alone: OpenCL's import of its fd is `cl_import`.
    ("vmm", &[], &["vmm"]),
    // HIP's alone: the HSA runtime's export of OpenCL's SVM, HIP's import.
    ("dmabuf", &[], &["external_memory", "dmabuf"]),
];

/// The sections of this template before the peer's functions (OpenCL's alone), or after them
/// (`after_peer`: the broker and the semaphores, which call the peer's).
const AFTER_PEER: &[&str] = &["vulkan", "vk_semaphore", "vk_memory", "semaphore"];

/// `used` with everything its sections call, in SECTIONS' order.
fn closure(used: &[&str]) -> Vec<&'static str> {
    let mut all: Vec<&'static str> = Vec::new();
    let add = |name: &str, all: &mut Vec<&'static str>| {
        if let Some((n, _, _)) = SECTIONS.iter().find(|(n, _, _)| *n == name)
            && !all.contains(n)
        {
            all.push(n);
        }
    };
    for name in used {
        add(name, &mut all);
    }
    // Each section's dependencies are listed before it, so one pass in reverse finds them all.
    for (name, calls, _) in SECTIONS.iter().rev() {
        if all.contains(name) {
            for c in *calls {
                add(c, &mut all);
            }
        }
    }
    SECTIONS
        .iter()
        .map(|(n, _, _)| *n)
        .filter(|n| all.contains(n))
        .collect()
}

/// The text of this template's sections `used` calls, those before the peer's functions or
/// those after them.
pub(super) fn sections(used: &[&str], after_peer: bool) -> String {
    closure(used)
        .into_iter()
        .filter(|n| AFTER_PEER.contains(n) == after_peer)
        .filter(|n| TEMPLATE.contains(&format!("/*@ {n} @*/")))
        .map(|n| section(TEMPLATE, n))
        .collect()
}

/// The peer template's sections `used` calls.
pub(super) fn peer_sections(used: &[&str]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for name in closure(used) {
        if let Some((_, _, peer)) = SECTIONS.iter().find(|(n, _, _)| *n == name) {
            for p in *peer {
                if !out.contains(p) {
                    out.push(*p);
                }
            }
        }
    }
    out
}

/// Whether the program opens a library at run time (the Vulkan loader, the HSA runtime), for
/// the build's `-ldl` (glibc before 2.34 keeps dlopen there).
pub(super) fn opens_libraries(used: &[&str]) -> bool {
    closure(used)
        .iter()
        .any(|n| matches!(*n, "vulkan" | "dmabuf"))
}
