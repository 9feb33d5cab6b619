//! Verifiable write data and the read-back pass that checks it (fio's `verify` is the model: a header per
//! block with its offset, a write sequence number and a checksum).
//!
//! Every 512-byte sector a verify run writes carries a stamp: its LBA, the run's tag, the write's generation
//! (a run-wide sequence number), the sector's place in its write and the write's length, and a CRC-32C of
//! the rest. Reading the target back then tells, sector by sector, whether it holds what was written last:
//! a stamp of another LBA is a misdirected write, an older generation where the run wrote a newer one is a
//! stale (lost) write, and sectors of one write holding different generations are a torn write.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;

pub const SECTOR: usize = 512;
const MAGIC: u32 = u32::from_le_bytes(*b"FTLV");
const CRC_AT: usize = SECTOR - 4;
/// Mismatch ranges kept in a report; the counters count them all.
pub const MAX_MISMATCHES: usize = 1000;
/// Memory the write record may take (4 B per 512 B sector: 1 GiB covers a 128 GiB span).
pub const MAX_RECORD_BYTES: u64 = 1 << 30;

/// What a verify run stamps into each sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Stamp {
    pub lba: u64,
    pub tag: u64,
    pub generation: u64,
    /// This sector's index in its write, and the write's length in sectors.
    pub index: u32,
    pub sectors: u32,
}

impl Stamp {
    /// Write this stamp (and its checksum) into a 512-byte sector.
    pub fn write_to(&self, sector: &mut [u8]) {
        sector[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        sector[4..8].copy_from_slice(&self.index.to_le_bytes());
        sector[8..16].copy_from_slice(&self.lba.to_le_bytes());
        sector[16..24].copy_from_slice(&self.tag.to_le_bytes());
        sector[24..32].copy_from_slice(&self.generation.to_le_bytes());
        sector[32..36].copy_from_slice(&self.sectors.to_le_bytes());
        let crc = crc32c::crc32c(&sector[..CRC_AT]);
        sector[CRC_AT..SECTOR].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Stamp a write of `buf.len()` bytes at byte `offset`. Bytes 36..508 of each sector stay as they are
/// (the buffer is zeroed once): the checksum covers them, so any change there is caught too.
pub fn stamp_write(buf: &mut [u8], offset: u64, tag: u64, generation: u64) {
    let sectors = (buf.len() / SECTOR) as u32;
    let first = offset / SECTOR as u64;
    for (index, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        Stamp { lba: first + index as u64, tag, generation, index: index as u32, sectors }.write_to(sector);
    }
}

/// What one sector holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    Unwritten,
    /// Bytes that are no stamp at all (another program's data).
    Foreign,
    /// A stamp whose checksum does not match.
    Corrupt,
    Stamped(Stamp),
    Unreadable,
}

fn parse(sector: &[u8]) -> Found {
    let magic = u32::from_le_bytes(sector[0..4].try_into().expect("4 bytes"));
    if magic != MAGIC {
        return if sector.iter().all(|&b| b == 0) { Found::Unwritten } else { Found::Foreign };
    }
    let crc = u32::from_le_bytes(sector[CRC_AT..SECTOR].try_into().expect("4 bytes"));
    if crc32c::crc32c(&sector[..CRC_AT]) != crc {
        return Found::Corrupt;
    }
    let u64_at = |at: usize| u64::from_le_bytes(sector[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| u32::from_le_bytes(sector[at..at + 4].try_into().expect("4 bytes"));
    Found::Stamped(Stamp {
        index: u32_at(4),
        lba: u64_at(8),
        tag: u64_at(16),
        generation: u64_at(24),
        sectors: u32_at(32),
    })
}

/// The generation last written to each sector of a span, filled in as writes complete.
pub struct WriteRecord {
    pub base: u64,
    generations: Vec<AtomicU32>,
}

impl WriteRecord {
    /// A record for `[base, base + len)`, or why not (too large to keep).
    pub fn new(base: u64, len: u64) -> Result<WriteRecord, String> {
        let sectors = len.div_ceil(SECTOR as u64);
        if sectors * 4 > MAX_RECORD_BYTES {
            return Err(format!(
                "verify keeps 4 bytes per 512-byte sector of the span written; {} B needs more than {} B: \
                 verify a span of at most 128 GiB",
                len, MAX_RECORD_BYTES
            ));
        }
        Ok(WriteRecord { base, generations: (0..sectors).map(|_| AtomicU32::new(0)).collect() })
    }

    /// A write of `len` bytes at `offset` with `generation` completed. Where writes overlapped in flight the
    /// newer generation is kept: the device may have applied them in either order (as fio warns), so a
    /// verify run that writes overlapping ranges at depth > 1 can see a stale sector that was no loss.
    pub fn record(&self, offset: u64, len: u64, generation: u64) {
        let generation = generation.min(u32::MAX as u64) as u32;
        let first = (offset.saturating_sub(self.base) / SECTOR as u64) as usize;
        let last = (first + (len as usize).div_ceil(SECTOR)).min(self.generations.len());
        for slot in &self.generations[first.min(last)..last] {
            slot.fetch_max(generation, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> Vec<u32> {
        self.generations.iter().map(|g| g.load(Ordering::Relaxed)).collect()
    }
}

/// Where the read-back pass reads from: a file descriptor, or a fake in tests.
pub trait ReadAt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The unit a read error is narrowed down to (the logical block size).
    fn block(&self) -> u64;
}

pub struct FileSource<'a> {
    pub file: &'a std::fs::File,
    pub block: u64,
}

impl ReadAt for FileSource<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.read_exact_at(buf, offset)
    }
    fn block(&self) -> u64 {
        self.block
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Count {
    pub sectors: u64,
    /// Distinct writes (generations) involved.
    pub writes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    pub kind: &'static str,
    pub offset: u64,
    pub len: u64,
    /// What the write record says should be there (the generation; the LBA is the offset's).
    pub expected_generation: Option<u64>,
    /// The stamp found in the first sector of the range (absent where there is none).
    pub found: Option<Stamp>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReadError {
    pub offset: u64,
    pub len: u64,
    pub error: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    /// The run whose stamps were checked.
    pub tag: u64,
    pub offset: u64,
    pub size: u64,
    pub sectors: u64,
    /// Sectors holding this run's stamp, intact and as expected.
    pub ok: u64,
    pub torn: Count,
    /// Only with a write record (a `run --verify`): a standalone pass cannot know what was written last.
    pub stale: Option<Count>,
    pub misdirected: Count,
    /// A stamp whose checksum does not match its bytes.
    pub corrupt: u64,
    /// Sectors that hold no stamp of this run: zeros, another program's data, or another run's stamps
    /// (a mismatch where this run wrote).
    pub unwritten: u64,
    pub foreign: u64,
    pub other_runs: u64,
    /// Of the foreign and other runs' sectors, those inside this run's writes (mismatches).
    pub overwritten: u64,
    pub read_errors: Vec<ReadError>,
    pub unreadable_sectors: u64,
    pub mismatches: Vec<Mismatch>,
    pub mismatches_total: u64,
}

/// Torn writes are found from the stamps alone: a write covers its whole range, so once generation g has
/// landed in one of its sectors every sector of the range must hold g or newer. Writes are checked within
/// windows that overlap by this much, so a write longer than it is checked only in part.
pub const TORN_MARGIN: u64 = 8 << 20;
const WINDOW: u64 = 128 << 20;
const CHUNK: usize = 1 << 20;

/// One sector's verdict before counting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Torn,
    Stale,
    Misdirected,
    Corrupt,
    Unwritten,
    Foreign,
    OtherRun,
    Unreadable,
}

impl Verdict {
    fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Torn => "torn",
            Verdict::Stale => "stale",
            Verdict::Misdirected => "misdirected",
            Verdict::Corrupt => "corrupt",
            Verdict::Unwritten => "unwritten",
            Verdict::Foreign => "foreign",
            Verdict::OtherRun => "other_run",
            Verdict::Unreadable => "unreadable",
        }
    }
}

/// Read `[offset, offset + size)` back and check its stamps. `tag` is the run whose writes are checked (0:
/// the run of the first stamp found); `record` (with the span it starts at) is the run's write record,
/// where there is one.
pub fn verify<R: ReadAt>(source: &R, offset: u64, size: u64, tag: u64, record: Option<(&[u32], u64)>) -> VerifyReport {
    let mut report = VerifyReport { offset, size, stale: record.map(|_| Count::default()), ..Default::default() };
    let mut tag = tag;
    let mut tally = Tally::default();
    let end = offset + size;
    let mut window = offset;
    while window < end {
        let window_end = (window + WINDOW).min(end);
        let read_start = window.saturating_sub(TORN_MARGIN).max(offset);
        let read_end = (window_end + TORN_MARGIN).min(end);
        let found = read_range(source, read_start, read_end, &mut report, window, window_end);
        if tag == 0 {
            tag = found.iter().find_map(|f| if let Found::Stamped(s) = f { Some(s.tag) } else { None }).unwrap_or(0);
        }
        let required = required_generations(&found, read_start, tag);
        let skip = ((window - read_start) / SECTOR as u64) as usize;
        let count = ((window_end - window) / SECTOR as u64) as usize;
        for i in skip..skip + count {
            let lba = read_start / SECTOR as u64 + i as u64;
            let expected = record.and_then(|(gens, base)| {
                let at = (lba * SECTOR as u64).checked_sub(base)? / SECTOR as u64;
                gens.get(at as usize).copied().filter(|&g| g > 0).map(u64::from)
            });
            let verdict = judge(found[i], lba, tag, required[i], expected);
            tally.add(&mut report, verdict, lba, expected, found[i], required[i]);
        }
        window = window_end;
    }
    tally.flush(&mut report);
    report.sectors = size / SECTOR as u64;
    report.tag = tag;
    report.torn.writes = tally.torn_writes.len() as u64;
    report.misdirected.writes = tally.misdirected_writes.len() as u64;
    if let Some(stale) = report.stale.as_mut() {
        stale.writes = tally.stale_writes.len() as u64;
    }
    report
}

fn judge(found: Found, lba: u64, tag: u64, required: u64, expected: Option<u64>) -> Verdict {
    let generation = match found {
        Found::Stamped(s) if s.lba != lba => return Verdict::Misdirected,
        Found::Stamped(s) if s.tag == tag => s.generation,
        // Another program's bytes or another run's stamps: written by someone else, not torn or stale.
        Found::Stamped(_) => return Verdict::OtherRun,
        Found::Foreign => return Verdict::Foreign,
        Found::Unreadable => return Verdict::Unreadable,
        Found::Corrupt => return Verdict::Corrupt,
        Found::Unwritten => 0,
    };
    if generation < required {
        return Verdict::Torn;
    }
    if expected.is_some_and(|e| generation < e) {
        return Verdict::Stale;
    }
    if generation > 0 {
        Verdict::Ok
    } else {
        Verdict::Unwritten
    }
}

/// Read sector verdicts for `[start, end)`; read errors inside `[keep_start, keep_end)` are reported (the
/// margins are reported by the window they belong to).
fn read_range<R: ReadAt>(
    source: &R,
    start: u64,
    end: u64,
    report: &mut VerifyReport,
    keep_start: u64,
    keep_end: u64,
) -> Vec<Found> {
    let mut found = Vec::with_capacity(((end - start) / SECTOR as u64) as usize);
    let buf = crate::buffers::AlignedRegion::new(CHUNK);
    let mut at = start;
    while at < end {
        let len = ((end - at) as usize).min(CHUNK);
        // SAFETY: len <= CHUNK, the region's size, and `buf` is owned here.
        let chunk = unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), len) };
        match source.read_at(chunk, at) {
            Ok(()) => found.extend(chunk.chunks_exact(SECTOR).map(parse)),
            Err(_) => {
                // Narrow the failure down block by block, so each unreadable block is named.
                let block = source.block().max(SECTOR as u64) as usize;
                for piece in (0..len).step_by(block) {
                    let piece_len = block.min(len - piece);
                    let slice = &mut chunk[piece..piece + piece_len];
                    match source.read_at(slice, at + piece as u64) {
                        Ok(()) => found.extend(slice.chunks_exact(SECTOR).map(parse)),
                        Err(e) => {
                            let off = at + piece as u64;
                            if off >= keep_start && off < keep_end {
                                add_read_error(report, off, piece_len as u64, e);
                            }
                            found.extend(std::iter::repeat_n(Found::Unreadable, piece_len / SECTOR));
                        }
                    }
                }
            }
        }
        at += len as u64;
    }
    found
}

fn add_read_error(report: &mut VerifyReport, offset: u64, len: u64, error: io::Error) {
    report.unreadable_sectors += len / SECTOR as u64;
    let message = error.to_string();
    if let Some(last) = report.read_errors.last_mut() {
        if last.offset + last.len == offset && last.error == message {
            last.len += len;
            return;
        }
    }
    if report.read_errors.len() < MAX_MISMATCHES {
        report.read_errors.push(ReadError { offset, len, error: message });
    }
}

/// For each sector, the newest generation of this run whose write claims it (0: none).
fn required_generations(found: &[Found], start: u64, tag: u64) -> Vec<u64> {
    let first_lba = start / SECTOR as u64;
    let mut required = vec![0u64; found.len()];
    let mut previous = None;
    for (i, f) in found.iter().enumerate() {
        let Found::Stamped(s) = f else {
            previous = None;
            continue;
        };
        let lba = first_lba + i as u64;
        if s.tag != tag || s.lba != lba || s.index >= s.sectors {
            previous = None;
            continue;
        }
        // Consecutive sectors of one write claim the same range: apply it once.
        if previous == Some(s.generation) {
            continue;
        }
        previous = Some(s.generation);
        let write_start = (lba - s.index as u64).saturating_sub(first_lba) as usize;
        let write_end = ((lba - s.index as u64 + s.sectors as u64).saturating_sub(first_lba) as usize).min(found.len());
        for r in &mut required[write_start.min(write_end)..write_end] {
            *r = (*r).max(s.generation);
        }
    }
    required
}

/// Counts verdicts and coalesces mismatching sectors into ranges.
#[derive(Default)]
struct Tally {
    open: Option<Mismatch>,
    torn_writes: std::collections::HashSet<u64>,
    stale_writes: std::collections::HashSet<u64>,
    misdirected_writes: std::collections::HashSet<u64>,
}

impl Tally {
    fn add(
        &mut self,
        report: &mut VerifyReport,
        verdict: Verdict,
        lba: u64,
        expected: Option<u64>,
        found: Found,
        required: u64,
    ) {
        let stamp = match found {
            Found::Stamped(s) => Some(s),
            _ => None,
        };
        match verdict {
            Verdict::Ok => report.ok += 1,
            Verdict::Torn => {
                report.torn.sectors += 1;
                // The torn write is the newer one whose other sectors landed.
                self.torn_writes.insert(required);
            }
            Verdict::Stale => {
                if let Some(stale) = report.stale.as_mut() {
                    stale.sectors += 1;
                }
                self.stale_writes.insert(expected.unwrap_or(0));
            }
            Verdict::Misdirected => {
                report.misdirected.sectors += 1;
                self.misdirected_writes.insert(stamp.map_or(0, |s| s.generation));
            }
            Verdict::Corrupt => report.corrupt += 1,
            Verdict::Unwritten => report.unwritten += 1,
            Verdict::Foreign => report.foreign += 1,
            Verdict::OtherRun => report.other_runs += 1,
            Verdict::Unreadable => {}
        }
        // Someone else's data counts as a mismatch where this run's write should be.
        let ours_expected = expected.is_some() || required > 0;
        let mismatch = matches!(verdict, Verdict::Torn | Verdict::Stale | Verdict::Misdirected | Verdict::Corrupt)
            || (ours_expected && matches!(verdict, Verdict::Foreign | Verdict::OtherRun));
        if !mismatch {
            self.flush(report);
            return;
        }
        if matches!(verdict, Verdict::Foreign | Verdict::OtherRun) {
            report.overwritten += 1;
        }
        let offset = lba * SECTOR as u64;
        if let Some(open) = self.open.as_mut() {
            let same_write = open.found.map(|s| (s.tag, s.generation)) == stamp.map(|s| (s.tag, s.generation));
            if open.kind == verdict.name()
                && open.offset + open.len == offset
                && open.expected_generation == expected
                && same_write
            {
                open.len += SECTOR as u64;
                return;
            }
        }
        self.flush(report);
        self.open = Some(Mismatch {
            kind: verdict.name(),
            offset,
            len: SECTOR as u64,
            expected_generation: expected,
            found: stamp,
        });
    }

    fn flush(&mut self, report: &mut VerifyReport) {
        if let Some(m) = self.open.take() {
            report.mismatches_total += 1;
            if report.mismatches.len() < MAX_MISMATCHES {
                report.mismatches.push(m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target in memory, with blocks that fail to read.
    struct Fake {
        data: Vec<u8>,
        bad: Option<std::ops::Range<u64>>,
    }

    impl ReadAt for Fake {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            let end = offset + buf.len() as u64;
            if self.bad.iter().any(|r| r.start < end && offset < r.end) {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            buf.copy_from_slice(&self.data[offset as usize..end as usize]);
            Ok(())
        }
        fn block(&self) -> u64 {
            4096
        }
    }

    const TAG: u64 = 0xfeed;

    /// 64 KiB written as 16 writes of 4 KiB (generations 1..=16), with its write record.
    fn written() -> (Fake, Vec<u32>) {
        let mut data = vec![0u8; 64 << 10];
        let record = WriteRecord::new(0, data.len() as u64).unwrap();
        for (i, chunk) in data.chunks_exact_mut(4096).enumerate() {
            stamp_write(chunk, i as u64 * 4096, TAG, i as u64 + 1);
            record.record(i as u64 * 4096, 4096, i as u64 + 1);
        }
        (Fake { data, bad: None }, record.snapshot())
    }

    fn run(fake: &Fake, record: &[u32]) -> VerifyReport {
        verify(fake, 0, fake.data.len() as u64, TAG, Some((record, 0)))
    }

    #[test]
    fn a_clean_target_verifies_clean() {
        let (fake, record) = written();
        let r = run(&fake, &record);
        assert_eq!((r.ok, r.sectors, r.mismatches_total, r.corrupt), (128, 128, 0, 0));
        assert_eq!((r.torn.sectors, r.misdirected.sectors, r.stale.unwrap().sectors), (0, 0, 0));
    }

    #[test]
    fn another_lbas_stamp_is_a_misdirected_write() {
        let (mut fake, record) = written();
        // Write 3 (LBAs 16..24) lands on top of write 6 (LBAs 48..56) as well.
        let (src, dst) = (2 * 4096, 5 * 4096);
        let copy = fake.data[src..src + 4096].to_vec();
        fake.data[dst..dst + 4096].copy_from_slice(&copy);
        let r = run(&fake, &record);
        assert_eq!((r.misdirected.sectors, r.misdirected.writes), (8, 1));
        assert_eq!(r.stale.unwrap().sectors, 0);
        let m = &r.mismatches[0];
        assert_eq!((m.kind, m.offset, m.len, m.expected_generation), ("misdirected", dst as u64, 4096, Some(6)));
        assert_eq!(m.found.unwrap().lba, 16);
    }

    #[test]
    fn an_older_generation_is_a_stale_write_and_half_a_write_is_torn() {
        let (mut fake, mut record) = written();
        // Write 17 rewrote LBAs 0..8 but never reached the target (the record says it completed).
        for r in &mut record[0..8] {
            *r = 17;
        }
        // Write 18 rewrote LBAs 8..16 and only its first half landed.
        let mut newer = vec![0u8; 4096];
        stamp_write(&mut newer, 4096, TAG, 18);
        fake.data[4096..4096 + 2048].copy_from_slice(&newer[..2048]);
        for r in &mut record[8..16] {
            *r = 18;
        }
        let r = run(&fake, &record);
        let stale = r.stale.clone().unwrap();
        assert_eq!((stale.sectors, stale.writes), (8, 1));
        assert_eq!((r.torn.sectors, r.torn.writes), (4, 1));
        assert_eq!(r.ok, 128 - 8 - 4);
        assert_eq!(r.mismatches.iter().map(|m| m.kind).collect::<Vec<_>>(), ["stale", "torn"]);
        assert_eq!(r.mismatches[1].offset, 4096 + 2048);
    }

    #[test]
    fn torn_writes_are_found_without_a_record() {
        let (mut fake, _) = written();
        let mut newer = vec![0u8; 8192];
        stamp_write(&mut newer, 4096, TAG, 30);
        fake.data[4096 + 512..4096 + 8192].copy_from_slice(&newer[512..]);
        let r = verify(&fake, 0, fake.data.len() as u64, 0, None);
        assert_eq!(r.tag, TAG, "the tag is learnt from the first stamp");
        assert!(r.stale.is_none());
        assert_eq!((r.torn.sectors, r.torn.writes), (1, 1));
        assert_eq!(r.mismatches[0].offset, 4096);
    }

    #[test]
    fn a_flipped_bit_is_corrupt_and_read_errors_name_their_offset() {
        let (mut fake, record) = written();
        fake.data[7 * 512 + 100] ^= 1;
        fake.bad = Some(40960..40960 + 512);
        let r = run(&fake, &record);
        assert_eq!(r.corrupt, 1);
        assert_eq!(r.unreadable_sectors, 8);
        assert_eq!(r.read_errors.len(), 1);
        assert_eq!((r.read_errors[0].offset, r.read_errors[0].len), (40960, 4096));
        assert!(r.read_errors[0].error.contains("Input/output error"), "{}", r.read_errors[0].error);
        assert_eq!(r.ok, 128 - 1 - 8);
    }

    #[test]
    fn other_data_is_counted_not_judged() {
        let (mut fake, _) = written();
        fake.data[0..512].fill(0x5a);
        let mut other = vec![0u8; 4096];
        stamp_write(&mut other, 4096, TAG + 1, 1);
        fake.data[4096..8192].copy_from_slice(&other);
        fake.data[8192..12288].fill(0);
        let r = verify(&fake, 0, fake.data.len() as u64, TAG, None);
        assert_eq!((r.foreign, r.other_runs, r.unwritten, r.torn.sectors), (1, 8, 8, 0));
        // Inside a write of this run someone else's data is a mismatch; without a record, a write replaced
        // whole is not known to be this run's.
        assert_eq!(r.mismatches.iter().map(|m| (m.kind, m.len)).collect::<Vec<_>>(), [("foreign", 512)]);
        let (_, record) = written();
        let r = verify(&fake, 0, fake.data.len() as u64, TAG, Some((&record, 0)));
        let kinds = r.mismatches.iter().map(|m| (m.kind, m.len)).collect::<Vec<_>>();
        assert_eq!(kinds, [("foreign", 512), ("other_run", 4096), ("stale", 4096)]);
    }
}
