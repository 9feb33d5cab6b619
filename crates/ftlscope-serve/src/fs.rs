//! The FUSE file system: a root directory holding one file, the drive. Its data lives in a sparse backing
//! file; its timing comes from the [`Drive`]. Replies are sent by the drive's clock thread, so many requests
//! are in flight at once (the kernel's async direct I/O sends them without waiting for each other).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use memmap2::Mmap;

use ftlscope_sim::device::{SimOp, SimRequest};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, WriteFlags,
};

use crate::clock::Drive;

const FILE: INodeNo = INodeNo(2);
const TTL: Duration = Duration::from_secs(3600);
/// Largest request the kernel sends us: a 1 MiB sequential read arrives whole, as the engine submits it.
pub const MAX_REQUEST: u32 = 1 << 20;
/// Reads up to this size are copied into a buffer of their own instead: the mapping's first touch of a page
/// (a page fault, about 7 us traced) costs a random 4 KiB read more than `pread` into a small buffer.
const COPY_MAX: u64 = 64 << 10;

pub struct DriveFs {
    pub drive: Arc<Drive>,
    pub backing: File,
    /// The backing file mapped shared: a large read's answer is written to /dev/fuse straight from the page
    /// cache. Reading it into a buffer first cost a 1 MiB read two copies and 256 page faults of a fresh
    /// buffer (about 110 us of each 512 KiB fragment's 180 us in the server, traced at load 11).
    pub map: Arc<Mmap>,
    pub size: u64,
    pub name: String,
    pub block: u32,
    pub created: SystemTime,
}

fn errno(code: i32) -> Errno {
    Errno::from_i32(code)
}

impl DriveFs {
    fn attr(&self, ino: INodeNo) -> FileAttr {
        let (kind, perm, size, nlink) =
            if ino == FILE { (FileType::RegularFile, 0o600, self.size, 1) } else { (FileType::Directory, 0o700, 0, 2) };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: self.block,
            flags: 0,
        }
    }

    /// Clip a request to the drive: the loop device never asks beyond it, but a stray `dd` through the mount
    /// could.
    fn clip(&self, offset: u64, len: u64) -> u64 {
        len.min(self.size.saturating_sub(offset))
    }
}

impl Filesystem for DriveFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Async direct I/O: the loop device's requests reach us concurrently (QD > 1 reaches the model).
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        let _ = config.set_max_write(MAX_REQUEST);
        let _ = config.set_max_readahead(MAX_REQUEST);
        // Async direct I/O counts as background requests; the kernel's default of 12 would cap the depth.
        let _ = config.set_max_background(1024);
        let _ = config.set_congestion_threshold(1024);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.drive.note_metadata();
        if parent == INodeNo::ROOT && name == OsStr::new(&self.name) {
            reply.entry(&TTL, &self.attr(FILE), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.drive.note_metadata();
        if ino == FILE || ino == INodeNo::ROOT {
            reply.attr(&TTL, &self.attr(ino));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.drive.note_metadata();
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        // Direct I/O: no page cache of the FUSE file between the loop device and the drive, so every request
        // reaches the model.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [(INodeNo::ROOT, FileType::Directory, "."), (INodeNo::ROOT, FileType::Directory, "..")];
        let mut i = offset as usize;
        while i < 3 {
            let full = if i < 2 {
                let (ino, kind, name) = entries[i];
                reply.add(ino, (i + 1) as u64, kind, name)
            } else {
                reply.add(FILE, 3, FileType::RegularFile, &self.name)
            };
            if full {
                break;
            }
            i += 1;
        }
        reply.ok();
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let received = self.drive.now_ns();
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        let len = self.clip(offset, size as u64);
        let request = SimRequest { op: SimOp::Read, offset, len, fingerprint: 0 };
        if len <= COPY_MAX {
            let mut data = vec![0u8; len as usize];
            if let Err(e) = self.backing.read_exact_at(&mut data, offset) {
                return reply.error(errno(e.raw_os_error().unwrap_or(libc::EIO)));
            }
            return self.drive.submit_received(
                request,
                received,
                Box::new(move |result| match result {
                    Ok(()) => reply.data(&data),
                    Err(code) => reply.error(errno(code)),
                }),
            );
        }
        // The data as it is when the answer goes out: a write overlapping a read still in flight may or may
        // not be seen by it, as on a drive (commands in flight together have no order).
        let map = Arc::clone(&self.map);
        let range = offset as usize..(offset + len) as usize;
        self.drive.submit_received(
            request,
            received,
            Box::new(move |result| match result {
                Ok(()) => reply.data(&map[range]),
                Err(code) => reply.error(errno(code)),
            }),
        );
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let received = self.drive.now_ns();
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        // Before the copy to the store, which the first half of a split write, if held, waits for.
        self.drive.receiving(SimOp::Write, offset);
        let len = self.clip(offset, data.len() as u64);
        if len == 0 && !data.is_empty() {
            return reply.error(Errno::ENOSPC);
        }
        if let Err(e) = self.backing.write_all_at(&data[..len as usize], offset) {
            return reply.error(errno(e.raw_os_error().unwrap_or(libc::EIO)));
        }
        let request = SimRequest { op: SimOp::Write, offset, len, fingerprint: 0 };
        self.drive.submit_received(
            request,
            received,
            Box::new(move |result| match result {
                Ok(()) => reply.written(len as u32),
                Err(code) => reply.error(errno(code)),
            }),
        );
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        self.drive.note_metadata();
        // Called on every close(); not a cache flush (fsync is).
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let request = SimRequest { op: SimOp::Flush, offset: 0, len: 0, fingerprint: 0 };
        self.drive.submit(request, empty_answer(reply));
    }

    /// The loop device turns discard into a hole punch and write-zeroes into a zero range.
    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        let op = if mode & libc::FALLOC_FL_PUNCH_HOLE != 0 {
            SimOp::Trim
        } else if mode & libc::FALLOC_FL_ZERO_RANGE != 0 {
            SimOp::WriteZeroes
        } else {
            // Plain preallocation: the drive has every block already.
            return reply.ok();
        };
        let len = self.clip(offset, length);
        // SAFETY: fallocate on a file descriptor we own, with the kernel's own mode bits.
        let rc = unsafe {
            libc::fallocate(
                self.backing.as_raw_fd(),
                mode | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            return reply.error(errno(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)));
        }
        let request = SimRequest { op, offset, len, fingerprint: 0 };
        self.drive.submit(request, empty_answer(reply));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks = self.size / self.block as u64;
        reply.statfs(blocks, 0, 0, 2, 0, self.block, 255, self.block);
    }
}

fn empty_answer(reply: ReplyEmpty) -> crate::clock::Answer {
    Box::new(move |result| match result {
        Ok(()) => reply.ok(),
        Err(code) => reply.error(errno(code)),
    })
}
