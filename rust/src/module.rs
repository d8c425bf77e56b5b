//! The Python module `traceview._core` (built with the `python` feature).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{cpu, inflate, pool, scan, spans};

/// The GPU row columns the scanner fills, in traceview/columns/schema.py's GPU_COLUMNS order
/// with its dtypes (a test checks them against it): names, streams and launches are ids
/// into the chunk's own tables until the Python side interns them.
pub const GPU_COLUMNS: [(&str, &str); 7] = [
    ("kind", "<i1"),
    ("name", "<i4"),
    ("stream", "<i4"),
    ("ts", "<i8"),
    ("dur", "<i8"),
    ("correlation", "<i8"),
    ("launch", "<i4"),
];
/// The runtime columns (schema.py's RUNTIME_COLUMNS) and what the collector needs beside
/// them: every call's dur, and with CPU rows its name and thread (chunk table ids).
pub const RUNTIME_COLUMNS: [(&str, &str); 5] = [
    ("correlation", "<i8"),
    ("ts", "<i8"),
    ("dur", "<i8"),
    ("name", "<i4"),
    ("thread", "<i4"),
];

/// The CPU rows of CPU ops and step-marker frames: schema.py's CPU_COLUMNS (thread, name and
/// shape ids into the chunk's `op_threads`, `op_names` and `shapes`).
pub const OP_COLUMNS: [(&str, &str); 6] = [
    ("thread", "<i4"),
    ("name", "<i4"),
    ("ts", "<i8"),
    ("end", "<i8"),
    ("correlation", "<i8"),
    ("shape", "<i4"),
];
/// The python frames' rows: schema.py's FRAME_COLUMNS (ids into `frame_threads`,
/// `frame_names`).
pub const FRAME_COLUMNS: [(&str, &str); 6] = [
    ("thread", "<i4"),
    ("name", "<i4"),
    ("ts", "<i8"),
    ("end", "<i8"),
    ("python_id", "<i8"),
    ("python_parent", "<i8"),
];
/// The fwdbwd flows' rows: schema.py's FLOW_COLUMNS (thread ids into `flow_threads`).
pub const FLOW_COLUMNS: [(&str, &str); 4] = [
    ("flow", "<i8"),
    ("thread", "<i4"),
    ("ts", "<i8"),
    ("finish", "<i1"),
];

trait LeBytes {
    fn le_bytes(&self) -> Vec<u8>;
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for Vec<$t> {
            fn le_bytes(&self) -> Vec<u8> {
                self.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
        }
    )*};
}
le_bytes!(i8, i32, i64, u64);

/// The drop rule from its dict of lists of bytes (traceview/columns/collect.py scan_rule).
fn drop_rule(rule: &Bound<'_, PyDict>) -> PyResult<scan::DropRule> {
    let list = |key: &str| -> PyResult<Vec<Vec<u8>>> {
        match rule.get_item(key)? {
            Some(value) => value.extract(),
            None => Ok(Vec::new()),
        }
    };
    Ok(scan::DropRule {
        known: list("known")?,
        categories: list("categories")?,
        keep_prefixes: list("keep_prefixes")?,
        keep_suffixes: list("keep_suffixes")?,
        keep_contains: list("keep_contains")?,
        keep_other_names: list("keep_other_names")?,
    })
}

/// The events left to the Python side as one JSON array text.
fn others_json(text: &[u8], spans: &[i64]) -> Vec<u8> {
    let total: i64 = spans.chunks(2).map(|p| p[1] - p[0] + 1).sum();
    let mut out = Vec::with_capacity(total as usize + 2);
    out.push(b'[');
    for (n, pair) in spans.chunks(2).enumerate() {
        if n > 0 {
            out.push(b',');
        }
        // spans the scanner found in `text`: always inside it (get: no panic either way)
        out.extend_from_slice(
            text.get(pair[0] as usize..pair[1] as usize)
                .unwrap_or_default(),
        );
    }
    out.push(b']');
    out
}

/// The (start, end) pairs of Chunk::comm's triples.
fn comm_spans(comm: &[i64]) -> Vec<i64> {
    comm.chunks(3)
        .flat_map(|t| t.iter().take(2).copied())
        .collect()
}

/// The rows of Chunk::comm's triples.
fn comm_rows(comm: &[i64]) -> Vec<i64> {
    comm.chunks(3).filter_map(|t| t.get(2).copied()).collect()
}

const SCAN_FAILED: &str = "the scanner failed (a bug): the Python path reads it";

/// Run a scan with the GIL released, a panic caught: its result, or None with `out` holding
/// `refused` and `at` (a refusal, or the scanner's own failure, which the Python path reads).
fn guarded<T: Send>(
    py: Python<'_>,
    out: &Bound<'_, PyDict>,
    work: impl FnOnce() -> scan::Scan<T> + Send,
) -> PyResult<Option<T>> {
    let (why, at) = match py.detach(|| catch_unwind(AssertUnwindSafe(work))) {
        Ok(Ok(done)) => return Ok(Some(done)),
        Ok(Err(refused)) => (refused.why, refused.at),
        Err(_) => (SCAN_FAILED, 0),
    };
    out.set_item("refused", why)?;
    out.set_item("at", at)?;
    Ok(None)
}

/// Scan one chunk of whole events (a bytes-like object: events separated by commas).
///
/// `drop`: the events the collector never keeps (a dict of lists of bytes, see
/// scan::DropRule; None: every other event goes to the Python side).
///
/// `keep_cpu`: CPU ops and step-marker frames as rows (and runtime calls' names and threads);
/// `keep_frames` (with `keep_cpu`): python frames and fwdbwd flows as rows too.
///
/// Returns a dict: `events` (how many), `dropped` (of them, dropped unread), the GPU columns under `gpu_<name>`, the runtime
/// columns under `rt_<name>`, the CPU op, frame and flow columns under `op_<name>`,
/// `frame_<name>`, `flow_<name>` (bytes), the chunk's tables as JSON arrays (`gpu_names`,
/// `streams`, `launches`, `rt_names`, `threads`, `op_threads`, `op_names`, `frame_threads`,
/// `frame_names`, `flow_threads`), `shapes` (the shape keys separated by 0x1e) and `others`
/// (the events left to the Python side, as one JSON array text), `comm_chunk` (1 byte: the
/// chunk holds a collective's metadata), `comm_events` (in such a chunk, the rows with a
/// field its decoder reads as any value, as one JSON array text) and `comm_rows` (theirs,
/// int64: scan::Chunk::comm); with `seen`, `seen` (what
/// trim's copy needs to leave the chunk unread, spans::Seen::values); or, when the chunk
/// must take the Python path, `{"refused": why, "at": offset}`.
///
/// `start`, `end`: the chunk is `data[start:end]` (`end` None: to the end). A `bytes` object
/// is scanned where it lies (it cannot change, and it is held while the GIL is released);
/// any other buffer is copied first.
#[pyfunction]
#[pyo3(signature = (data, exact, keep_cpu, drop=None, keep_frames=false, seen=false, start=0, end=None))]
#[allow(clippy::too_many_arguments)]
fn scan_chunk<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    exact: bool,
    keep_cpu: bool,
    drop: Option<&Bound<'py, PyDict>>,
    keep_frames: bool,
    seen: bool,
    start: usize,
    end: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let copied;
    let whole: &[u8] = match data.cast::<PyBytes>() {
        Ok(bytes) => bytes.as_bytes(),
        Err(_) => {
            copied = PyBuffer::<u8>::get(data)?.to_vec(py)?;
            &copied
        }
    };
    let Some(text) = whole.get(start..end.unwrap_or(whole.len())) else {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "start and end are not a range of the data",
        ));
    };
    let drop = match drop {
        None => None,
        Some(rule) => Some(drop_rule(rule)?),
    };
    let options = scan::Options {
        exact,
        keep_cpu,
        keep_frames: keep_frames && keep_cpu,
        drop,
        seen,
    };
    let out = PyDict::new(py);
    if let Some(chunk) = guarded(py, &out, || scanned(text, &options))? {
        chunk.put(&out)?;
    }
    Ok(out)
}

/// A scanned chunk as scan_chunk's dict holds it, made without the GIL: its counts and its
/// (key, little-endian bytes) items.
struct Converted {
    events: usize,
    dropped: usize,
    items: Vec<(&'static str, Vec<u8>)>,
    seen: Option<spans::Seen>,
}

/// Scan `text` and convert the chunk (see scan_chunk).
fn scanned(text: &[u8], options: &scan::Options) -> scan::Scan<Converted> {
    let chunk = scan::scan(text, options)?;
    let c = &chunk.cpu;
    let items = vec![
        ("gpu_kind", chunk.gpu_kind.le_bytes()),
        ("gpu_name", chunk.gpu_name.le_bytes()),
        ("gpu_stream", chunk.gpu_stream.le_bytes()),
        ("gpu_ts", chunk.gpu_ts.le_bytes()),
        ("gpu_dur", chunk.gpu_dur.le_bytes()),
        ("gpu_correlation", chunk.gpu_correlation.le_bytes()),
        ("gpu_launch", chunk.gpu_launch.le_bytes()),
        ("rt_correlation", chunk.rt_correlation.le_bytes()),
        ("rt_ts", chunk.rt_ts.le_bytes()),
        ("rt_dur", chunk.rt_dur.le_bytes()),
        ("rt_name", chunk.rt_name.le_bytes()),
        ("rt_thread", chunk.rt_thread.le_bytes()),
        ("gpu_names", chunk.gpu_names.finished()),
        ("streams", chunk.streams.finished()),
        ("launches", chunk.launches.finished()),
        ("rt_names", chunk.rt_names.finished()),
        ("threads", chunk.threads.finished()),
        ("op_thread", c.op_thread.le_bytes()),
        ("op_name", c.op_name.le_bytes()),
        ("op_ts", c.op_ts.le_bytes()),
        ("op_end", c.op_end.le_bytes()),
        ("op_correlation", c.op_mark.le_bytes()),
        ("op_shape", c.op_shape.le_bytes()),
        ("frame_thread", c.frame_thread.le_bytes()),
        ("frame_name", c.frame_name.le_bytes()),
        ("frame_ts", c.frame_ts.le_bytes()),
        ("frame_end", c.frame_end.le_bytes()),
        ("frame_python_id", c.frame_python_id.le_bytes()),
        ("frame_python_parent", c.frame_python_parent.le_bytes()),
        ("flow_flow", c.flow_flow.le_bytes()),
        ("flow_thread", c.flow_thread.le_bytes()),
        ("flow_ts", c.flow_ts.le_bytes()),
        ("flow_finish", c.flow_finish.le_bytes()),
        ("op_threads", c.op_threads.finished()),
        ("op_names", c.op_names.finished()),
        ("shapes", c.shapes.finished()),
        ("frame_threads", c.frame_threads.finished()),
        ("frame_names", c.frame_names.finished()),
        ("flow_threads", c.flow_threads.finished()),
        ("others", others_json(text, &chunk.others)),
        ("comm_chunk", vec![u8::from(chunk.comm_chunk)]),
        ("comm_events", others_json(text, &comm_spans(&chunk.comm))),
        ("comm_rows", comm_rows(&chunk.comm).le_bytes()),
    ];
    Ok(Converted {
        events: chunk.events,
        dropped: chunk.dropped,
        items,
        seen: chunk.seen,
    })
}

impl Converted {
    fn put(self, out: &Bound<'_, PyDict>) -> PyResult<()> {
        let py = out.py();
        out.set_item("events", self.events)?;
        out.set_item("dropped", self.dropped)?;
        for (key, value) in self.items {
            out.set_item(key, PyBytes::new(py, &value))?;
        }
        if let Some(seen) = self.seen {
            out.set_item("seen", seen.values().to_vec())?;
        }
        Ok(())
    }
}

/// A chunk to scan on a ChunkScanner's threads: its text and whether ts and dur are exact.
type ChunkJob = (Vec<u8>, bool);
/// The text back, with the chunk or why it was refused.
type ChunkDone = (Vec<u8>, scan::Scan<Converted>);

/// Chunks scanned on threads of their own (`threads` of them), at most `ahead` in flight,
/// taken back in the order they were given (see pool.rs; traceview/read/threaded.py).
#[pyclass(module = "traceview._core")]
struct ChunkScanner {
    inner: std::sync::Mutex<Scanning>,
}

struct Scanning {
    pool: pool::Ordered<ChunkJob, ChunkDone>,
    last: Vec<u8>,          // the text of the chunk taken last
    spare: Option<Vec<u8>>, // the one before: the next chunk is copied into it (no new pages)
}

#[pymethods]
impl ChunkScanner {
    #[new]
    #[pyo3(signature = (threads, ahead, keep_cpu, drop=None, keep_frames=false, seen=false))]
    fn new(
        threads: usize,
        ahead: usize,
        keep_cpu: bool,
        drop: Option<&Bound<'_, PyDict>>,
        keep_frames: bool,
        seen: bool,
    ) -> PyResult<Self> {
        let options = scan::Options {
            exact: false,
            keep_cpu,
            keep_frames: keep_frames && keep_cpu,
            drop: drop.map(drop_rule).transpose()?,
            seen,
        };
        let exact = scan::Options {
            exact: true,
            ..options.clone()
        };
        let pool = pool::Ordered::start(threads, ahead, move |(text, is_exact): ChunkJob| {
            let options = if is_exact { &exact } else { &options };
            let done = catch_unwind(AssertUnwindSafe(|| scanned(&text, options)));
            let done = done.unwrap_or(Err(scan::Refused {
                at: 0,
                why: SCAN_FAILED,
            }));
            (text, done)
        })?;
        let inner = Scanning {
            pool,
            last: Vec::new(),
            spare: None,
        };
        Ok(ChunkScanner {
            inner: std::sync::Mutex::new(inner),
        })
    }

    /// Scan a copy of ``data`` (a bytes-like chunk of whole events; ``exact``: as
    /// scan_chunk's): False, and nothing done, when ``ahead`` chunks are in flight already.
    fn submit(&self, py: Python<'_>, data: &Bound<'_, PyAny>, exact: bool) -> PyResult<bool> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let mut scanning = self.scanning();
        if scanning.pool.in_flight() >= scanning.pool.limit() {
            return Ok(false);
        }
        let mut text = scanning.spare.take().unwrap_or_default();
        text.resize(buffer.item_count(), 0); // only new room is written: a reused one keeps its bytes
        buffer.copy_to_slice(py, &mut text)?;
        Ok(scanning.pool.submit((text, exact)).is_ok())
    }

    /// The oldest chunk not yet taken, as scan_chunk gives it (waits for it, the GIL
    /// released); its text is then ``last_text()``. RuntimeError if none is in flight or its
    /// scan was lost (a bug).
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut scanning = self.scanning();
        let pool = &mut scanning.pool;
        let taken = py.detach(|| pool.take());
        let Ok((text, done)) = taken else {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "no chunk in flight, or its scan was lost",
            ));
        };
        scanning.spare = Some(std::mem::replace(&mut scanning.last, text));
        let out = PyDict::new(py);
        match done {
            Ok(chunk) => chunk.put(&out)?,
            Err(refused) => {
                out.set_item("refused", refused.why)?;
                out.set_item("at", refused.at)?;
            }
        }
        Ok(out)
    }

    /// The text of the chunk ``next()`` gave last (b"" before the first).
    fn last_text<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.scanning().last)
    }

    /// Chunks given and not yet taken.
    fn in_flight(&self) -> usize {
        self.scanning().pool.in_flight()
    }

    /// Drop the chunks in flight and stop the threads (each ends after its current chunk).
    fn close(&self, py: Python<'_>) {
        let mut scanning = self.scanning();
        let pool = &mut scanning.pool;
        py.detach(|| pool.close());
    }
}

impl ChunkScanner {
    fn scanning(&self) -> std::sync::MutexGuard<'_, Scanning> {
        // A panic while it was held is caught and reported: the state is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A gzip file inflated on a background thread, `ahead` blocks in front of the reader
/// (see inflate.rs; traceview/read/source.py reads through it).
#[pyclass(module = "traceview._core")]
struct GzipReader {
    inner: std::sync::Mutex<inflate::Background>,
    // read_into's block not yet all given: its buffer, the bytes left, end and consumed.
    at_hand: std::sync::Mutex<Option<InflatedBlock>>,
}

type InflatedBlock = (Vec<u8>, std::ops::Range<usize>, u64, u64);

/// How the stream ended: (status, end, consumed, message) (see GzipReader.read).
type Ended = (&'static str, u64, u64, String);

/// A step as the block it brings (all of its bytes at hand), or as how the stream ended.
fn block(step: inflate::Step) -> Result<InflatedBlock, Ended> {
    match step {
        inflate::Step::Block {
            data,
            len,
            end,
            consumed,
        } => Ok((data, 0..len, end, consumed)),
        inflate::Step::End { after, consumed } => Err(("end", after, consumed, String::new())),
        inflate::Step::Truncated { after, consumed } => {
            Err(("truncated", after, consumed, String::new()))
        }
        inflate::Step::Trailing { after, consumed } => {
            Err(("trailing", after, consumed, String::new()))
        }
        inflate::Step::Corrupt {
            after,
            consumed,
            message,
        } => Err(("corrupt", after, consumed, message)),
        inflate::Step::Io { message } => Err(("io", 0, 0, message)),
    }
}

#[pymethods]
impl GzipReader {
    #[new]
    fn new(
        path: std::path::PathBuf,
        read_size: usize,
        block_size: usize,
        ahead: usize,
    ) -> PyResult<Self> {
        let file = std::fs::File::open(path)?;
        let inner = inflate::Background::start(file, read_size, block_size, ahead)?;
        Ok(GzipReader {
            inner: std::sync::Mutex::new(inner),
            at_hand: std::sync::Mutex::new(None),
        })
    }

    /// The next step as (status, block, end, consumed, message): status "" for a block of
    /// inflated bytes (``end``: decompressed bytes so far, ``consumed``: file bytes used);
    /// "end", "truncated", "trailing", "corrupt" (``message``: zlib's) or "io" once it is over
    /// (``end``: the decompressed bytes so far).
    fn read<'py>(&self, py: Python<'py>) -> (&'static str, Bound<'py, PyBytes>, u64, u64, String) {
        match self.next_block(py) {
            Ok((data, left, end, consumed)) => {
                let bytes = PyBytes::new(py, data.get(left).unwrap_or_default());
                self.background().give_back(data);
                ("", bytes, end, consumed, String::new())
            }
            Err((status, end, consumed, message)) => {
                (status, PyBytes::new(py, b""), end, consumed, message)
            }
        }
    }

    /// Inflated bytes written into ``into`` (a writable memoryview), as many as it
    /// holds or the block at hand has: (status, written, end, consumed, message) as read()
    /// says them, ``end`` the decompressed bytes given so far.
    fn read_into(
        &self,
        py: Python<'_>,
        into: &Bound<'_, PyAny>,
    ) -> PyResult<(&'static str, usize, u64, u64, String)> {
        let mut at_hand = self.at_hand.lock().unwrap_or_else(|e| e.into_inner());
        if at_hand.is_none() {
            match self.next_block(py) {
                Ok(inflated) => *at_hand = Some(inflated),
                Err((status, end, consumed, message)) => {
                    return Ok((status, 0, end, consumed, message))
                }
            }
        }
        let Some((data, left, end, consumed)) = at_hand.as_mut() else {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "no block (a bug)",
            ));
        };
        let n = (left.end - left.start).min(into.len()?);
        let part = into.get_item(pyo3::types::PySlice::new(py, 0, n as isize, 1))?;
        let source = data.get(left.start..left.start + n).unwrap_or_default();
        PyBuffer::<u8>::get(&part)?.copy_from_slice(py, source)?;
        left.start += n;
        let (given, consumed) = (*end - (left.end - left.start) as u64, *consumed);
        if left.start >= left.end {
            if let Some((data, ..)) = at_hand.take() {
                self.background().give_back(data);
            }
        }
        Ok(("", n, given, consumed, String::new()))
    }

    /// Blocks that end before ``offset`` are not wanted: they are inflated but not sent.
    fn skip_before(&self, offset: u64) {
        self.background().skip_before(offset);
    }

    /// Stop the inflate thread and wait for it (it ends within one block).
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.background().close());
    }
}

impl GzipReader {
    /// The next block, or how the stream ended, waited for with the GIL released.
    fn next_block(&self, py: Python<'_>) -> Result<InflatedBlock, Ended> {
        block(py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| self.background().next_step())).unwrap_or(
                inflate::Step::Io {
                    message: "the inflate reader failed (a bug)".into(),
                },
            )
        }))
    }

    fn background(&self) -> std::sync::MutexGuard<'_, inflate::Background> {
        // A panic while it was held is caught and reported: the state is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The columns of `trim_spans`, in order, with their dtypes (traceview/read/spans.py views
/// them by this table).
pub const SPAN_COLUMNS: [(&str, &str); 11] = [
    ("start", "<i8"),
    ("end", "<i8"),
    ("ph", "<i4"),
    ("cat", "<i4"),
    ("pid", "<i4"),
    ("ts", "<i8"),
    ("dur", "<i8"),
    ("has", "<u1"),
    ("correlation", "<i8"),
    ("device", "<i4"),
    ("flow", "<u8"),
];

/// Each event's span and the fields trim judges by, for one chunk of whole events (see
/// spans.rs): a dict of the SPAN_COLUMNS (little-endian bytes), `events` and the tables
/// `phs`, `cats`, `pids`, `devices` (JSON arrays); or `{"refused": why, "at": offset}`.
#[pyfunction]
fn trim_spans<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let text = PyBuffer::<u8>::get(data)?.to_vec(py)?;
    let out = PyDict::new(py);
    let Some(c) = guarded(py, &out, || spans::spans(&text))? else {
        return Ok(out);
    };
    let bytes = |v: Vec<u8>| PyBytes::new(py, &v);
    out.set_item("events", c.start.len())?;
    out.set_item("start", bytes(c.start.le_bytes()))?;
    out.set_item("end", bytes(c.end.le_bytes()))?;
    out.set_item("ph", bytes(c.ph.le_bytes()))?;
    out.set_item("cat", bytes(c.cat.le_bytes()))?;
    out.set_item("pid", bytes(c.pid.le_bytes()))?;
    out.set_item("ts", bytes(c.ts.le_bytes()))?;
    out.set_item("dur", bytes(c.dur.le_bytes()))?;
    out.set_item("has", bytes(c.has))?;
    out.set_item("correlation", bytes(c.correlation.le_bytes()))?;
    out.set_item("device", bytes(c.device.le_bytes()))?;
    out.set_item("flow", bytes(c.flow.le_bytes()))?;
    out.set_item("phs", bytes(c.phs.finished()))?;
    out.set_item("cats", bytes(c.cats.finished()))?;
    out.set_item("pids", bytes(c.pids.finished()))?;
    out.set_item("devices", bytes(c.devices.finished()))?;
    Ok(out)
}

/// The spans of `data` (little-endian int64 start, end pairs) joined by `,\n`.
#[pyfunction]
fn join_spans<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    spans: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let text = PyBuffer::<u8>::get(data)?.to_vec(py)?;
    let raw = PyBuffer::<u8>::get(spans)?.to_vec(py)?;
    let pairs: Vec<(i64, i64)> = raw
        .chunks_exact(16)
        .map(|p| {
            let (a, b) = p.split_at(8);
            let word = |w: &[u8]| i64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            (word(a), word(b))
        })
        .collect();
    match spans::joined(&text, &pairs) {
        Ok(out) => Ok(PyBytes::new(py, &out)),
        Err(e) => Err(pyo3::exceptions::PyValueError::new_err(e.why)),
    }
}

/// The hash of a flow id's raw text, as trim_spans gives it in `flow`.
#[pyfunction]
fn flow_id_hash(text: &[u8]) -> u64 {
    spans::id_hash(text)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scan_chunk, m)?)?;
    m.add_class::<GzipReader>()?;
    m.add_class::<ChunkScanner>()?;
    m.add("GPU_COLUMNS", GPU_COLUMNS.to_vec())?;
    m.add("RUNTIME_COLUMNS", RUNTIME_COLUMNS.to_vec())?;
    m.add("OP_COLUMNS", OP_COLUMNS.to_vec())?;
    m.add("FRAME_COLUMNS", FRAME_COLUMNS.to_vec())?;
    m.add("FLOW_COLUMNS", FLOW_COLUMNS.to_vec())?;
    m.add(
        "CPU_MARKS",
        vec![
            ("OP", cpu::MARK_OP),
            ("ANNOTATION", cpu::MARK_ANNOTATION),
            ("FRAME", cpu::MARK_FRAME),
        ],
    )?;
    m.add("MAX_DEPTH", scan::MAX_DEPTH)?;
    m.add("COMM_CHECKED", scan::COMM_CHECKED)?;
    m.add_function(wrap_pyfunction!(trim_spans, m)?)?;
    m.add_function(wrap_pyfunction!(join_spans, m)?)?;
    m.add_function(wrap_pyfunction!(flow_id_hash, m)?)?;
    m.add("SPAN_COLUMNS", SPAN_COLUMNS.to_vec())?;
    Ok(())
}
