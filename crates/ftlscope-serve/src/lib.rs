//! A simulated drive served to the kernel as a file in a FUSE mount, so that a loop device over it is a
//! block device whose requests complete when the simulated drive would complete them, on the wall clock.
//!
//! Why FUSE and a loop device: the kernel ftlscope targets may lack ublk and nbd, while FUSE and loop are
//! everywhere. The cost is the path: a request goes block layer -> loop -> FUSE -> this process and back,
//! tens of microseconds, which [`calibrate`] measures and the drive subtracts from the model's latency
//! (see [`clock`]).

pub mod clock;
mod fs;

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};

use ftlscope_sim::device::SimDevice;
use fuser::{BackgroundSession, Config, MountOption, SessionACL};
use serde::Serialize;

pub use clock::{Drive, Stats};

/// A drive being served: the FUSE session and the clock thread. Dropping it without [`Served::stop`]
/// unmounts too (the session's own drop).
pub struct Served {
    session: Option<BackgroundSession>,
    clock: Option<JoinHandle<()>>,
    pub drive: Arc<Drive>,
    pub file: PathBuf,
}

/// Mount the drive at `mountpoint` (an empty directory) as one file named `name`, whose data is kept in
/// `backing` (created sparse at `size` bytes if missing). Requests are answered at once until
/// [`Drive::start_model`].
pub fn serve(
    device: Box<dyn SimDevice>,
    size: u64,
    backing: &Path,
    mountpoint: &Path,
    name: &str,
) -> io::Result<Served> {
    // The threads are started from a thread of their own at real-time priority, which they inherit, so that
    // a busy machine delays neither an answer (the clock thread) nor a request's arrival (the FUSE threads).
    let backing = backing.to_path_buf();
    let mountpoint = mountpoint.to_path_buf();
    let name = name.to_string();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                realtime_priority();
                start(device, size, &backing, &mountpoint, &name)
            })
            .join()
            .expect("the starting thread does not panic")
    })
}

/// SCHED_FIFO at a low real-time priority, and no timer slack, for this thread and the threads it starts.
/// Best effort: without CAP_SYS_NICE the drive is served at normal priority (and answers later on a busy
/// machine: the counters say by how much).
fn realtime_priority() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: plain syscalls on the calling thread with a valid parameter block.
    unsafe {
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param);
        libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64);
    }
}

fn start(device: Box<dyn SimDevice>, size: u64, backing: &Path, mountpoint: &Path, name: &str) -> io::Result<Served> {
    let block = device.logical_block() as u32;
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(backing)?;
    if file.metadata()?.len() != size {
        file.set_len(size)?;
    }
    // SAFETY: the backing file is this server's own and is never truncated while mapped; an I/O error of the
    // file system under it would raise SIGBUS on a read instead of EIO (the server dies and autoclear removes
    // the loop device).
    let map = Arc::new(unsafe { memmap2::MmapOptions::new().len(size as usize).map(&file)? });
    let drive = Arc::new(Drive::new(device));
    let clock = {
        let drive = Arc::clone(&drive);
        std::thread::Builder::new().name("ftlscope-clock".into()).spawn(move || drive.run_clock())?
    };
    let fs = fs::DriveFs {
        drive: Arc::clone(&drive),
        backing: file,
        map,
        size,
        name: name.to_string(),
        block,
        created: SystemTime::now(),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("ftlscope-sim".into()),
        MountOption::Subtype("ftlscope".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::NoExec,
    ];
    config.acl = SessionACL::Owner;
    // One reader of /dev/fuse: requests reach the drive in the kernel's order (two readers copying a split
    // write's halves out side by side may submit the smaller second half first), and it carried more: 4 KiB
    // random reads at QD 16 at 24,937-31,706/s with one reader, 15,110-23,293/s with two (fio on an attached
    // consumer-tlc-dram, the same minutes, load 23-32 on 2 CPUs). Whether the halves of 1 MiB writes merged
    // varied from attach to attach with either (one: 7 and 1,405 merged; two: 123 and 214): what made them
    // merge is the write's longer hold (`clock`).
    config.n_threads = Some(1);
    // No `clone_fd`: fuser clones /dev/fuse only for readers beyond the first, so with one it did nothing.
    let session = match fuser::spawn_mount(fs, mountpoint, &config) {
        Ok(s) => s,
        Err(e) => {
            drive.stop();
            let _ = clock.join();
            return Err(e);
        }
    };
    Ok(Served { session: Some(session), clock: Some(clock), drive, file: mountpoint.join(name) })
}

impl Served {
    /// Unmount (lazily: a loop device still open on the file keeps the mount alive until it lets go) and
    /// stop the threads.
    pub fn stop(&mut self) -> io::Result<()> {
        let result = match self.session.take() {
            Some(session) => session.umount_and_join(),
            None => Ok(()),
        };
        self.drive.stop();
        if let Some(clock) = self.clock.take() {
            let _ = clock.join();
        }
        result
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Latency of the path alone (block layer, loop, FUSE, this process), per request.
#[derive(Clone, Debug, Serialize)]
pub struct PathOverhead {
    pub requests: u64,
    /// Mean of the small requests at or below p99: what the drive subtracts from each simulated latency. A
    /// mean, not the median, because a busy machine delays some requests by milliseconds and the mean latency
    /// a program sees includes those; trimmed, so that one stall does not set it.
    pub trimmed_mean_ns: u64,
    pub p10_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub mean_ns: u64,
    /// The same for large requests, which cost more: their data is copied through FUSE.
    pub large_request_bytes: u64,
    pub large_requests: u64,
    pub large_trimmed_mean_ns: u64,
    /// What each byte adds (picoseconds), from the two sizes: subtracted too, per byte of a request.
    pub ps_per_byte: u64,
}

/// Time `count` 4 KiB direct reads and `count / 10` 1 MiB ones at QD 1 from `device` (the loop device over
/// the served file) while the drive answers at once: what the path costs a request, and each byte of it.
pub fn calibrate(device: &Path, count: u32, block: u64) -> io::Result<PathOverhead> {
    // At the drive's own real-time priority: the path is measured, not this thread's wait for a CPU.
    let device = device.to_path_buf();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                realtime_priority();
                let file = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&device)?;
                let small_len = block.max(4096) as usize;
                let large_len = 1usize << 20;
                // Interleaved, ten small reads to a large one, so that a change of the machine's load during the
                // calibration weighs on both sizes alike (measured one size after the other, a burst of other
                // work during the large reads alone once put 1.8 ms on a 1 MiB read the path then carried in
                // 0.6 ms, and the per-byte cost subtracted from every answer with it).
                let rounds = (count / 10).max(1);
                let mut small = Vec::with_capacity(count as usize);
                let mut large = Vec::with_capacity(rounds as usize);
                for round in 0..rounds {
                    small.extend(time_reads(&file, small_len, 10, round)?);
                    large.extend(time_reads(&file, large_len, 1, round)?);
                }
                small.sort_unstable();
                large.sort_unstable();
                let (s, l) = (trimmed_mean(&small), trimmed_mean(&large));
                let at = |q: f64| small[((small.len() - 1) as f64 * q).round() as usize];
                Ok(PathOverhead {
                    requests: small.len() as u64,
                    trimmed_mean_ns: s,
                    p10_ns: at(0.1),
                    p50_ns: at(0.5),
                    p90_ns: at(0.9),
                    mean_ns: small.iter().sum::<u64>() / small.len() as u64,
                    large_request_bytes: large_len as u64,
                    large_requests: large.len() as u64,
                    large_trimmed_mean_ns: l,
                    ps_per_byte: l.saturating_sub(s) * 1000 / (large_len - small_len) as u64,
                })
            })
            .join()
            .expect("the calibrating thread does not panic")
    })
}

fn trimmed_mean(sorted: &[u64]) -> u64 {
    let kept = &sorted[..=((sorted.len() - 1) as f64 * 0.99).round() as usize];
    kept.iter().sum::<u64>() / kept.len() as u64
}

/// `count` reads of `len` bytes at offsets spread over the device by a fixed sequence (so that what is
/// measured is not one cached page; `round` moves it along): their latencies.
fn time_reads(file: &std::fs::File, len: usize, count: u32, round: u32) -> io::Result<Vec<u64>> {
    let size = block_device_size(file)?;
    let layout = std::alloc::Layout::from_size_align(len, 4096).expect("a page-aligned layout");
    // SAFETY: a non-zero-sized layout; freed below with the same layout.
    let buf = unsafe { std::alloc::alloc_zeroed(layout) };
    if buf.is_null() {
        return Err(io::Error::from(io::ErrorKind::OutOfMemory));
    }
    let slots = (size / len as u64).max(1);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (u64::from(round) << 32 | u64::from(round));
    let mut samples = Vec::with_capacity(count as usize);
    let mut error = None;
    for _ in 0..count.max(1) {
        // xorshift: a fixed, well-spread sequence of offsets.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let offset = (x % slots) * len as u64;
        let read = || {
            // SAFETY: buf holds len bytes and outlives the call.
            unsafe { libc::pread(std::os::unix::io::AsRawFd::as_raw_fd(file), buf.cast(), len, offset as i64) }
        };
        // Read once untimed: the store is fresh (sparse) at attach, and the server's first read of a range
        // allocates its page cache and maps it, which a drive in use has done long since. Timed cold, a
        // 1 MiB read came out at 1.7-6.7 ms while fio's 1 MiB reads then crossed the path in 0.6-0.7 ms, and
        // the subtraction sent their answers a millisecond too early.
        if read() < 0 {
            error = Some(io::Error::last_os_error());
            break;
        }
        let start = Instant::now();
        let n = read();
        let ns = start.elapsed().as_nanos() as u64;
        if n < 0 {
            error = Some(io::Error::last_os_error());
            break;
        }
        samples.push(ns);
    }
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(buf, layout) };
    if let Some(e) = error {
        return Err(e);
    }
    Ok(samples)
}

fn block_device_size(file: &std::fs::File) -> io::Result<u64> {
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 to the pointer.
    let rc = unsafe { libc::ioctl(std::os::unix::io::AsRawFd::as_raw_fd(file), BLKGETSIZE64, &mut size) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size)
}
