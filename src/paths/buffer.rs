//! Plain device buffers that are not under test, which every op uses beside its shared memory.

use std::ffi::c_void;
use std::ptr;

use crate::model::{CaseError, Phase};
use crate::runtimes::opencl::{ClMem, ClResultExt, ClSession};

use super::POISON_WORD;

/// A plain device buffer that is not under test: the pipeline's second operand, its read-back,
/// a check kernel's result words. Its transfers are blocking, so they add no sync the case
/// didn't ask for until the moment they are used.
pub struct DeviceBuffer {
    pub mem: *mut c_void,
    pub bytes: usize,
}

impl DeviceBuffer {
    pub fn new(session: &ClSession, bytes: usize) -> Result<Self, CaseError> {
        Self::named(session, bytes, &format!("OpenCL buffer of {bytes} bytes"))
    }

    /// A buffer of `bytes` called `name` in a guard zone's failure. It has a guard zone after
    /// its bytes ([`super::guard`]), checked after the case it was made in.
    pub fn named(session: &ClSession, bytes: usize, name: &str) -> Result<Self, CaseError> {
        let (mem, guard) = super::guard::guarded_buffer(session, bytes.max(4), name)?;
        let b = DeviceBuffer { mem, bytes };
        // Poisoned, as shared memory is: a read-back whose kernel never ran must not find an
        // earlier case's result in reused memory. In order on the queue, so no wait is needed.
        session
            .fill(b.arg(), bytes.max(4), POISON_WORD)
            .refused("OpenCL would not fill a new buffer")?;
        super::guard::fill_on_queue(session, &guard)?;
        super::guard::keep_case_buffer(guard);
        Ok(b)
    }

    pub fn with_data<T: Copy>(session: &ClSession, data: &[T]) -> Result<Self, CaseError> {
        let bytes = std::mem::size_of_val(data);
        Self::with_data_named(session, data, &format!("OpenCL buffer of {bytes} bytes"))
    }

    /// [`DeviceBuffer::with_data`] called `name` (see [`DeviceBuffer::named`]).
    pub fn with_data_named<T: Copy>(
        session: &ClSession,
        data: &[T],
        name: &str,
    ) -> Result<Self, CaseError> {
        let b = Self::named(session, std::mem::size_of_val(data), name)?;
        b.write(session, data)?;
        Ok(b)
    }

    /// A buffer of the harness's bookkeeping (a check kernel's counters) holding `words`, read
    /// back at once. A driver that drops or garbles the write would otherwise show only later,
    /// as counters that make no sense: what it left there instead is its failure, named by
    /// word (`names`, one per word, or one per word of a slot that `words` repeats). Before the
    /// case's first step, so the read adds no sync.
    pub fn with_words_read_back(
        session: &ClSession,
        what: &str,
        names: &[&str],
        words: &[u32],
    ) -> Result<Self, CaseError> {
        let b = Self::with_data_named(session, words, what)?;
        let read: Vec<u32> = b.read(session, words.len())?;
        written_as_asked(what, names, words, &read).map_err(CaseError::Mismatch)?;
        Ok(b)
    }

    pub fn arg(&self) -> ClMem {
        ClMem::Buffer(self.mem)
    }

    /// Blocking write of `data` (plain-old-data: u32, f32, Complex32) at offset 0.
    pub fn write<T: Copy>(&self, session: &ClSession, data: &[T]) -> Result<(), CaseError> {
        let bytes = std::mem::size_of_val(data);
        assert!(bytes <= self.bytes, "write past the buffer");
        // SAFETY: blocking write from a live slice within the buffer's size.
        let ev = unsafe {
            cl3::command_queue::enqueue_write_buffer(
                session.queue.get(),
                self.mem,
                cl3::types::CL_TRUE,
                0,
                bytes,
                data.as_ptr() as *const c_void,
                0,
                ptr::null(),
            )
        }
        .call("clEnqueueWriteBuffer")
        .running()?;
        drop(crate::runtimes::opencl::ClEvent(ev));
        Ok(())
    }

    /// Blocking read of `len` elements after all queued work. While the peer's queue is
    /// watched (a semaphore handover is in the case), the host polls instead of blocking.
    pub fn read<T: Copy + Default>(
        &self,
        session: &ClSession,
        len: usize,
    ) -> Result<Vec<T>, CaseError> {
        let mut out = vec![T::default(); len];
        let bytes = std::mem::size_of_val(out.as_slice());
        assert!(bytes <= self.bytes, "read past the buffer");
        let watched = crate::blocking::watching();
        let blocking = if watched {
            cl3::types::CL_FALSE
        } else {
            cl3::types::CL_TRUE
        };
        // SAFETY: a read into a live vector of exactly `bytes`, which is not touched (nor
        // freed: see below) until the read is complete.
        let ev = unsafe {
            cl3::command_queue::enqueue_read_buffer(
                session.queue.get(),
                self.mem,
                blocking,
                0,
                bytes,
                out.as_mut_ptr() as *mut c_void,
                0,
                ptr::null(),
            )
        }
        .call("clEnqueueReadBuffer")
        .running()?;
        let ev = crate::runtimes::opencl::ClEvent(ev);
        if watched && let Err(e) = wait_watching_peer(&ev) {
            // The read may still land one day: its destination must outlive the worker,
            // which exits after this case.
            std::mem::forget(out);
            std::mem::forget(ev);
            return Err(e);
        }
        Ok(out)
    }
}

/// Wait for `ev` while watching the peer's stream ([`crate::blocking::PeerWatch`]).
fn wait_watching_peer(ev: &crate::runtimes::opencl::ClEvent) -> Result<(), CaseError> {
    let mut watch = crate::blocking::PeerWatch::start();
    loop {
        let status =
            cl3::event::get_event_info(ev.0, cl3::event::CL_EVENT_COMMAND_EXECUTION_STATUS)
                .call("clGetEventInfo")
                .running()?;
        match status {
            cl3::info_type::InfoType::Int(s) if s == cl3::event::CL_COMPLETE => return Ok(()),
            cl3::info_type::InfoType::Int(s) if s < 0 => {
                let mut e = crate::runtimes::opencl::cl_error("clEnqueueReadBuffer", s);
                e.detail = "the read's event ended in this error".into();
                return Err(if e.is_device_fault() {
                    CaseError::Fault(e)
                } else {
                    CaseError::Broken(e)
                });
            }
            _ => {}
        }
        watch.check()?;
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `read`, what a buffer held after clEnqueueWriteBuffer of `wrote`, against `wrote`: the
/// first differing word named (`names`, repeated where `wrote` is slots of such words), with
/// what was asked and what was read.
pub fn written_as_asked(
    what: &str,
    names: &[&str],
    wrote: &[u32],
    read: &[u32],
) -> Result<(), Box<crate::model::Mismatch>> {
    let differ = |i: usize| read.get(i) != Some(&wrote[i]);
    let Some(first) = (0..wrote.len()).find(|&i| differ(i)) else {
        return Ok(());
    };
    let name = names
        .get(first % names.len().max(1))
        .copied()
        .unwrap_or("word");
    Err(Box::new(crate::model::Mismatch {
        what: format!(
            "{what}, read back after clEnqueueWriteBuffer (word {first} is the {name}): the driver did not write what it was given"
        ),
        index: first,
        got: read
            .get(first)
            .map_or_else(|| "nothing".into(), |w| format!("{w:#010x}")),
        want: format!("{:#010x}", wrote[first]),
        count: (0..wrote.len()).filter(|&i| differ(i)).count(),
        len: wrote.len(),
        max_abs_err: f64::NAN,
        max_rel_err: f64::NAN,
        bound: 0.0,
        formula: crate::model::BIT_EXACT.into(),
    }))
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: we own this buffer. OpenCL defers the release until queued commands using it
        // are done, so dropping with work in flight is safe.
        unsafe {
            let _ = cl3::memory::release_mem_object(self.mem);
        }
    }
}
