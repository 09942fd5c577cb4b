//! Text every participant writes the same way, so that values from different APIs compare as
//! strings: C buffers, PCI bus ids and UUIDs. Here, below the backends, so that neither
//! backend imports the other and neither imports the probe above them.

use std::ffi::c_char;

/// A NUL-terminated C buffer (a device name) as text; lossy, since drivers write what they like.
pub fn c_buf_string(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// # Safety
/// `p` is null or a NUL-terminated string that stays valid for the call.
pub unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: runtimes return NUL-terminated strings.
    Some(
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `0000:3B:00.0` or `00000000:3b:00.0`, as cuDeviceGetPCIBusId or hipDeviceGetPCIBusId may
/// write it, -> `0000:3b:00.0`, the form the probe prints OpenCL's PCI queries in.
pub fn normalise_pci_bus_id(s: &str) -> Option<String> {
    let (domain, rest) = s.trim().split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |x: &str| u32::from_str_radix(x, 16).ok();
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        hex(domain)?,
        hex(bus)?,
        hex(device)?,
        hex(function)?
    ))
}

/// 16 bytes as the canonical 8-4-4-4-12 lowercase hex form that nvidia-smi, rocm-smi and
/// cl_khr_device_uuid's readers print (other lengths: plain hex).
pub fn uuid_string(b: &[u8]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    if h.len() != 32 {
        return h;
    }
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_and_bus_ids_print_one_way() {
        let b: Vec<u8> = (0u8..16).collect();
        assert_eq!(uuid_string(&b), "00010203-0405-0607-0809-0a0b0c0d0e0f");
        assert_eq!(uuid_string(&[0xab, 0xcd]), "abcd");
        assert_eq!(
            normalise_pci_bus_id("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(normalise_pci_bus_id("nonsense"), None);
        let name: Vec<c_char> = b"MI100\0junk".iter().map(|&c| c as c_char).collect();
        assert_eq!(c_buf_string(&name), "MI100");
    }
}
