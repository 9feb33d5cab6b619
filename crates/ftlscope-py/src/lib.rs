//! `ftlscope._native`: the engine, seen from Python.
//!
//! A handful of functions and one class. Everything crosses the boundary as JSON text or as raw column
//! bytes (for the trace), so the Python side stays in charge of presentation (pandas, Parquet).

mod attach;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ftlscope_engine::engine::{EngineError, Run, RunOptions, RunResult};
use ftlscope_engine::health::open_health_source;
use ftlscope_engine::replay::{Feeder, Mode, Replay, ReplayError, Timing};
use ftlscope_engine::stats::{Trace, TraceChunks};
use ftlscope_engine::target::{Target, TargetError};
use ftlscope_engine::workload::Workload;
use ftlscope_engine::SimTarget;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::{json, Value};

pyo3::create_exception!(_native, TargetOpenError, PyOSError, "The target could not be opened.");
pyo3::create_exception!(_native, WorkloadInvalid, PyValueError, "The workload does not fit the target.");
pyo3::create_exception!(_native, ConfigInvalid, PyValueError, "A simulated device's configuration is broken.");

fn target_err(e: TargetError) -> PyErr {
    TargetOpenError::new_err(e.to_string())
}

fn engine_err(e: EngineError) -> PyErr {
    match &e {
        EngineError::Workload(_) | EngineError::Options { .. } | EngineError::Replay(_) => {
            WorkloadInvalid::new_err(e.to_string())
        }
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("engine types serialise")
}

/// Open `path` and describe it (size, block sizes, kind) as JSON.
#[pyfunction]
#[pyo3(signature = (path, writable=false, direct=true))]
fn target_info(path: &str, writable: bool, direct: bool) -> PyResult<String> {
    let target = Target::open(Path::new(path), writable, direct).map_err(target_err)?;
    Ok(to_json(&target.info))
}

/// Check a workload JSON and return it normalised (all defaults filled in).
#[pyfunction]
fn normalise_workload(workload_json: &str) -> PyResult<String> {
    let workload = Workload::from_json(workload_json).map_err(|e| WorkloadInvalid::new_err(e.to_string()))?;
    Ok(workload.to_json())
}

/// One health sample of the device behind `path`, or the reason there is none, as JSON.
#[pyfunction]
fn health_snapshot(path: &str) -> String {
    match open_health_source(Path::new(path)) {
        Ok(mut source) => match source.sample() {
            Ok(sample) => to_json(&json!({"available": true, "source": source.name(), "sample": sample})),
            Err(e) => to_json(&json!({"available": false, "reason": e.to_string()})),
        },
        Err(unavailable) => to_json(&json!({"available": false, "reason": unavailable.to_string()})),
    }
}

/// A simulated device whose state (data, buffers, caches, wear, virtual clock) persists across runs.
#[pyclass(module = "ftlscope._native")]
struct SimDevice {
    target: Arc<Mutex<SimTarget>>,
    config_toml: String,
}

#[pymethods]
impl SimDevice {
    /// `spec`: a preset name or a path to a device TOML file.
    #[new]
    fn new(spec: &str) -> PyResult<Self> {
        let cfg = ftlscope_sim::device::open(spec).map_err(|e| ConfigInvalid::new_err(e.to_string()))?;
        let config_toml = ftlscope_sim::parse::to_toml(&cfg);
        let name = cfg.device.name.clone();
        let device = ftlscope_sim::device::build(cfg);
        Ok(SimDevice { target: Arc::new(Mutex::new(SimTarget::new(name, device))), config_toml })
    }

    /// The device as TOML (every key, defaults filled in).
    fn config_toml(&self) -> String {
        self.config_toml.clone()
    }

    /// Size, block sizes and name, as JSON (like `target_info`).
    fn info(&self) -> String {
        to_json(&self.target.lock().expect("device lock").info())
    }

    /// Virtual time in ns since the device was created.
    #[getter]
    fn now_ns(&self) -> u64 {
        self.target.lock().expect("device lock").now.ns()
    }

    /// Let `ns` of virtual time pass with the device idle (buffers drain, SLC folds).
    fn idle(&self, ns: u64) {
        self.target.lock().expect("device lock").idle(ns);
    }

    /// Controller reset: caches are kept. Returns the virtual ns it took.
    fn controller_reset(&self) -> u64 {
        let mut t = self.target.lock().expect("device lock");
        let start = t.now;
        let ready = t.device.controller_reset(start);
        t.now = ready;
        (ready - start).0
    }

    /// Power cycle: buffers are flushed, caches emptied. Returns the virtual ns it took.
    fn power_cycle(&self) -> u64 {
        let mut t = self.target.lock().expect("device lock");
        let start = t.now;
        let ready = t.device.power_cycle(start);
        t.now = ready;
        (ready - start).0
    }

    /// The counters a SMART log would hold, as a health sample (JSON).
    fn health(&self) -> String {
        to_json(&self.target.lock().expect("device lock").health_sample())
    }

    /// Bytes of mapping state the model has allocated (L2P + P2L), and the logical pages it maps.
    fn mapping_bytes(&self) -> (u64, u64) {
        let t = self.target.lock().expect("device lock");
        let pages = t.device.capacity_bytes().div_ceil(t.device.content_granularity());
        (t.device.mapping_bytes(), pages)
    }

    /// The read-back pass of a verify run on this device: `[offset, offset + size)` read through the model
    /// (its `[faults]` fail reads as on a real drive) and checked against the run's write record. JSON.
    #[pyo3(signature = (offset, size, tag, record=None))]
    fn verify(&self, py: Python<'_>, offset: u64, size: u64, tag: u64, record: Option<&[u8]>) -> PyResult<String> {
        use ftlscope_engine::sim_driver::SimSource;
        use ftlscope_engine::verify::{verify, SECTOR};
        let generations: Option<Vec<u32>> = record
            .map(|bytes| bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect());
        let target = Arc::clone(&self.target);
        let report = py.allow_threads(move || {
            let mut t = target.lock().expect("device lock");
            if !offset.is_multiple_of(SECTOR as u64) || !size.is_multiple_of(SECTOR as u64) {
                return Err(format!("verify range: offset {offset} and size {size} must be multiples of 512 B"));
            }
            if offset.saturating_add(size) > t.device.capacity_bytes() {
                return Err(format!("verify range: {offset} + {size} B goes past the end of the simulated device"));
            }
            let source = SimSource::new(&mut t, tag);
            Ok(verify(&source, offset, size, tag, generations.as_deref().map(|g| (g, 0))))
        });
        report.map(|r| to_json(&r)).map_err(PyValueError::new_err)
    }

    /// What logical page `lpn` holds: "unwritten", "zeroes" or the data fingerprint.
    fn content(&self, lpn: u64) -> String {
        use ftlscope_sim::device::PageContent;
        match self.target.lock().expect("device lock").device.content(lpn) {
            PageContent::Unwritten => "unwritten".into(),
            PageContent::Zeroes => "zeroes".into(),
            PageContent::Data(fp) => format!("{fp:08x}"),
        }
    }
}

/// The built-in presets as JSON: [{"name", "summary"}].
#[pyfunction]
fn sim_presets() -> String {
    let list: Vec<Value> = ftlscope_sim::presets::names()
        .into_iter()
        .map(|name| json!({"name": name, "summary": ftlscope_sim::presets::describe(name)}))
        .collect();
    to_json(&list)
}

/// One preset (or device file) as TOML, with every key.
#[pyfunction]
fn sim_show(spec: &str) -> PyResult<String> {
    let cfg = ftlscope_sim::device::open(spec).map_err(|e| ConfigInvalid::new_err(e.to_string()))?;
    Ok(ftlscope_sim::parse::to_toml(&cfg))
}

/// A run in progress. Start it with `RunHandle(path, workload_json, options_json, writable, direct)`.
#[pyclass(module = "ftlscope._native")]
struct RunHandle {
    run: Mutex<Option<Run>>,
    result: Mutex<Option<RunResult>>,
    env_json: String,
    /// The streamed trace (run option `trace_chunk_rows`), drained by `next_trace_chunk`.
    trace_chunks: Mutex<Option<TraceChunks>>,
}

impl RunHandle {
    fn started(mut run: Run) -> RunHandle {
        let env_json = to_json(run.env());
        let trace_chunks = Mutex::new(run.take_trace_chunks());
        RunHandle { run: Mutex::new(Some(run)), result: Mutex::new(None), env_json, trace_chunks }
    }
}

fn summary_json(result: &RunResult) -> Value {
    let mut summary = json!({
        "target": result.target,
        "workload": result.workload,
        "options": result.options,
        "engine": result.env,
        "health": result.health,
        "run": {
            "stop": result.stop_reason,
            "measured_ns": result.stats.measured_ns,
            "wall_ns": result.wall_ns,
            "virtual_ns": result.virtual_ns,
            "mean_in_flight": result.stats.mean_in_flight(),
            "warmup_ops": result.stats.warmup_ops,
            "errors": result.stats.error_count,
            "error_samples": result.stats.errors,
            "queues": result.queues,
            "t0_monotonic_raw_ns": result.t0_ns,
            "write_amplification": result.health.write_amplification(),
        },
    });
    for (op, s) in &result.stats.per_op {
        summary[*op] = serde_json::to_value(s).expect("summary serialises");
    }
    if let Some(shim) = &result.write_shim {
        summary["write_shim"] = serde_json::to_value(shim).expect("summary serialises");
        summary["write_shim"]["mean_delay_ns"] = json!(shim.mean_delay_ns());
        let (held, free) = shim.read_geomean_ns();
        summary["write_shim"]["read_geomean_held_ns"] = json!(held);
        summary["write_shim"]["read_geomean_free_ns"] = json!(free);
    }
    if let Some(lag) = &result.stats.issue_lag_ns {
        summary["run"]["issue_lag_ns"] = serde_json::to_value(lag).expect("summary serialises");
    }
    summary
}

/// Little-endian column bytes as values (numpy's `tobytes()` on this machine's byte order).
fn column<T, const N: usize>(name: &str, bytes: &[u8], from: fn([u8; N]) -> T) -> PyResult<Vec<T>> {
    if !bytes.len().is_multiple_of(N) {
        return Err(PyValueError::new_err(format!(
            "replay column {name}: {} bytes is not a whole number of values",
            bytes.len()
        )));
    }
    Ok(bytes.chunks_exact(N).map(|c| from(c.try_into().expect("N bytes"))).collect())
}

/// A trace to replay, as one dict: its columns as bytes, arrival times (`arrival`, u64 ns), operations (`op`, u8
/// indices of ftlscope's operations), offsets (`offset`, u64), lengths (`size`, u32); `timing` "faithful", "afap"
/// or "scaled:F"; `mode` "open" or "closed"; `feed` a streamed trace's [`ReplayFeed`] (or None), which takes the
/// place of the columns (empty then); `queues` how many queues the trace is split over and `queue` (u16) each
/// request's queue (absent for one). Parsed once, for the file and the simulated replay alike.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct TraceColumns<'py> {
    arrival: Bound<'py, PyBytes>,
    op: Bound<'py, PyBytes>,
    offset: Bound<'py, PyBytes>,
    size: Bound<'py, PyBytes>,
    timing: String,
    mode: String,
    feed: Option<Bound<'py, ReplayFeed>>,
    #[pyo3(default)]
    queue: Option<Bound<'py, PyBytes>>,
    #[pyo3(default)]
    queues: Option<u32>,
}

impl TraceColumns<'_> {
    fn replay(&self) -> PyResult<Arc<Replay>> {
        if let Some(feed) = &self.feed {
            return feed
                .borrow()
                .replay
                .lock()
                .expect("replay feed lock")
                .take()
                .ok_or_else(|| PyValueError::new_err("this replay feed has been used by a run already"));
        }
        let (timing, mode) = replay_timing(&self.timing, &self.mode)?;
        let arrival = column("arrival", self.arrival.as_bytes(), u64::from_le_bytes)?;
        let offset = column("offset", self.offset.as_bytes(), u64::from_le_bytes)?;
        let size = column("size", self.size.as_bytes(), u32::from_le_bytes)?;
        let invalid = |e: ReplayError| WorkloadInvalid::new_err(e.to_string());
        let mut replay = Replay::new(&arrival, self.op.as_bytes(), &offset, &size, timing, mode).map_err(invalid)?;
        let queues = self.queues.unwrap_or(1);
        if queues > 1 {
            let queue_of = column("queue", self.queue.as_ref().map_or(&[][..], |b| b.as_bytes()), u16::from_le_bytes)?;
            replay = replay.split(&queue_of, queues).map_err(invalid)?;
        }
        Ok(Arc::new(replay))
    }
}

/// `timing` "faithful", "afap" or "scaled:F"; `mode` "open" or "closed".
fn replay_timing(timing: &str, mode: &str) -> PyResult<(Timing, Mode)> {
    let timing = match timing {
        "faithful" => Timing::Faithful,
        "afap" => Timing::Afap,
        other => match other.strip_prefix("scaled:").map(str::parse::<f64>) {
            Some(Ok(factor)) => Timing::Scaled(factor),
            _ => {
                return Err(WorkloadInvalid::new_err(format!(
                    "replay timing `{other}`: use faithful, afap or scaled:F"
                )))
            }
        },
    };
    let mode = match mode {
        "open" => Mode::Open,
        "closed" => Mode::Closed,
        other => return Err(WorkloadInvalid::new_err(format!("replay mode `{other}`: use open or closed"))),
    };
    Ok((timing, mode))
}

/// A trace replayed while it is read (``ftlscope.replay`` reads a long trace in batches): made from what a first
/// pass over the trace found, handed to a replay run in place of the columns, then fed batch by batch from
/// another thread with ``push`` (which waits for room: a few batches are held at most). Split over several
/// queues (``requests`` a list, one count per queue, and ``origin`` the trace's first arrival), each queue has a
/// feed of its own, pushed from a thread of its own (``push(..., queue=q)``): one queue's push waiting for room
/// never holds up another's.
#[pyclass(module = "ftlscope._native")]
struct ReplayFeed {
    replay: Mutex<Option<Arc<Replay>>>,
    feeders: Vec<Mutex<Option<Feeder>>>,
}

impl ReplayFeed {
    fn feeder(&self, queue: usize) -> PyResult<&Mutex<Option<Feeder>>> {
        self.feeders.get(queue).ok_or_else(|| {
            PyValueError::new_err(format!("queue {queue}: this feed has {} queue(s)", self.feeders.len()))
        })
    }
}

#[pymethods]
impl ReplayFeed {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (requests, max_len, ops, target_size, alignment, timing, mode, origin=None))]
    fn new(
        requests: Vec<u64>,
        max_len: u64,
        ops: &[u8],
        target_size: u64,
        alignment: u64,
        timing: &str,
        mode: &str,
        origin: Option<u64>,
    ) -> PyResult<Self> {
        let (timing, mode) = replay_timing(timing, mode)?;
        let (replay, feeders) =
            Replay::streamed_split(&requests, origin, max_len, ops, (target_size, alignment), timing, mode)
                .map_err(|e| WorkloadInvalid::new_err(e.to_string()))?;
        Ok(ReplayFeed {
            replay: Mutex::new(Some(Arc::new(replay))),
            feeders: feeders.into_iter().map(|f| Mutex::new(Some(f))).collect(),
        })
    }

    /// Push queue ``queue``'s next batch (the columns as bytes, as for a whole replay), waiting without the GIL
    /// for room. False when the replay takes no more (it stopped early, or the feed was closed).
    #[pyo3(signature = (arrival, op, offset, size, queue=0))]
    fn push(
        &self,
        py: Python<'_>,
        arrival: &[u8],
        op: &[u8],
        offset: &[u8],
        size: &[u8],
        queue: usize,
    ) -> PyResult<bool> {
        let mut guard = self.feeder(queue)?.lock().expect("replay feeder lock");
        let Some(feeder) = guard.as_mut() else {
            return Ok(false);
        };
        py.allow_threads(|| feeder.push(arrival, op, offset, size)).map_err(|e| WorkloadInvalid::new_err(e.to_string()))
    }

    /// The end of queue ``queue``'s part of the trace (every queue's with None): the replay finishes once it has
    /// issued what was pushed.
    #[pyo3(signature = (queue=None))]
    fn close(&self, queue: Option<usize>) -> PyResult<()> {
        match queue {
            Some(q) => {
                self.feeder(q)?.lock().expect("replay feeder lock").take();
            }
            None => {
                for feeder in &self.feeders {
                    feeder.lock().expect("replay feeder lock").take();
                }
            }
        }
        Ok(())
    }

    /// Give up a feed no run took (the run failed to start): a ``push`` waiting for room returns False.
    fn abandon(&self) {
        self.replay.lock().expect("replay feed lock").take();
    }

    /// Requests pushed so far (every queue's).
    fn pushed(&self) -> u64 {
        self.feeders.iter().map(|f| f.lock().expect("replay feeder lock").as_ref().map_or(0, Feeder::pushed)).sum()
    }
}

fn column_bytes<'py, T: Copy>(py: Python<'py>, column: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: T is a plain integer/bool type; viewing its memory as bytes is sound.
    let bytes = unsafe { std::slice::from_raw_parts(column.as_ptr().cast::<u8>(), std::mem::size_of_val(column)) };
    PyBytes::new(py, bytes)
}

/// A run's workload and options from their JSON, each error named for what it came from.
fn run_inputs(workload_json: &str, options_json: &str) -> PyResult<(Workload, RunOptions)> {
    let workload = Workload::from_json(workload_json).map_err(|e| WorkloadInvalid::new_err(e.to_string()))?;
    let options: RunOptions =
        serde_json::from_str(options_json).map_err(|e| PyValueError::new_err(format!("run options: {e}")))?;
    Ok((workload, options))
}

fn trace_dict<'py>(py: Python<'py>, trace: &Trace) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, bytes) in trace.columns() {
        d.set_item(name, PyBytes::new(py, bytes))?;
    }
    d.set_item("dropped", trace.dropped)?;
    Ok(d)
}

#[pymethods]
impl RunHandle {
    #[new]
    #[pyo3(signature = (path, workload_json, options_json="{}", writable=false, direct=true))]
    fn new(
        py: Python<'_>,
        path: &str,
        workload_json: &str,
        options_json: &str,
        writable: bool,
        direct: bool,
    ) -> PyResult<Self> {
        let (workload, options) = run_inputs(workload_json, options_json)?;
        let target = Target::open(Path::new(path), writable, direct).map_err(target_err)?;
        let run = py.allow_threads(|| Run::start(target, workload, options)).map_err(engine_err)?;
        Ok(RunHandle::started(run))
    }

    /// Start a run on a simulated device (its state carries over from earlier runs).
    #[staticmethod]
    #[pyo3(signature = (device, workload_json, options_json="{}"))]
    fn sim(py: Python<'_>, device: &SimDevice, workload_json: &str, options_json: &str) -> PyResult<Self> {
        let (workload, options) = run_inputs(workload_json, options_json)?;
        let target = Arc::clone(&device.target);
        let run = py.allow_threads(|| Run::start_sim(target, workload, options)).map_err(engine_err)?;
        Ok(RunHandle::started(run))
    }

    /// Replay a trace on `path` (see `TraceColumns`); the workload gives the queue depth, the data written and
    /// the mix (which operations the trace holds); the options are a run's (the write shim among them).
    #[staticmethod]
    #[pyo3(signature = (path, workload_json, options_json, writable, direct, trace))]
    fn replay(
        py: Python<'_>,
        path: &str,
        workload_json: &str,
        options_json: &str,
        writable: bool,
        direct: bool,
        trace: TraceColumns<'_>,
    ) -> PyResult<Self> {
        let (workload, options) = run_inputs(workload_json, options_json)?;
        let replay = trace.replay()?;
        let target = Target::open(Path::new(path), writable, direct).map_err(target_err)?;
        let run =
            py.allow_threads(|| Run::start_replay(target, workload, options, Some(replay))).map_err(engine_err)?;
        Ok(RunHandle::started(run))
    }

    /// Replay a trace on a simulated device (see `replay`).
    #[staticmethod]
    #[pyo3(signature = (device, workload_json, options_json, trace))]
    fn sim_replay(
        py: Python<'_>,
        device: &SimDevice,
        workload_json: &str,
        options_json: &str,
        trace: TraceColumns<'_>,
    ) -> PyResult<Self> {
        let (workload, options) = run_inputs(workload_json, options_json)?;
        let replay = trace.replay()?;
        let target = Arc::clone(&device.target);
        let run =
            py.allow_threads(|| Run::start_sim_replay(target, workload, options, Some(replay))).map_err(engine_err)?;
        Ok(RunHandle::started(run))
    }

    /// {"ops", "bytes", "errors", "elapsed_ns", "device_ns", "finished"}
    fn progress(&self) -> PyResult<String> {
        let guard = self.run.lock().expect("run lock");
        match guard.as_ref() {
            Some(run) => Ok(to_json(&run.progress())),
            None => Ok(r#"{"finished": true}"#.to_string()),
        }
    }

    /// How the engine was set up (backend, clock, pinning), as JSON.
    fn engine_env(&self) -> String {
        self.env_json.clone()
    }

    /// The streamed trace's next chunk (the columns as `result()["trace"]` has them), waiting for it without
    /// holding the GIL; None once the last chunk was handed out (the run has ended) or the stream is closed.
    fn next_trace_chunk<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Out of the lock while waiting: the receiver cannot be shared across threads, and nothing else needs it.
        let Some(chunks) = self.trace_chunks.lock().expect("trace chunks lock").take() else {
            return Ok(None);
        };
        let (chunks, next) = py.allow_threads(move || {
            let next = chunks.full.recv().ok();
            (chunks, next)
        });
        let Some(mut chunk) = next else {
            return Ok(None);
        };
        let d = trace_dict(py, &chunk)?;
        chunk.clear();
        // The aggregator may have finished and gone: then nobody needs the chunk back.
        let _ = chunks.empty.send(chunk);
        *self.trace_chunks.lock().expect("trace chunks lock") = Some(chunks);
        Ok(Some(d))
    }

    /// Stop streaming the trace (its writer failed): the run goes on, its records are no longer handed out.
    fn close_trace_stream(&self) {
        drop(self.trace_chunks.lock().expect("trace chunks lock").take());
    }

    /// Ask the run to stop; what was measured is kept.
    fn stop(&self) {
        if let Some(run) = self.run.lock().expect("run lock").as_ref() {
            run.request_stop();
        }
    }

    /// Wait up to `timeout` seconds (None = until the end); True when the run has ended.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> bool {
        // Blocks on the run's end signal rather than polling (a poll's wake-ups may land on a queue's CPU and
        // preempt it: engine::Ended), and outside the run's lock, so `progress` and `stop` still answer meanwhile.
        let Some((ended, threads)) =
            self.run.lock().expect("run lock").as_ref().map(|run| (run.ended(), run.worker_count()))
        else {
            return true;
        };
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.allow_threads(|| ended.wait(threads, timeout))
    }

    /// Join the run (waiting for it) and return {"summary": json, "windows": json rows, "trace": columns}.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let run = self.run.lock().expect("run lock").take();
        if let Some(run) = run {
            let result = py.allow_threads(|| run.join());
            *self.result.lock().expect("result lock") = Some(result);
        }
        let guard = self.result.lock().expect("result lock");
        let result = guard.as_ref().ok_or_else(|| PyRuntimeError::new_err("no result"))?;
        let d = PyDict::new(py);
        d.set_item("summary", summary_json(result).to_string())?;
        d.set_item("windows", to_json(&result.stats.windows))?;
        d.set_item("trace_stream_dropped", result.stats.stream_dropped)?;
        match &result.stats.trace {
            Some(trace) => d.set_item("trace", trace_dict(py, trace)?)?,
            None => d.set_item("trace", py.None())?,
        }
        match &result.write_record {
            Some((generations, last)) => {
                d.set_item("write_record", column_bytes(py, generations))?;
                d.set_item("last_generation", *last)?;
            }
            None => d.set_item("write_record", py.None())?,
        }
        Ok(d)
    }
}

/// Read `[offset, offset + size)` of `path` back and check the verify stamps of the run tagged `tag`;
/// `record` is that run's write record (little-endian u32 generations per 512 B sector from offset 0).
/// Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (path, offset, size, tag, record=None, direct=true))]
fn verify_target(
    py: Python<'_>,
    path: &str,
    offset: u64,
    size: u64,
    tag: u64,
    record: Option<&[u8]>,
    direct: bool,
) -> PyResult<String> {
    use ftlscope_engine::verify::{verify, FileSource, SECTOR};
    let target = Target::open(Path::new(path), false, direct).map_err(target_err)?;
    let block = target.info.logical_block_size.max(SECTOR as u64);
    if !offset.is_multiple_of(block) || !size.is_multiple_of(block) {
        return Err(PyValueError::new_err(format!(
            "verify range: offset {offset} and size {size} must be multiples of the {block} B block size"
        )));
    }
    if offset.saturating_add(size) > target.info.size_bytes {
        return Err(PyValueError::new_err(format!(
            "verify range: {offset} + {size} B goes past the end of the target ({} B)",
            target.info.size_bytes
        )));
    }
    let generations: Option<Vec<u32>> =
        record.map(|bytes| bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect());
    let source = FileSource { file: &target.file, block };
    let report = py.allow_threads(|| verify(&source, offset, size, tag, generations.as_deref().map(|g| (g, 0))));
    Ok(to_json(&report))
}

/// The bytes a verify run writes for a write of `length` bytes at `offset` with `generation` (for tests
/// and tools that need to reproduce a stamp, e.g. an older generation of a sector).
#[pyfunction]
fn verify_stamp<'py>(py: Python<'py>, offset: u64, length: usize, tag: u64, generation: u64) -> Bound<'py, PyBytes> {
    let mut buf = vec![0u8; length / ftlscope_engine::verify::SECTOR * ftlscope_engine::verify::SECTOR];
    ftlscope_engine::verify::stamp_write(&mut buf, offset, tag, generation);
    PyBytes::new(py, &buf)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("TargetOpenError", m.py().get_type::<TargetOpenError>())?;
    m.add("WorkloadInvalid", m.py().get_type::<WorkloadInvalid>())?;
    m.add_function(wrap_pyfunction!(target_info, m)?)?;
    m.add_function(wrap_pyfunction!(normalise_workload, m)?)?;
    m.add_function(wrap_pyfunction!(health_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(verify_target, m)?)?;
    m.add_function(wrap_pyfunction!(verify_stamp, m)?)?;
    m.add("ConfigInvalid", m.py().get_type::<ConfigInvalid>())?;
    m.add_function(wrap_pyfunction!(sim_presets, m)?)?;
    m.add_function(wrap_pyfunction!(sim_show, m)?)?;
    m.add_class::<SimDevice>()?;
    m.add_class::<RunHandle>()?;
    m.add_class::<ReplayFeed>()?;
    m.add_class::<attach::AttachedDrive>()?;
    Ok(())
}
