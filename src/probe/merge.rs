//! One probe's OpenCL part from the answers of its vendor children.

use std::collections::BTreeMap;

use super::isolation::VendorResult;
use super::records::{PlatformProbe, VendorProbe, VendorState};
use crate::runtimes::opencl::{self, VendorLibrary};

/// One probe's OpenCL part from the vendors' results: platforms renumbered in vendor order,
/// labels counted per family over all vendors (what one process loading them all would call
/// them), each device marked with its library; the overall status; one row per vendor.
pub(super) fn merge_vendors(
    vendors: &[VendorLibrary],
    results: Vec<VendorResult>,
) -> (String, Vec<PlatformProbe>, Vec<VendorProbe>) {
    let mut platforms = Vec::new();
    let mut rows = Vec::new();
    let mut per_family: BTreeMap<String, usize> = BTreeMap::new();
    for (v, r) in vendors.iter().zip(results) {
        rows.push(VendorProbe {
            library: v.library.clone(),
            listed_in: v.listed_in.clone(),
            state: r.state,
            platforms: r.platforms.len(),
            stderr_tail: r.stderr_tail,
        });
        for mut p in r.platforms {
            let index = platforms.len();
            p.index = index;
            for d in &mut p.devices {
                let family = d
                    .label
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .to_string();
                let k = per_family.entry(family.clone()).or_insert(0);
                d.icd_label = Some(std::mem::replace(&mut d.label, format!("{family}{k}")));
                *k += 1;
                d.platform_index = index;
                d.icd_library = Some(v.library.clone());
            }
            platforms.push(p);
        }
    }
    let status = if rows.iter().any(|r| r.state == VendorState::Ok) {
        "ok".to_string()
    } else if rows.is_empty() {
        format!(
            "unsupported: no OpenCL vendor library listed ({}; install an ICD, e.g. \
             pocl-opencl-icd)",
            opencl::no_vendor_reason()
        )
    } else if let Some(VendorState::NoPlatform { error }) =
        rows.iter().map(|r| &r.state).find(|s| !s.is_broken())
    {
        format!("unsupported: {error}")
    } else {
        "unsupported: no OpenCL vendor library answered (see the vendor lines)".to_string()
    };
    (status, platforms, rows)
}
