//! Backends: how requests reach the target. One engine loop drives every backend; a backend owns its
//! clock, so real targets run on calibrated real time and the simulated device (a later backend) on its
//! virtual clock.

use std::io;

use crate::workload::Op;

pub mod pool;
pub mod psync;
pub mod uring;

/// One request, ready to go.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    /// Data source (writes) or destination (reads); inside the queue's registered region.
    pub addr: *mut u8,
}

/// What a backend reports while it submits and completes.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// The request in `slot` was handed to the kernel (or device) at `at_ns`.
    Submitted { slot: u32, at_ns: u64 },
    /// The request in `slot` finished at `at_ns` with `result` (bytes, or `-errno`).
    Completed { slot: u32, result: i32, at_ns: u64 },
}

pub trait Backend {
    /// "io_uring", "psync", ...
    fn name(&self) -> &'static str;

    /// A hint: a request for `len` bytes at `offset` will be pushed a few requests from now. A backend
    /// may start preparing for it; it must not change what any request does or measures.
    #[inline]
    fn coming(&mut self, _op: Op, _offset: u64, _len: u32) {}

    /// Queue the request for `slot`. Nothing reaches the target before [`Backend::submit_and_wait`].
    fn push(&mut self, slot: u32, request: Request);

    /// Whether the queue should submit each request as soon as it is pushed (`submit_and_wait(0, ..)`)
    /// rather than all the free slots' requests in one call. Where the kernel issues a submission's
    /// requests one after another in the caller's context (io_uring), a call carrying 32 requests hands
    /// the last one to the device tens of microseconds after its submit stamp, and the queue sees no
    /// completion meanwhile; one request per call keeps every stamp right at its submission.
    #[inline]
    fn submits_each(&self) -> bool {
        false
    }

    /// Submit what was pushed, then wait until at least `min_complete` requests have completed or
    /// `timeout_ns` has passed; report every submission and completion through `on_event`, with
    /// timestamps taken right at submission and right when the completion is seen.
    fn submit_and_wait<F: FnMut(Event)>(&mut self, min_complete: u32, timeout_ns: u64, on_event: F) -> io::Result<()>;

    /// The backend's clock, in ns.
    fn now(&self) -> u64;

    /// Let `ns` pass with nothing outstanding (an idle gap between batches).
    fn idle(&mut self, ns: u64);

    /// Try to cancel everything in flight (after a time-out). Returns whether nothing is in flight now.
    fn cancel_all(&mut self) -> bool;
}
