//! io_uring backend: registered file, registered buffers, O_DIRECT, one ring per queue thread.
//!
//! Trim goes through io_uring where the kernel has an op for it (fallocate punch-hole on files,
//! `BLOCK_URING_CMD_DISCARD` on block devices since Linux 6.12); Write Zeroes on a block device has no
//! io_uring op, so it is issued as BLKZEROOUT from the queue thread and timed around the ioctl.

use std::fs::File;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};

use super::{Backend, Event, Request};
use crate::clock::{wait_until, Clock};
use crate::target::{discard_sync, write_zeroes_sync, TargetKind};
use crate::workload::Op;

/// `BLOCK_URING_CMD_DISCARD` = `_IO(0x12, 0)` (include/uapi/linux/fs.h, Linux 6.12).
const BLOCK_URING_CMD_DISCARD: u32 = 0x1200;

/// How the ring was set up, for the run's `env` record.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UringSetup {
    pub entries: u32,
    pub registered_file: bool,
    pub registered_buffers: bool,
    pub single_issuer_coop_taskrun: bool,
    /// CPUs io_uring's worker threads may run on (None: inherited from the queue thread).
    pub worker_cpus: Option<Vec<usize>>,
}

pub struct UringBackend {
    ring: IoUring,
    clock: Clock,
    file: Arc<File>,
    fd: RawFd,
    kind: TargetKind,
    setup: UringSetup,
    /// Slots pushed to the SQ and not yet submitted (capacity = queue depth, never grows).
    unsubmitted: Vec<u32>,
    /// Requests served by a synchronous syscall at the next submit (capacity = queue depth).
    synchronous: Vec<(u32, Request)>,
    /// The request in each slot, to retry a trim the kernel refused through io_uring.
    requests: Vec<Option<Request>>,
    inflight: u32,
    /// `None` until the first block-device discard tells whether the uring command works.
    uring_discard: Option<bool>,
}

// SAFETY: the backend is moved into its queue thread before use and never shared; the raw pointers in
// `requests` point into that queue's own buffers.
unsafe impl Send for UringBackend {}

/// Whether this kernel lets us set up an io_uring at all (it may be disabled by sysctl or seccomp).
pub fn available() -> Result<(), io::Error> {
    IoUring::new(2).map(|_| ())
}

impl UringBackend {
    /// A ring for `depth` requests in flight on `file`, with `region` (one allocation) registered.
    pub fn new(
        file: Arc<File>,
        kind: TargetKind,
        depth: u32,
        region: (*mut u8, usize),
        clock: Clock,
        worker_cpus: &[usize],
    ) -> io::Result<UringBackend> {
        let entries = depth.next_power_of_two().max(2);
        let cq = (entries * 2).max(8);
        // SINGLE_ISSUER + COOP_TASKRUN: completion work runs when this thread next enters the kernel, not by
        // interrupting it mid-loop. (DEFER_TASKRUN, which holds completions until we wait, measured 10-15 %
        // fewer IOPS than this at QD 32 on a virtio file here: completions piled up while we refilled.)
        let (ring, coop) =
            match IoUring::builder().setup_cqsize(cq).setup_single_issuer().setup_coop_taskrun().build(entries) {
                Ok(ring) => (ring, true),
                Err(_) => (IoUring::builder().setup_cqsize(cq).build(entries)?, false),
            };
        let fd = file.as_raw_fd();
        let registered_file = ring.submitter().register_files(&[fd]).is_ok();
        let iov = libc::iovec { iov_base: region.0.cast(), iov_len: region.1 };
        // SAFETY: the region outlives the ring: the queue thread drops the ring before its buffers, and a
        // timed-out queue leaks both.
        let registered_buffers = unsafe { ring.submitter().register_buffers(&[iov]) }.is_ok();
        // Worker threads (io-wq) inherit the queue thread's CPU pin by default. On targets the kernel
        // serves through workers (zram, tmpfs, some file systems) they would then fight the queue thread
        // for its one CPU: measured here, io_uring at QD 32 on zram ran at half speed pinned. Let them use
        // every allowed CPU. (Only the other CPUs was worse at QD 1: 20 K instead of 136 K IOPS on zram, as
        // every request then woke an idle CPU.)
        let worker_cpus = (!worker_cpus.is_empty())
            .then(|| {
                // SAFETY: cpu_set_t is plain data.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                for &cpu in worker_cpus {
                    // SAFETY: cpu < CPU_SETSIZE (it came from sched_getaffinity).
                    unsafe { libc::CPU_SET(cpu, &mut set) };
                }
                ring.submitter().register_iowq_aff(&set).ok().map(|_| worker_cpus.to_vec())
            })
            .flatten();
        let slots = depth as usize;
        Ok(UringBackend {
            ring,
            clock,
            file,
            fd,
            kind,
            setup: UringSetup {
                entries,
                registered_file,
                registered_buffers,
                single_issuer_coop_taskrun: coop,
                worker_cpus,
            },
            unsubmitted: Vec::with_capacity(slots),
            synchronous: Vec::with_capacity(slots),
            requests: vec![None; slots],
            inflight: 0,
            uring_discard: None,
        })
    }

    pub fn setup(&self) -> &UringSetup {
        &self.setup
    }

    fn entry(&self, req: &Request) -> squeue::Entry {
        let fixed = types::Fixed(0);
        let fd = types::Fd(self.fd);
        match req.op {
            Op::Read if self.setup.registered_buffers => {
                if self.setup.registered_file {
                    opcode::ReadFixed::new(fixed, req.addr, req.len, 0).offset(req.offset).build()
                } else {
                    opcode::ReadFixed::new(fd, req.addr, req.len, 0).offset(req.offset).build()
                }
            }
            Op::Write if self.setup.registered_buffers => {
                if self.setup.registered_file {
                    opcode::WriteFixed::new(fixed, req.addr, req.len, 0).offset(req.offset).build()
                } else {
                    opcode::WriteFixed::new(fd, req.addr, req.len, 0).offset(req.offset).build()
                }
            }
            Op::Read => {
                if self.setup.registered_file {
                    opcode::Read::new(fixed, req.addr, req.len).offset(req.offset).build()
                } else {
                    opcode::Read::new(fd, req.addr, req.len).offset(req.offset).build()
                }
            }
            Op::Write => {
                if self.setup.registered_file {
                    opcode::Write::new(fixed, req.addr, req.len).offset(req.offset).build()
                } else {
                    opcode::Write::new(fd, req.addr, req.len).offset(req.offset).build()
                }
            }
            Op::Flush => {
                if self.setup.registered_file {
                    opcode::Fsync::new(fixed).flags(types::FsyncFlags::DATASYNC).build()
                } else {
                    opcode::Fsync::new(fd).flags(types::FsyncFlags::DATASYNC).build()
                }
            }
            Op::Trim if self.kind == TargetKind::BlockDevice => {
                let mut cmd = [0u8; 16];
                // The kernel reads the start from sqe->addr and the length from sqe->addr3 (cmd[0..8]).
                cmd[..8].copy_from_slice(&(req.len as u64).to_le_bytes());
                if self.setup.registered_file {
                    opcode::UringCmd16::new(fixed, BLOCK_URING_CMD_DISCARD).cmd(cmd).addr(Some(req.offset)).build()
                } else {
                    opcode::UringCmd16::new(fd, BLOCK_URING_CMD_DISCARD).cmd(cmd).addr(Some(req.offset)).build()
                }
            }
            Op::Trim => {
                let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
                if self.setup.registered_file {
                    opcode::Fallocate::new(fixed, req.len as u64).offset(req.offset).mode(mode).build()
                } else {
                    opcode::Fallocate::new(fd, req.len as u64).offset(req.offset).mode(mode).build()
                }
            }
            Op::WriteZeroes => {
                let mode = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
                if self.setup.registered_file {
                    opcode::Fallocate::new(fixed, req.len as u64).offset(req.offset).mode(mode).build()
                } else {
                    opcode::Fallocate::new(fd, req.len as u64).offset(req.offset).mode(mode).build()
                }
            }
        }
    }

    fn is_synchronous(&self, req: &Request) -> bool {
        self.kind == TargetKind::BlockDevice
            && match req.op {
                Op::WriteZeroes => true,
                Op::Trim => self.uring_discard == Some(false),
                _ => false,
            }
    }

    fn run_synchronously(&self, req: &Request) -> i32 {
        match req.op {
            Op::Trim => discard_sync(&self.file, self.kind, req.offset, req.len as u64),
            Op::WriteZeroes => write_zeroes_sync(&self.file, self.kind, req.offset, req.len as u64),
            _ => unreachable!("only trim and write zeroes run synchronously"),
        }
    }

    fn reap<F: FnMut(Event)>(&mut self, on_event: &mut F) -> u32 {
        let mut seen = 0;
        // Collect first so the CQ borrow ends before a refused trim is retried synchronously.
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let at_ns = self.clock.now();
            let slot = cqe.user_data() as u32;
            let mut result = cqe.result();
            let req = self.requests[slot as usize].take();
            if let Some(req) = req {
                if req.op == Op::Trim
                    && self.kind == TargetKind::BlockDevice
                    && self.uring_discard != Some(true)
                    && matches!(-result, libc::EOPNOTSUPP | libc::EINVAL | libc::ENOTTY)
                {
                    // The kernel predates BLOCK_URING_CMD_DISCARD: use BLKDISCARD from now on.
                    self.uring_discard = Some(false);
                    result = discard_sync(&self.file, self.kind, req.offset, req.len as u64);
                    on_event(Event::Completed { slot, result, at_ns: self.clock.now() });
                    seen += 1;
                    continue;
                }
                if req.op == Op::Trim && self.kind == TargetKind::BlockDevice && result >= 0 {
                    self.uring_discard = Some(true);
                }
            }
            on_event(Event::Completed { slot, result, at_ns });
            seen += 1;
        }
        self.inflight -= seen;
        seen
    }
}

impl Backend for UringBackend {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    /// Yes: the kernel issues a submission's requests one after another in this thread, so one call for
    /// 32 requests stamped them all at its start while the last reached the device about 100 us later (a
    /// virtio disk here), and no completion was seen meanwhile. 4 KiB random reads at QD 32 against fio's
    /// io_uring, one per call: 1.13x on a virtio file, 1.15x on a file on a RAM-backed loop device (batched:
    /// 0.93x and 0.88x). No difference at QD 1, where a call carries one request anyway, nor on zram.
    #[inline]
    fn submits_each(&self) -> bool {
        true
    }

    #[inline]
    fn push(&mut self, slot: u32, request: Request) {
        self.requests[slot as usize] = Some(request);
        if self.is_synchronous(&request) {
            self.synchronous.push((slot, request));
            return;
        }
        let entry = self.entry(&request).user_data(slot as u64);
        // SAFETY: the request's buffer lives in the registered region, which outlives the ring; the SQ
        // has room because at most `depth` requests are pushed between submissions.
        unsafe { self.ring.submission().push(&entry).expect("submission queue sized to the queue depth") };
        self.unsubmitted.push(slot);
        self.inflight += 1;
    }

    fn submit_and_wait<F: FnMut(Event)>(
        &mut self,
        min_complete: u32,
        timeout_ns: u64,
        mut on_event: F,
    ) -> io::Result<()> {
        let mut completed = 0u32;
        // Synchronous operations first, each timed around its own syscall.
        while let Some((slot, req)) = self.synchronous.pop() {
            on_event(Event::Submitted { slot, at_ns: self.clock.now() });
            let result = self.run_synchronously(&req);
            self.requests[slot as usize] = None;
            on_event(Event::Completed { slot, result, at_ns: self.clock.now() });
            completed += 1;
        }
        let want = min_complete.saturating_sub(completed).min(self.inflight);
        // Stamp right before the kernel sees the requests.
        let at_ns = self.clock.now();
        for &slot in &self.unsubmitted {
            on_event(Event::Submitted { slot, at_ns });
        }
        self.unsubmitted.clear();
        let ts = types::Timespec::new().sec(timeout_ns / 1_000_000_000).nsec((timeout_ns % 1_000_000_000) as u32);
        let args = types::SubmitArgs::new().timespec(&ts);
        loop {
            let outcome = if want == 0 {
                self.ring.submitter().submit().map(|_| ())
            } else {
                self.ring.submitter().submit_with_args(want as usize, &args).map(|_| ())
            };
            match outcome {
                Ok(()) => break,
                Err(e) => match e.raw_os_error() {
                    Some(libc::ETIME) => break,
                    Some(libc::EINTR) => continue,
                    Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                        // The CQ is full: make room, then try again.
                        self.reap(&mut on_event);
                        continue;
                    }
                    _ => return Err(e),
                },
            }
        }
        self.reap(&mut on_event);
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
        if self.inflight == 0 {
            return true;
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any()).build().user_data(u64::MAX);
        // SAFETY: the cancel entry carries no buffers.
        if unsafe { self.ring.submission().push(&cancel) }.is_err() {
            return false;
        }
        let deadline = self.clock.now() + 1_000_000_000;
        while self.inflight > 0 && self.clock.now() < deadline {
            let ts = types::Timespec::new().nsec(50_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            let mut cq = self.ring.completion();
            cq.sync();
            for cqe in &mut cq {
                if cqe.user_data() != u64::MAX {
                    self.inflight -= 1;
                }
            }
        }
        self.inflight == 0
    }
}
