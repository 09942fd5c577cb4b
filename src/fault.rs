//! What a dead worker's last words say about a GPU memory fault. ROCm's runtime (ROCr) ends a
//! device page fault by printing one line on stderr and calling abort(), in HIP and in ROCm's
//! OpenCL alike:
//!
//! `Memory access fault by GPU node-2 (Agent handle: 0x55ac14d27600) on address 0x7f9587e00000.
//! Reason: Page not present or supervisor privilege.`
//!
//! (ROCR-Runtime, `core/runtime/runtime.cpp`, `Runtime::VMFaultHandler`.) The process dies by
//! SIGABRT, but that is a memory fault, the same finding CUDA reports as
//! CUDA_ERROR_ILLEGAL_ADDRESS, and is recorded as `fault`. The case's buffers were announced
//! before it touched them, so the address can be placed: inside which buffer, or how far from
//! the nearest.

use serde::{Deserialize, Serialize};

/// One allocation of a running case, as the worker announced it before use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferSpan {
    /// What it is, e.g. `shared memory (fine-grain SVM)`.
    pub name: String,
    pub addr: u64,
    pub bytes: u64,
}

type Announcer = Box<dyn Fn(&BufferSpan) + Send + Sync>;

/// Set once by the worker: sends each span to the parent before the case uses the memory.
static ANNOUNCER: std::sync::OnceLock<Announcer> = std::sync::OnceLock::new();

/// Installs where [`announce`] sends spans (the worker's protocol). A second call is ignored.
pub fn set_announcer(f: Announcer) {
    let _ = ANNOUNCER.set(f);
}

/// Tells whoever watches this process where a case's memory lies; nothing without a watcher.
pub fn announce(span: BufferSpan) {
    if let Some(f) = ANNOUNCER.get() {
        f(&span);
    }
}

/// ROCr's fault line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocrFault {
    pub node: u32,
    pub address: u64,
    pub reason: String,
    /// The line as printed.
    pub line: String,
}

const MARK: &str = "Memory access fault by GPU node-";

/// The last ROCr fault line in `text`, if any.
pub fn parse_rocr_fault(text: &str) -> Option<RocrFault> {
    text.lines().rev().find_map(|line| {
        let at = line.find(MARK)?;
        let rest = &line[at + MARK.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let node = digits.parse().ok()?;
        let addr_at = rest.find("on address 0x")? + "on address 0x".len();
        let hex: String = rest[addr_at..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        let address = u64::from_str_radix(&hex, 16).ok()?;
        let reason = rest
            .find("Reason: ")
            .map(|r| rest[r + "Reason: ".len()..].trim().trim_end_matches('.'))
            .unwrap_or("not given")
            .to_string();
        Some(RocrFault {
            node,
            address,
            reason,
            line: line[at..].trim().to_string(),
        })
    })
}

/// Where `address` lies among `buffers`: "at byte 4096 of shared memory (fine-grain SVM)", or
/// "4 KiB past the end of shared memory (fine-grain SVM)", or that no buffer was announced.
pub fn locate(address: u64, buffers: &[BufferSpan]) -> String {
    if let Some(b) = buffers
        .iter()
        .find(|b| address >= b.addr && address - b.addr < b.bytes.max(1))
    {
        return format!(
            "at byte {} of the {} ({} bytes at {:#x})",
            address - b.addr,
            b.name,
            b.bytes,
            b.addr
        );
    }
    let nearest = buffers.iter().min_by_key(|b| distance(address, b));
    match nearest {
        None => "in no buffer the case announced (none was announced)".into(),
        Some(b) => {
            let end = b.addr.saturating_add(b.bytes);
            let (how_far, side) = if address >= end {
                (address - end, "past the end of")
            } else {
                (b.addr - address, "before the start of")
            };
            format!(
                "{} {side} the {} ({} bytes at {:#x}), the nearest buffer of the case",
                human_bytes(how_far),
                b.name,
                b.bytes,
                b.addr
            )
        }
    }
}

fn distance(address: u64, b: &BufferSpan) -> u64 {
    let end = b.addr.saturating_add(b.bytes);
    if address >= end {
        address - end
    } else {
        b.addr.saturating_sub(address)
    }
}

/// `4 KiB`, `3 bytes`, `1.5 MiB`: exact in bytes where a power-of-two unit does not divide.
fn human_bytes(n: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size {
            return if n.is_multiple_of(size) {
                format!("{} {unit}", n / size)
            } else {
                format!("{:.1} {unit} ({n} bytes)", n as f64 / size as f64)
            };
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "Memory access fault by GPU node-2 (Agent handle: 0x55ac14d27600) on address 0x7f9587e00000. Reason: Page not present or supervisor privilege.";

    #[test]
    fn rocr_line_parses_node_address_and_reason() {
        let text = format!("some driver chatter\n{LINE}\n");
        let f = parse_rocr_fault(&text).unwrap();
        assert_eq!(f.node, 2);
        assert_eq!(f.address, 0x7f95_87e0_0000);
        assert_eq!(f.reason, "Page not present or supervisor privilege");
        assert!(parse_rocr_fault("Segmentation fault").is_none());
        assert!(parse_rocr_fault("Memory access fault by GPU node-x").is_none());
    }

    #[test]
    fn addresses_are_placed_in_or_near_a_buffer() {
        let svm = BufferSpan {
            name: "shared memory (fine-grain SVM)".into(),
            addr: 0x1000_0000,
            bytes: 0x8000,
        };
        let far = BufferSpan {
            name: "scratch".into(),
            addr: 0x9000_0000,
            bytes: 16,
        };
        let both = [svm.clone(), far];
        assert_eq!(
            locate(0x1000_8000 + 4096, &both),
            "4 KiB past the end of the shared memory (fine-grain SVM) (32768 bytes at 0x10000000), the nearest buffer of the case"
        );
        assert!(locate(0x1000_0010, &both).starts_with("at byte 16 of the shared memory"));
        assert!(locate(0x0fff_fffd, &both).starts_with("3 bytes before the start of the shared"));
        assert!(locate(1, &[]).contains("none was announced"));
    }
}
