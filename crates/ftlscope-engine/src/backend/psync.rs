//! psync backend: one blocking pread/pwrite at a time, timed around the syscall.
//!
//! The fallback when io_uring is unavailable, and the faster choice on targets the kernel completes
//! synchronously (zram, tmpfs): there io_uring hands each request to a worker thread, which costs more
//! than the syscall it saves. Requests pushed together are executed one after another, so the effective
//! queue depth is 1.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

use super::{Backend, Event, Request};
use crate::clock::{wait_until, Clock};
use crate::target::{discard_sync, write_zeroes_sync, TargetKind};
use crate::workload::Op;

pub struct PsyncBackend {
    clock: Clock,
    file: Arc<File>,
    kind: TargetKind,
    /// Pushed and not yet executed (capacity = queue depth, never grows).
    pending: Vec<(u32, Request)>,
}

// SAFETY: moved into one queue thread; the raw buffer pointers point into that queue's own buffers.
unsafe impl Send for PsyncBackend {}

impl PsyncBackend {
    pub fn new(file: Arc<File>, kind: TargetKind, depth: u32, clock: Clock) -> PsyncBackend {
        PsyncBackend { clock, file, kind, pending: Vec::with_capacity(depth as usize) }
    }

    fn execute(&self, req: &Request) -> i32 {
        execute(&self.file, self.kind, req)
    }
}

/// One request as a blocking call on `file`: bytes moved, or `-errno` (the psync-pool's workers make it too).
pub(crate) fn execute(file: &File, kind: TargetKind, req: &Request) -> i32 {
    let fd = file.as_raw_fd();
    let rc = match req.op {
        // SAFETY: addr points to at least len bytes of the queue's buffers.
        Op::Read => unsafe { libc::pread(fd, req.addr.cast(), req.len as usize, req.offset as i64) },
        // SAFETY: as above.
        Op::Write => unsafe { libc::pwrite(fd, req.addr.cast(), req.len as usize, req.offset as i64) },
        // SAFETY: plain syscall on an open fd.
        Op::Flush => unsafe { libc::fdatasync(fd) as isize },
        Op::Trim => return discard_sync(file, kind, req.offset, req.len as u64),
        Op::WriteZeroes => return write_zeroes_sync(file, kind, req.offset, req.len as u64),
    };
    if rc < 0 {
        -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
    } else {
        rc as i32
    }
}

impl Backend for PsyncBackend {
    fn name(&self) -> &'static str {
        "psync"
    }

    #[inline]
    fn push(&mut self, slot: u32, request: Request) {
        self.pending.push((slot, request));
    }

    fn submit_and_wait<F: FnMut(Event)>(
        &mut self,
        _min_complete: u32,
        _timeout_ns: u64,
        mut on_event: F,
    ) -> io::Result<()> {
        for i in 0..self.pending.len() {
            let (slot, req) = self.pending[i];
            on_event(Event::Submitted { slot, at_ns: self.clock.now() });
            let result = self.execute(&req);
            on_event(Event::Completed { slot, result, at_ns: self.clock.now() });
        }
        self.pending.clear();
        Ok(())
    }

    #[inline]
    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn idle(&mut self, ns: u64) {
        wait_until(&self.clock, self.clock.now() + ns);
    }

    fn cancel_all(&mut self) -> bool {
        self.pending.clear();
        true
    }
}
