//! Opening a real target (block device or regular file) for timed I/O.
//!
//! The safety policy (what may be written) lives in the Python front, which knows what the user named and
//! confirmed; this module only opens what it is told to and reports the target's geometry.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

// Block-layer ioctls (linux/fs.h). `_IO(0x12, n)` and `_IOR(0x12, 114, size_t)`.
pub(crate) const BLKSSZGET: libc::c_ulong = 0x1268;
pub(crate) const BLKPBSZGET: libc::c_ulong = 0x127b;
pub(crate) const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
pub(crate) const BLKDISCARD: libc::c_ulong = 0x1277;
pub(crate) const BLKZEROOUT: libc::c_ulong = 0x127f;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    BlockDevice,
    RegularFile,
    /// A simulated device (`sim:...`), served by the simulator's driver, never by a file descriptor.
    Simulated,
}

/// What the engine knows about an opened target.
#[derive(Clone, Debug, Serialize)]
pub struct TargetInfo {
    pub path: PathBuf,
    pub kind: TargetKind,
    pub size_bytes: u64,
    /// The alignment O_DIRECT I/O needs (the logical block size, or the file system's DIO alignment).
    pub logical_block_size: u64,
    pub physical_block_size: u64,
    pub direct: bool,
    pub writable: bool,
}

#[derive(Debug, Error)]
pub enum TargetError {
    #[error("no such file or device: {0}")]
    NotFound(PathBuf),
    #[error("permission denied opening {0}; run as a user who may open it (root for block devices)")]
    PermissionDenied(PathBuf),
    #[error(
        "opening {0} was refused although ftlscope runs as root (a container's device rules, a security module or \
         kernel lockdown forbid it); name a device this machine lets root open"
    )]
    RefusedToRoot(PathBuf),
    #[error("{0} is read-only (EROFS) and cannot be opened for writing; run reads only, or name a writable target")]
    ReadOnly(PathBuf),
    #[error("{0} is not a block device or regular file")]
    Unsupported(PathBuf),
    #[error("the file system holding {0} does not support O_DIRECT; use a block device or another file system")]
    DirectUnsupported(PathBuf),
    #[error("{path} is busy: {reason}")]
    Busy { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl TargetError {
    /// A refused open: "run as root" helps only a user who is not root already (a container's device cgroup
    /// refuses root too: this VM's own disk does, with EPERM).
    fn permission(path: &Path, root: bool) -> TargetError {
        if root {
            TargetError::RefusedToRoot(path.to_path_buf())
        } else {
            TargetError::PermissionDenied(path.to_path_buf())
        }
    }

    fn from_io(path: &Path, err: io::Error) -> TargetError {
        match err.raw_os_error() {
            Some(libc::ENOENT) => TargetError::NotFound(path.to_path_buf()),
            Some(libc::EROFS) => TargetError::ReadOnly(path.to_path_buf()),
            Some(libc::EACCES) | Some(libc::EPERM) => {
                // SAFETY: geteuid has no preconditions and cannot fail.
                TargetError::permission(path, unsafe { libc::geteuid() } == 0)
            }
            Some(libc::EBUSY) => TargetError::Busy { path: path.to_path_buf(), reason: "in use (EBUSY)".into() },
            _ => TargetError::Io { path: path.to_path_buf(), source: err },
        }
    }
}

/// An opened target.
pub struct Target {
    pub file: File,
    pub info: TargetInfo,
}

fn ioctl_u64(file: &File, request: libc::c_ulong) -> io::Result<u64> {
    let mut value: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid for that write.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), request as _, &mut value as *mut u64) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

fn ioctl_int(file: &File, request: libc::c_ulong) -> io::Result<u64> {
    let mut value: libc::c_int = 0;
    // SAFETY: BLKSSZGET / BLKPBSZGET write one int through the pointer, which is valid for that write.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), request as _, &mut value as *mut libc::c_int) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value as u64)
}

/// The O_DIRECT offset alignment of a regular file from statx(STATX_DIOALIGN), where the kernel (6.1+)
/// and file system report it.
fn dio_alignment(file: &File) -> Option<(u64, u64)> {
    const STATX_DIOALIGN: u32 = 0x2000;
    // SAFETY: statx is zero-initialisable plain data.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = b"\0";
    // SAFETY: the path is a valid NUL-terminated empty string with AT_EMPTY_PATH on an open fd, and `stx`
    // is valid for writes.
    let rc =
        unsafe { libc::statx(file.as_raw_fd(), empty.as_ptr().cast(), libc::AT_EMPTY_PATH, STATX_DIOALIGN, &mut stx) };
    if rc != 0 || stx.stx_mask & STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((stx.stx_dio_offset_align as u64, stx.stx_dio_mem_align as u64))
}

impl Target {
    /// Open `path` for I/O. `direct` adds O_DIRECT (the page cache is bypassed, sizes and offsets must be
    /// aligned to `info.logical_block_size`). A regular file is not created or resized here.
    pub fn open(path: &Path, writable: bool, direct: bool) -> Result<Target, TargetError> {
        let meta = std::fs::metadata(path).map_err(|e| TargetError::from_io(path, e))?;
        let ft = meta.file_type();
        let kind = if ft.is_block_device() {
            TargetKind::BlockDevice
        } else if ft.is_file() {
            TargetKind::RegularFile
        } else {
            return Err(TargetError::Unsupported(path.to_path_buf()));
        };
        let mut flags = libc::O_CLOEXEC;
        if direct {
            flags |= libc::O_DIRECT;
        }
        let file = OpenOptions::new().read(true).write(writable).custom_flags(flags).open(path).map_err(|e| match e
            .raw_os_error()
        {
            Some(libc::EINVAL) if direct => TargetError::DirectUnsupported(path.to_path_buf()),
            _ => TargetError::from_io(path, e),
        })?;
        let (size_bytes, logical, physical) = match kind {
            TargetKind::BlockDevice => {
                let size = ioctl_u64(&file, BLKGETSIZE64).map_err(|e| TargetError::from_io(path, e))?;
                let logical = ioctl_int(&file, BLKSSZGET).unwrap_or(512);
                let physical = ioctl_int(&file, BLKPBSZGET).unwrap_or(logical);
                (size, logical, physical)
            }
            TargetKind::RegularFile => {
                let fs_block = meta_blksize(&meta);
                let logical = if direct {
                    // Without STATX_DIOALIGN, 4 KiB is safe on every file system we know.
                    dio_alignment(&file).map(|(offset, _)| offset).unwrap_or(4096)
                } else {
                    1
                };
                (meta.len(), logical, fs_block)
            }
            TargetKind::Simulated => {
                unreachable!("a path opens as a block device or a regular file")
            }
        };
        let info = TargetInfo {
            path: path.to_path_buf(),
            kind,
            size_bytes,
            logical_block_size: logical.max(1),
            physical_block_size: physical.max(1),
            direct,
            writable,
        };
        Ok(Target { file, info })
    }
}

fn meta_blksize(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blksize()
}

/// Discard (TRIM) a byte range synchronously: BLKDISCARD on a block device, a punched hole in a file.
pub(crate) fn discard_sync(file: &File, kind: TargetKind, offset: u64, len: u64) -> i32 {
    match kind {
        TargetKind::BlockDevice => range_ioctl(file, BLKDISCARD, offset, len),
        TargetKind::RegularFile => fallocate(file, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len),
        TargetKind::Simulated => -libc::EOPNOTSUPP,
    }
}

/// Write zeroes over a byte range synchronously: BLKZEROOUT on a block device, FALLOC_FL_ZERO_RANGE on a
/// file.
pub(crate) fn write_zeroes_sync(file: &File, kind: TargetKind, offset: u64, len: u64) -> i32 {
    match kind {
        TargetKind::BlockDevice => range_ioctl(file, BLKZEROOUT, offset, len),
        TargetKind::RegularFile => fallocate(file, libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE, offset, len),
        TargetKind::Simulated => -libc::EOPNOTSUPP,
    }
}

/// Returns the completion result like io_uring does: bytes/0 on success, `-errno` on failure.
fn range_ioctl(file: &File, request: libc::c_ulong, offset: u64, len: u64) -> i32 {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKDISCARD/BLKZEROOUT read two u64 (start, length) from the pointer, valid for that read.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), request as _, range.as_ptr()) };
    if rc < 0 {
        -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
    } else {
        0
    }
}

fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> i32 {
    // SAFETY: plain syscall on an open fd.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset as libc::off_t, len as libc::off_t) };
    if rc < 0 {
        -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_a_regular_file_with_direct_io() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.img");
        std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
        match Target::open(&path, false, true) {
            Ok(t) => {
                assert_eq!(t.info.kind, TargetKind::RegularFile);
                assert_eq!(t.info.size_bytes, 1 << 20);
                assert!(t.info.logical_block_size.is_power_of_two());
            }
            Err(TargetError::DirectUnsupported(_)) => {} // e.g. an old tmpfs: the error says so
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn missing_path_is_not_found() {
        let err = Target::open(Path::new("/nonexistent/x.img"), false, true).err().unwrap();
        assert!(matches!(err, TargetError::NotFound(_)), "{err}");
    }

    #[test]
    fn a_refused_open_says_run_as_root_only_to_a_user_who_is_not() {
        let path = Path::new("/dev/vda");
        let user = TargetError::permission(path, false).to_string();
        assert!(user.contains("run as a user who may open it"), "{user}");
        let root = TargetError::permission(path, true).to_string();
        assert!(root.contains("refused although ftlscope runs as root") && !root.contains("run as a user"), "{root}");
        assert!(!root.contains('\n') && root.contains("/dev/vda"), "{root}");
    }

    #[test]
    fn a_directory_is_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let err = Target::open(dir.path(), false, false).err().unwrap();
        assert!(matches!(err, TargetError::Unsupported(_)), "{err}");
    }

    #[test]
    fn punch_hole_and_zero_range_on_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.img");
        std::fs::write(&path, vec![0xffu8; 64 * 1024]).unwrap();
        let t = Target::open(&path, true, false).unwrap();
        assert_eq!(discard_sync(&t.file, TargetKind::RegularFile, 0, 4096), 0);
        assert_eq!(write_zeroes_sync(&t.file, TargetKind::RegularFile, 8192, 4096), 0);
        let data = std::fs::read(&path).unwrap();
        assert!(data[..4096].iter().all(|&b| b == 0));
        assert!(data[4096..8192].iter().all(|&b| b == 0xff));
        assert!(data[8192..12288].iter().all(|&b| b == 0));
        assert_eq!(data.len(), 64 * 1024, "KEEP_SIZE keeps the length");
    }
}
