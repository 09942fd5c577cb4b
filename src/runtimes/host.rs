//! The host CPU as a participant: memory is ordinary page-aligned host memory, "kernels" are
//! loops. It is the reference peer: when a host pair fails, the OpenCL side or the path is wrong.
//!
//! Its operations are recorded (crate::calls) under the names of the reproducer's functions
//! that do the same (repro/templates/host.c), as its API calls.

use std::alloc::{Layout, alloc_zeroed, dealloc};

use num_complex::Complex32;

use crate::generate::pattern_word;
use crate::model::{CaseError, Peer};
use crate::runtimes::{PatternCheck, PeerPtr, PeerRuntime};

/// Page alignment: runtimes that can use host memory in place (CL_MEM_USE_HOST_PTR zero-copy)
/// want it, and PoCL copies silently when it isn't.
const HOST_ALIGN: usize = 4096;

#[derive(Default)]
pub struct HostPeer;

/// The layout of `len` complex elements of page-aligned host memory.
fn layout(len: usize) -> Layout {
    let bytes = (len.max(1) * size_of::<Complex32>()).next_multiple_of(HOST_ALIGN);
    // Alignment is a power of two and bytes is rounded to it: from_size_align cannot fail.
    Layout::from_size_align(bytes, HOST_ALIGN).expect("page-aligned layout")
}

/// Volatile word access: the memory may be written by another API behind the compiler's back,
/// and a negative control must observe what is really there at that moment.
fn words(ptr: PeerPtr) -> (*mut u32, usize) {
    (ptr.addr as *mut u32, ptr.len * 2)
}

fn elems(ptr: PeerPtr) -> *mut Complex32 {
    ptr.addr as *mut Complex32
}

/// `len` complex elements of zeroed, page-aligned, pageable host memory: the host peer's own,
/// and every peer's staging memory on the copy path.
pub(crate) fn alloc_pageable(len: usize) -> Result<PeerPtr, CaseError> {
    crate::calls::record("host_alloc");
    // SAFETY: non-zero size layout.
    let p = unsafe { alloc_zeroed(layout(len)) };
    if p.is_null() {
        return Err(CaseError::unsupported(format!(
            "host allocation of {} bytes failed",
            layout(len).size()
        )));
    }
    Ok(PeerPtr {
        addr: p as usize,
        len,
    })
}

/// Free what [`alloc_pageable`] returned.
pub(crate) fn free_pageable(ptr: PeerPtr) {
    crate::calls::record("free");
    // SAFETY: allocated by alloc_pageable with the same layout.
    unsafe { dealloc(ptr.addr as *mut u8, layout(ptr.len)) }
}

impl PeerRuntime for HostPeer {
    fn peer(&self) -> Peer {
        Peer::HOST
    }

    fn alloc_host(&mut self, len: usize) -> Result<PeerPtr, CaseError> {
        alloc_pageable(len)
    }

    fn free_host(&mut self, ptr: PeerPtr) {
        free_pageable(ptr)
    }

    fn fill_pattern(&mut self, ptr: PeerPtr, seed: u32) -> Result<(), CaseError> {
        crate::calls::record("peer_fill_pattern");
        let (p, n) = words(ptr);
        for i in 0..n {
            // SAFETY: the path made `ptr` host-accessible for `len` complex elements.
            unsafe { p.add(i).write_volatile(pattern_word(seed, i as u32)) };
        }
        Ok(())
    }

    fn check_pattern(&mut self, ptr: PeerPtr, seed: u32) -> Result<PatternCheck, CaseError> {
        crate::calls::record("peer_check_pattern");
        let (p, n) = words(ptr);
        let mut check = PatternCheck {
            mismatches: 0,
            first: None,
        };
        for i in 0..n {
            // SAFETY: as in fill_pattern.
            let got = unsafe { p.add(i).read_volatile() };
            if got != pattern_word(seed, i as u32) {
                check.mismatches += 1;
                check.first.get_or_insert((i, got));
            }
        }
        Ok(check)
    }

    fn upload(&mut self, ptr: PeerPtr, data: &[Complex32]) -> Result<(), CaseError> {
        crate::calls::record("peer_upload");
        assert_eq!(ptr.len, data.len(), "upload length");
        // SAFETY: `ptr` is host-accessible for ptr.len elements and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), elems(ptr), ptr.len) };
        Ok(())
    }

    fn download(&mut self, ptr: PeerPtr) -> Result<Vec<Complex32>, CaseError> {
        crate::calls::record("peer_download");
        let p = elems(ptr);
        // Volatile so that a stale read in a negative control is the memory's real content.
        Ok((0..ptr.len)
            .map(|i| unsafe { p.add(i).read_volatile() })
            .collect())
    }

    fn scale(&mut self, ptr: PeerPtr, s: f32) -> Result<(), CaseError> {
        crate::calls::record("peer_scale");
        let p = elems(ptr);
        for i in 0..ptr.len {
            // SAFETY: host-accessible for ptr.len elements.
            unsafe {
                let x = p.add(i).read_volatile();
                p.add(i).write_volatile(x * s);
            }
        }
        Ok(())
    }

    fn magnitude(&mut self, ptr: PeerPtr) -> Result<(), CaseError> {
        crate::calls::record("peer_magnitude");
        let p = elems(ptr);
        for i in 0..ptr.len {
            // SAFETY: host-accessible for ptr.len elements.
            unsafe {
                let x = p.add(i).read_volatile();
                let m = (x.re * x.re + x.im * x.im).sqrt();
                p.add(i).write_volatile(Complex32::new(m, 0.0));
            }
        }
        Ok(())
    }

    fn flip_bit(&mut self, ptr: PeerPtr, word: usize, bit: u32) -> Result<(), CaseError> {
        crate::calls::record("peer_flip_bit");
        let (p, n) = words(ptr);
        assert!(word < n, "flip past the buffer");
        // SAFETY: host-accessible for 2 * len words.
        unsafe {
            p.add(word)
                .write_volatile(p.add(word).read_volatile() ^ bit)
        };
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), CaseError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_pattern_round_trip_and_planted_flip() {
        let mut h = HostPeer;
        let p = h.alloc_host(33).unwrap();
        assert_eq!(p.addr % HOST_ALIGN, 0);
        h.fill_pattern(p, 7).unwrap();
        assert_eq!(h.check_pattern(p, 7).unwrap().mismatches, 0);
        // A flipped bit in one word is seen, at that word.
        unsafe { *(p.addr as *mut u32).add(41) ^= 1 << 30 };
        let c = h.check_pattern(p, 7).unwrap();
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.first.unwrap().0, 41);
        h.free_host(p);
    }
}
