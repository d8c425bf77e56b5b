//! The column scanner: one chunk of whole events (what traceview/read/reader.py cuts) →
//! the columns of its GPU activities and runtime calls (and, in reads that keep them, of its
//! CPU ops, python frames and flows: cpu.rs), and the byte spans of every other event, which
//! the Python side decodes as before.
//!
//! The scanner only accepts a chunk that the Python path's fast decoder would read whole
//! and convert a batch at a time; anything else is refused (with the offset and why) and the
//! chunk takes the Python path, so both paths accept, reject and convert the same inputs.
//! Refused, among others: invalid UTF-8, an escaped key, a repeated key that is read, a
//! wrongly typed field of an event read here, numbers the batch conversion would not take,
//! nesting deeper than MAX_DEPTH. In a chunk holding a collective's metadata
//! (traceview/columns/comms.py) the rows whose args the decoder reads as any value are
//! handed back too (`Chunk::comm`), for the Python side to decode and check.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::cpu::{self, CpuRows};
use crate::keys::top_slot;
use crate::numbers::{self, Token};
use crate::simd;
use crate::strings;

/// Nesting deeper than this is refused (skipped iteratively, never by recursion).
pub const MAX_DEPTH: usize = 64;
/// The kinds of the rows (traceview/columns/schema.py KERNEL, MEMCPY, MEMSET; collect.py's
/// _RUNTIME).
pub const KERNEL: i8 = 0;
pub const MEMCPY: i8 = 1;
pub const MEMSET: i8 = 2;
const RUNTIME: i8 = 10;
/// Text whose presence has the Python path decode the whole chunk with the collectives'
/// types (read.decode.COMM_KEY): every args field of ANY_KEYS read as any value.
const COMM_KEY: &[u8] = b"\"Collective name\"";
/// Chunk::comm's row of a runtime call.
pub const COMM_CHECKED: i64 = i64::MIN;

/// Category (lower case) → kind, as traceview/columns/collect.py's _CATEGORIES has them
/// (gpu_user_annotation, which is no row kind here, aside).
const CATEGORIES: [(&[u8], i8); 12] = [
    (b"kernel", KERNEL),
    (b"gpu_memcpy", MEMCPY),
    (b"memcpy", MEMCPY),
    (b"gpu_memset", MEMSET),
    (b"memset", MEMSET),
    (b"cuda_runtime", RUNTIME),
    (b"cuda_driver", RUNTIME),
    (b"runtime", RUNTIME),
    (b"user_annotation", cpu::USER_ANNOTATION),
    (b"cpu_op", cpu::OP),
    (b"operator", cpu::OP),
    (b"python_function", cpu::PYTHON),
];

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// ts and dur as exact decimals (the reader's exact mode), else as the fast decoder's
    /// int or float.
    pub exact: bool,
    /// Runtime calls' names and threads, CPU ops and step-marker frames (CPU rows are kept).
    pub keep_cpu: bool,
    /// Python frames and fwdbwd flows (with keep_cpu; see cpu.rs).
    pub keep_frames: bool,
    /// Which other events the collector never looks at (None: every one goes to Python).
    pub drop: Option<DropRule>,
    /// Gather what trim's copy needs to leave the chunk unread (spans::Seen).
    pub seen: bool,
}

/// The events the collector never keeps, as it declares them
/// (traceview/columns/collect.py scan_rule): they are counted and not decoded. Only events
/// whose fields the fast decoder would take are dropped; every other goes to Python.
#[derive(Debug, Clone, Default)]
pub struct DropRule {
    /// Every category (lower case) the collector gives a kind to.
    pub known: Vec<Vec<u8>>,
    /// Known categories whose complete events are dropped...
    pub categories: Vec<Vec<u8>>,
    /// ...unless the name starts with, ends with or holds one of these.
    pub keep_prefixes: Vec<Vec<u8>>,
    pub keep_suffixes: Vec<Vec<u8>>,
    pub keep_contains: Vec<Vec<u8>>,
    /// Events of no kind (not complete, or another category) are dropped unless so named.
    pub keep_other_names: Vec<Vec<u8>>,
}

/// Why a chunk takes the Python path, and where (offset in the chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub at: usize,
    pub why: &'static str,
}

pub(crate) type Scan<T> = Result<T, Refused>;

pub(crate) fn refuse<T>(at: usize, why: &'static str) -> Scan<T> {
    Err(Refused { at, why })
}

/// Distinct values of a chunk in the order first met, as one JSON array text (or, `raw`,
/// the values separated by 0x1e, which no value holds).
#[derive(Debug, Default)]
pub struct Table {
    ids: HashMap<Vec<u8>, i32, Seeded>,
    /// `[v0,v1,…]`: each value's JSON text.
    pub json: Vec<u8>,
    pub raw: bool,
    /// Where each value is in `json`, and the last value looked up (rows of one thread,
    /// one name come in runs).
    spans: Vec<(usize, usize)>,
    last: usize,
    /// Ids of values met, by a hash of their length and first and last eight bytes (a
    /// slot holds the last value of its hash, found again without hashing it whole).
    recent: Vec<i32>,
}

/// Slots of Table::recent.
const RECENT: usize = 256;

/// Between the values of a raw table.
pub const RAW_SEPARATOR: u8 = 0x1e;

/// The slot of `slots` slots (a power of two) for a text, by a hash of its length and its
/// first and last eight bytes (Table::recent, KeepNames).
#[inline(always)]
fn short_slot(text: &[u8], slots: usize) -> usize {
    let word = |b: Option<&[u8; 8]>| b.map_or(0, |w| u64::from_le_bytes(*w));
    let (head, tail) = if text.len() >= 8 {
        (word(text.first_chunk()), word(text.last_chunk()))
    } else {
        let mut w = [0u8; 8];
        w[..text.len()].copy_from_slice(text);
        (u64::from_le_bytes(w), 0)
    };
    let hash =
        (head ^ tail.rotate_left(29) ^ text.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (hash >> (64 - slots.trailing_zeros())) as usize
}

impl Table {
    pub(crate) fn id(&mut self, text: &[u8]) -> i32 {
        if let Some(&(start, end)) = self.spans.get(self.last) {
            if self.json.get(start..end) == Some(text) {
                return self.last as i32;
            }
        }
        let slot = short_slot(text, RECENT);
        if let Some(&id) = self.recent.get(slot) {
            if let Some(&(start, end)) = usize::try_from(id).ok().and_then(|n| self.spans.get(n)) {
                if self.json.get(start..end) == Some(text) {
                    self.last = id as usize;
                    return id;
                }
            }
        }
        if self.recent.is_empty() {
            self.recent = vec![-1; RECENT];
        }
        if let Some(&id) = self.ids.get(text) {
            self.last = id as usize;
            if let Some(s) = self.recent.get_mut(slot) {
                *s = id;
            }
            return id;
        }
        let id = self.ids.len() as i32;
        if let Some(s) = self.recent.get_mut(slot) {
            *s = id;
        }
        if self.raw {
            if id > 0 {
                self.json.push(RAW_SEPARATOR);
            }
        } else {
            self.json.push(if id == 0 { b'[' } else { b',' });
        }
        let start = self.json.len();
        self.json.extend_from_slice(text);
        self.spans.push((start, self.json.len()));
        self.last = id as usize;
        self.ids.insert(text.to_vec(), id);
        id
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The JSON array of the values (a raw table's text as it is).
    pub fn finished(&self) -> Vec<u8> {
        if self.raw {
            return self.json.clone();
        }
        if self.ids.is_empty() {
            return b"[]".to_vec();
        }
        let mut out = self.json.clone();
        out.push(b']');
        out
    }
}

/// The tables' hash: FxHash's multiply-rotate, eight bytes a step, from a random seed (so no
/// trace can be written to collide). SipHash, the default, took ~10% of a scan with CPU rows,
/// whose keys (threads, names, shapes) are looked up for every op (callgrind).
#[derive(Debug, Clone, Copy)]
struct Seeded(u64);

impl Default for Seeded {
    fn default() -> Self {
        use std::hash::{BuildHasher, RandomState};
        Seeded(RandomState::new().hash_one(0x7472_6163_6576_6965_u64))
    }
}

impl std::hash::BuildHasher for Seeded {
    type Hasher = Fx;

    fn build_hasher(&self) -> Fx {
        Fx(self.0)
    }
}

struct Fx(u64);

impl Fx {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.add(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The scanned chunk. Names, streams, launches, threads: ids into the chunk's tables.
#[derive(Debug, Default)]
pub struct Chunk {
    pub events: usize,
    pub gpu_kind: Vec<i8>,
    pub gpu_name: Vec<i32>,
    pub gpu_stream: Vec<i32>,
    pub gpu_ts: Vec<i64>,
    pub gpu_dur: Vec<i64>,
    pub gpu_correlation: Vec<i64>,
    pub gpu_launch: Vec<i32>,
    pub rt_correlation: Vec<i64>,
    pub rt_ts: Vec<i64>,
    pub rt_dur: Vec<i64>,
    pub rt_name: Vec<i32>,
    pub rt_thread: Vec<i32>,
    pub gpu_names: Table,
    pub streams: Table,
    pub launches: Table,
    pub rt_names: Table,
    pub threads: Table,
    /// CPU ops, step-marker frames, python frames and flows (cpu.rs).
    pub cpu: CpuRows,
    /// (start, end) of each event left to the Python side, in file order.
    pub others: Vec<i64>,
    /// Whether the chunk holds COMM_KEY: the Python side decodes it with the collectives'
    /// types (read/decode.py CommArgs).
    pub comm_chunk: bool,
    /// In such a chunk, (start, end, row) of each row with an ANY_KEYS field, in file order:
    /// row ≥ 0 a GPU row, < 0 CPU op row −1 − row, COMM_CHECKED a runtime call (only
    /// decoded, to check it as the Python path would).
    pub comm: Vec<i64>,
    /// Events dropped unread (DropRule).
    pub dropped: usize,
    /// With Options::seen.
    pub seen: Option<crate::spans::Seen>,
}

/// A value's type. No fields and a word wide: a `Val` is written whole where it is made,
/// so copying it never reads a word only partly stored just before (a byte-wide kind with
/// a field made every scalar's `Val` stall on store forwarding: ~30% of `scan`'s cycles by
/// `perf annotate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u64)]
pub(crate) enum Kind {
    /// A string without escapes.
    Str,
    StrEscaped,
    Num,
    Literal,
    #[default]
    Null,
    Object,
    Array,
}

impl Kind {
    pub(crate) fn string(escaped: bool) -> Kind {
        if escaped {
            Kind::StrEscaped
        } else {
            Kind::Str
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Val {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Event {
    pub ph: Option<Val>,
    pub cat: Option<Val>,
    pub name: Option<Val>,
    pub pid: Option<Val>,
    pub tid: Option<Val>,
    pub ts: Option<Val>,
    pub dur: Option<Val>,
    pub args: Option<Val>,
    pub correlation: Option<Val>,
    pub device: Option<Val>,
    pub stream: Option<Val>,
    // launch configuration (traceview/columns/launches.py), in raw_key's order
    pub launch: [Option<Val>; 5],
    // the first args field the allocator's or a collective's decoder reads as any value
    pub extra_any: Option<Val>,
    // a flow's id (read only where frames are), the CPU op's shapes (SHAPE_KEYS), a python
    // frame's Python id and Python parent id
    pub id: Option<Val>,
    pub shape: [Option<Val>; 4],
    pub python: [Option<Val>; 2],
}

/// Args fields read as any value by the allocator's and collectives' decoders (read/decode.py
/// MemoryArgs, CommArgs): an event holding one is never dropped unread.
const ANY_KEYS: [&[u8]; 13] = [
    b"Device Type",
    b"Device Id",
    b"Bytes",
    b"Addr",
    b"Total Allocated",
    b"Total Reserved",
    b"Collective name",
    b"Process Group Name",
    b"In msg nelems",
    b"Out msg nelems",
    b"dtype",
    b"Group size",
    b"Seq",
];

const LAUNCH_KEYS: [&[u8]; 5] = [
    b"grid",
    b"block",
    b"registers per thread",
    b"shared memory",
    b"bytes",
];

/// A CPU op's shapes, kept as raw text (read/decode.py ShapedArgs; "Input dims" is 2021's).
const SHAPE_KEYS: [&[u8]; 4] = [
    b"Input Dims",
    b"Input dims",
    b"Input type",
    b"Concrete Inputs",
];

/// A python frame's ids (read/decode.py _FRAME_ARGS).
const PYTHON_KEYS: [&[u8]; 2] = [b"Python id", b"Python parent id"];

/// What an args member is to the scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgKey {
    Correlation,
    Device,
    Stream,
    /// LAUNCH_KEYS[n]
    Launch(usize),
    /// one of ANY_KEYS
    Any,
    /// SHAPE_KEYS[n]
    Shape(usize),
    /// PYTHON_KEYS[n]
    Python(usize),
    Other,
}

/// One bit of 64 for a key, from its length and first and last bytes: a key whose bit is
/// not in a list's mask is not in the list, told without comparing any text.
const fn key_bit(key: &[u8]) -> u64 {
    let n = key.len();
    if n == 0 {
        return 1;
    }
    1 << ((n * 31 + key[0] as usize * 7 + key[n - 1] as usize) % 64)
}

const fn key_mask(keys: &[&[u8]]) -> u64 {
    let mut mask = 0;
    let mut n = 0;
    while n < keys.len() {
        mask |= key_bit(keys[n]);
        n += 1;
    }
    mask
}

const READ_KEYS: u64 =
    key_mask(&LAUNCH_KEYS) | key_mask(&ANY_KEYS) | key_mask(&SHAPE_KEYS) | key_mask(&PYTHON_KEYS);

/// The args key's meaning. Most keys of an op's args ("External id", "Input Dims", ...)
/// are told by their bit (key_bit) before any text is compared.
#[inline(always)]
fn arg_key(key: &[u8]) -> ArgKey {
    match key {
        b"correlation" => ArgKey::Correlation,
        b"device" => ArgKey::Device,
        b"stream" => ArgKey::Stream,
        _ if key_bit(key) & READ_KEYS == 0 => ArgKey::Other,
        _ => {
            let at = |keys: &[&[u8]]| keys.iter().position(|k| *k == key);
            if let Some(n) = at(&SHAPE_KEYS) {
                ArgKey::Shape(n)
            } else if let Some(n) = at(&LAUNCH_KEYS) {
                ArgKey::Launch(n)
            } else if ANY_KEYS.contains(&key) {
                ArgKey::Any
            } else if let Some(n) = at(&PYTHON_KEYS) {
                ArgKey::Python(n)
            } else {
                ArgKey::Other
            }
        }
    }
}

/// The open brackets of a value being walked: at most MAX_DEPTH, no allocation.
struct Stack {
    open: [u8; MAX_DEPTH],
    len: usize,
}

impl Default for Stack {
    fn default() -> Self {
        Stack {
            open: [0; MAX_DEPTH],
            len: 0,
        }
    }
}

impl Stack {
    fn push(&mut self, b: u8) {
        // callers check len < MAX_DEPTH first; a full stack keeps its top (never reached)
        if let Some(slot) = self.open.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    fn last(&self) -> Option<&u8> {
        self.len.checked_sub(1).and_then(|i| self.open.get(i))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cold]
fn string_refused(at: usize, why: strings::Refusal) -> Scan<Val> {
    refuse(
        at,
        match why {
            strings::Refusal::Unterminated => "an unterminated string",
            strings::Refusal::Control => "a control character in a string",
            strings::Refusal::Escape => "an invalid escape",
            strings::Refusal::LoneSurrogate => "a lone surrogate escape",
        },
    )
}

pub(crate) struct Scanner<'a> {
    pub(crate) t: &'a [u8],
    /// Objects and arrays already walked (Memo).
    memo: RefCell<Memo>,
    /// Event heads already walked (Heads).
    heads: RefCell<Heads>,
    /// The last event's head's set and hint, where it has one (Hint).
    hinted: Cell<Option<Hinted>>,
    /// Flat events already walked (Flats).
    flats: RefCell<Flats>,
}

/// A remembered head's set (Ways) and hint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hinted {
    set: usize,
    pub(crate) hint: Hint,
}

/// Where an object or array that was walked and accepted lies in the chunk: `len` bytes
/// from `start` (0: none), inside `outer` open containers.
#[derive(Debug, Clone, Copy, Default)]
struct Walked {
    start: u32,
    len: u32,
    outer: u32,
}

/// A set-associative cache over a chunk's bytes: `W` entries in each of `S` sets, an entry's
/// set chosen by a hash of the first `K` bytes it starts with, most recent first in each set.
/// An entry is a span of the chunk (`Span`) found again where the same bytes come (with
/// what its user asks besides). Memo and Heads are two.
struct Ways<T, const K: usize, const S: usize, const W: usize> {
    sets: Box<[[T; W]; S]>,
}

/// The last byte of a short slice moved to its front, the others one on (what
/// `rotate_right(1)` does, without its general-purpose rotation).
#[inline(always)]
fn to_front(items: &mut [u8]) {
    if let Some(&last) = items.last() {
        for n in (1..items.len()).rev() {
            items[n] = items[n - 1];
        }
        items[0] = last;
    }
}

/// An entry of `Ways`: where its bytes lie in the chunk (`len` 0: none).
trait Span: Copy + Default {
    fn span(&self) -> (usize, usize);
}

impl<T: Span, const K: usize, const S: usize, const W: usize> Default for Ways<T, K, S, W> {
    fn default() -> Self {
        Ways {
            sets: Box::new([[T::default(); W]; S]),
        }
    }
}

impl<T: Span, const K: usize, const S: usize, const W: usize> Ways<T, K, S, W> {
    /// The set of what starts at `i`: None near the end of the text.
    #[inline(always)]
    fn set(t: &[u8], i: usize) -> Option<usize> {
        let key = t.get(i..)?.first_chunk::<K>()?;
        let mut hash = 0u64;
        for word in key.chunks_exact(8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            hash =
                (hash.rotate_left(21) ^ u64::from_le_bytes(w)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        Some((hash >> (64 - S.trailing_zeros())) as usize)
    }

    /// The most recent entry of the set of `i` whose bytes are those at `i` and that `hit`
    /// takes, made the most recent.
    #[inline(always)]
    fn find(&mut self, t: &[u8], i: usize, hit: impl Fn(&T) -> bool) -> Option<(usize, &T)> {
        let n_set = Self::set(t, i)?;
        let set = self.sets.get_mut(n_set)?;
        for n in 0..W {
            let w = &set[n];
            let (start, len) = w.span();
            if len > 0
                && hit(w)
                && t.get(i..i + len)
                    .is_some_and(|v| Some(v) == t.get(start..start + len))
            {
                set[..=n].rotate_right(1);
                return Some((n_set, &set[0]));
            }
        }
        None
    }

    /// The most recent entry of set `set`.
    #[inline(always)]
    fn first_mut(&mut self, set: usize) -> Option<&mut T> {
        self.sets.get_mut(set)?.first_mut()
    }

    /// Keep `entry`, of the bytes at `i`, as the most recent of its set: that set.
    #[inline(always)]
    fn keep(&mut self, t: &[u8], i: usize, entry: T) -> Option<usize> {
        let n = Self::set(t, i)?;
        let set = self.sets.get_mut(n)?;
        set.rotate_right(1);
        set[0] = entry;
        Some(n)
    }
}

impl Span for Walked {
    #[inline(always)]
    fn span(&self) -> (usize, usize) {
        (self.start as usize, self.len as usize)
    }
}

/// The objects and arrays of a chunk already walked, by a hash of their first 24 bytes. An
/// object or array is a function of its own bytes alone (its walk reads none past its
/// closing bracket): bytes equal to an accepted one at the same depth are the same value,
/// with the same end, so it is not walked again. An op's args repeat their shapes and types
/// (~98% of the array values of the big trace's chunks are repeats; this finds ~90%).
#[derive(Default)]
struct Memo(Ways<Walked, 24, 512, 4>);

impl Memo {
    /// The end of the value at `i` if its bytes are those of one walked at this depth.
    #[inline(always)]
    fn find(&mut self, t: &[u8], i: usize, outer: usize) -> Option<usize> {
        let (_, w) = self.0.find(t, i, |w| w.outer as usize == outer)?;
        Some(i + w.len as usize)
    }

    /// Keep the value from `i` to `end`, walked and accepted.
    #[inline(always)]
    fn keep(&mut self, t: &[u8], i: usize, end: usize, outer: usize) {
        if let (Ok(start), Ok(len), Ok(outer)) = (
            u32::try_from(i),
            u32::try_from(end - i),
            u32::try_from(outer),
        ) {
            self.0.keep(t, i, Walked { start, len, outer });
        }
    }
}

/// The members an event's head may hold (Head), in `Event` order.
const HEAD_KEYS: [&[u8]; 5] = [b"ph", b"cat", b"name", b"pid", b"tid"];
/// Heads shorter than this are not remembered; the hash of a head is of these first bytes.
const HEAD_KEY: usize = 64;

/// An event's head: its first members while they are HEAD_KEYS with scalar or string
/// values, as offsets from the event's `{`; `len` is where the next member's key starts.
#[derive(Debug, Clone, Copy, Default)]
struct Head {
    start: u32,
    len: u32,
    n: u8,
    /// Whether a member that is not of the head came (its key at `len`).
    ended: bool,
    members: [(u8, u32, u32, Kind); 5],
    /// What the lists said of its category and name, where both are of the head (`named`).
    hint: Hint,
    named: bool,
}

/// What the lists say of a remembered head's category (Categories::of) and name
/// (KeepNames::kept), found once for all the events with that head (its bytes hold both).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hint {
    cat: Option<Category>,
    kept: Option<bool>,
}

impl Hint {
    /// Which of the two are found.
    fn found(&self) -> (bool, bool) {
        (self.cat.is_some(), self.kept.is_some())
    }
}

impl Head {
    /// A member whose key starts `at` bytes into the event: whether it is of the head
    /// (its value then given to `value`).
    fn note(&mut self, key: &[u8], at: usize) -> bool {
        match HEAD_KEYS.iter().position(|k| *k == key) {
            Some(n) if usize::from(self.n) < self.members.len() => {
                self.members[usize::from(self.n)].0 = n as u8;
                true
            }
            _ => {
                if let Ok(at) = u32::try_from(at) {
                    (self.len, self.ended) = (at, true);
                }
                false
            }
        }
    }

    /// The value of the member `note` took (of the event at `event`): whether the head
    /// may go on.
    fn value(&mut self, v: Val, event: usize) -> bool {
        let (Ok(start), Ok(end)) = (u32::try_from(v.start - event), u32::try_from(v.end - event))
        else {
            return false;
        };
        if matches!(v.kind, Kind::Object | Kind::Array) {
            return false;
        }
        let m = &mut self.members[usize::from(self.n)];
        (m.1, m.2, m.3) = (start, end, v.kind);
        self.n += 1;
        true
    }

    /// Whether the head holds the category and the name (a hint is then of the head).
    fn hinted(&self) -> bool {
        let held = |key: u8| {
            self.members[..usize::from(self.n)]
                .iter()
                .any(|m| m.0 == key)
        };
        held(1) && held(2)
    }

    /// Whether the head is worth remembering (and whole: a member past it came).
    fn kept(&self) -> bool {
        self.ended && self.len as usize >= HEAD_KEY
    }
}

impl Span for Head {
    /// A head not worth remembering spans nothing.
    #[inline(always)]
    fn span(&self) -> (usize, usize) {
        (
            self.start as usize,
            if self.kept() { self.len as usize } else { 0 },
        )
    }
}

/// Event heads already walked, by a hash of their first HEAD_KEY bytes (as Memo, for the
/// first members of an event: `{`, ph, cat, name, pid, tid of an op repeat for every op of
/// a name and thread). Bytes equal to a remembered head, then a byte that is not
/// whitespace, walk as it walked: the same members and values at the same offsets, the next
/// key next.
#[derive(Default)]
struct Heads(Ways<Head, HEAD_KEY, 256, 4>);

impl Heads {
    /// Where the members after a remembered head at `i` start, its members put in `e`; and
    /// its set and hint where its bytes hold the category and name.
    fn find(&mut self, t: &[u8], i: usize, e: &mut Event) -> Option<(usize, Option<Hinted>)> {
        let (set, h) = self.0.find(t, i, |h| {
            t.get(i + h.len as usize).is_some_and(|&b| b > b' ')
        })?;
        let hinted = h.named.then_some(Hinted { set, hint: h.hint });
        for &(key, from, to, kind) in &h.members[..usize::from(h.n)] {
            let slot = match key {
                0 => &mut e.ph,
                1 => &mut e.cat,
                2 => &mut e.name,
                3 => &mut e.pid,
                _ => &mut e.tid,
            };
            *slot = Some(Val {
                start: i + from as usize,
                end: i + to as usize,
                kind,
            });
        }
        Some((i + h.len as usize, hinted))
    }

    /// Keep the head of the event at `i`, walked and accepted: its set and (empty) hint
    /// where its bytes hold the category and name.
    fn keep(&mut self, t: &[u8], i: usize, mut head: Head) -> Option<Hinted> {
        let start = u32::try_from(i).ok()?;
        head.start = start;
        head.named = head.hinted();
        let set = self.0.keep(t, i, head)?;
        head.named.then_some(Hinted {
            set,
            hint: Hint::default(),
        })
    }

    /// Give the most recent head of `set` (the last found or kept) its hint.
    fn set_hint(&mut self, hinted: Hinted) {
        if let Some(h) = self.0.first_mut(hinted.set) {
            h.hint = hinted.hint;
        }
    }
}

/// Members of a flat event at most (a flow has eight).
const FLAT_MEMBERS: usize = 12;
/// Flat events remembered, most recent first.
const FLATS: usize = 4;
/// A top-level key that is no field of `Event` (Member::field).
const NO_FIELD: u8 = 9;

/// A member of a flat event: its value's offset from the event's `{` and length, the field
/// it is (`field_of`) and its type.
#[derive(Debug, Clone, Copy, Default)]
struct Member {
    value: u32,
    len: u32,
    field: u8,
    kind: Kind,
}

impl Member {
    /// A string, literal or null: remembered with the bytes around it (a number or a
    /// container is walked again).
    fn fixed(&self) -> bool {
        matches!(
            self.kind,
            Kind::Str | Kind::StrEscaped | Kind::Literal | Kind::Null
        )
    }
}

/// A flat event as walked: no args object and no remembered head (a flow). `len` bytes
/// from `start` (0: none), its members in order.
#[derive(Debug, Clone, Copy, Default)]
struct Flat {
    start: u32,
    len: u32,
    n: usize,
    members: [Member; FLAT_MEMBERS],
}

/// The flat events of a chunk last walked. An event whose bytes equal a remembered one's
/// outside its numbers and containers, and whose numbers and containers walk as values
/// where that one's were, is walked as it was walked: its strings, literals, keys,
/// separators and whitespace are the same bytes, each value's walk reads only its own bytes
/// and starts at a byte that is not whitespace (so a whitespace run stops where it stopped),
/// and no number or container ends where a separator, whitespace or `}` begins.
struct Flats {
    all: [Flat; FLATS],
    /// Indices into `all`, most recent first.
    order: [u8; FLATS],
}

impl Default for Flats {
    fn default() -> Self {
        Flats {
            all: [Flat::default(); FLATS],
            order: std::array::from_fn(|n| n as u8),
        }
    }
}

impl Flat {
    /// Note a member's value (of the event at `event`): whether the event may still be flat.
    #[inline(always)]
    fn note(&mut self, event: usize, v: Val, field: u8) -> bool {
        let (Some(m), Ok(value), Ok(len)) = (
            self.members.get_mut(self.n),
            u32::try_from(v.start - event),
            u32::try_from(v.end - v.start),
        ) else {
            return false;
        };
        *m = Member {
            value,
            len,
            field,
            kind: v.kind,
        };
        self.n += 1;
        true
    }
}

/// The field of `e` a member's value goes to (None: not kept).
fn field_of(e: &mut Event, field: u8) -> Option<&mut Option<Val>> {
    Some(match field {
        0 => &mut e.ph,
        1 => &mut e.cat,
        2 => &mut e.name,
        3 => &mut e.pid,
        4 => &mut e.tid,
        5 => &mut e.ts,
        6 => &mut e.dur,
        7 => &mut e.args,
        8 => &mut e.id,
        _ => return None,
    })
}

/// The field code of a top-level key (top_slot!'s keys, in `field_of`'s order).
fn field_code(key: &[u8]) -> u8 {
    match key {
        b"ph" => 0,
        b"cat" => 1,
        b"name" => 2,
        b"pid" => 3,
        b"tid" => 4,
        b"ts" => 5,
        b"dur" => 6,
        b"args" => 7,
        b"id" => 8,
        _ => NO_FIELD,
    }
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(t: &'a [u8]) -> Self {
        Scanner {
            t,
            memo: RefCell::default(),
            heads: RefCell::default(),
            hinted: Cell::new(None),
            flats: RefCell::default(),
        }
    }

    /// The end of the whitespace at `i`: most calls find a value's first byte there (every
    /// byte that may start or end one is above a space), told by one compare.
    #[inline]
    pub(crate) fn ws(&self, i: usize) -> usize {
        match self.t.get(i) {
            Some(&b) if b <= b' ' => self.ws_run(i),
            _ => i,
        }
    }

    /// `ws` past its first byte: sixteen bytes a step (a pretty-printed trace's newline and
    /// indentation in one).
    #[inline(always)]
    fn ws_run(&self, mut i: usize) -> usize {
        // one space before a value, the commonest run
        if self.t.get(i) == Some(&b' ') && self.t.get(i + 1).is_some_and(|&b| b > b' ') {
            return i + 1;
        }
        loop {
            let Some(chunk) = self.t.get(i..).and_then(|r| r.first_chunk::<16>()) else {
                let rest = self.t.get(i..).unwrap_or_default();
                return i + rest.iter().take_while(|&&b| simd::is_ws(b)).count();
            };
            let n = simd::first_non_ws(chunk);
            i += n;
            if n < 16 {
                return i;
            }
        }
    }

    /// The commonest separator, `c` then one space before a token at `i`: the token's
    /// offset (what `ws`, the check of `c` and `ws` again give), else None.
    #[inline(always)]
    fn separator(&self, i: usize, c: u8) -> Option<usize> {
        match self.t.get(i..i + 3) {
            Some(&[b, b' ', next]) if b == c && next > b' ' => Some(i + 2),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn byte(&self, i: usize) -> Scan<u8> {
        match self.t.get(i) {
            Some(&b) => Ok(b),
            None => refuse(i, "the chunk ends inside a value"),
        }
    }

    #[inline]
    fn string(&self, i: usize) -> Scan<Val> {
        match strings::check(self.t, i) {
            Ok(c) => Ok(Val {
                start: i,
                end: c.end,
                kind: Kind::string(c.escaped),
            }),
            Err((at, why)) => string_refused(at, why),
        }
    }

    /// A scalar at `i` (not a container).
    #[inline]
    fn scalar(&self, i: usize) -> Scan<Val> {
        match self.scalar_end(i) {
            Some((end, kind)) => Ok(Val {
                start: i,
                end,
                kind,
            }),
            None => self.scalar_refused(i),
        }
    }

    /// A scalar's end and kind, None where `scalar_refused` says why.
    #[inline(always)]
    fn scalar_end(&self, i: usize) -> Option<(usize, Kind)> {
        let t = self.t;
        match *t.get(i)? {
            b'"' => match strings::check(t, i) {
                Ok(c) => Some((c.end, Kind::string(c.escaped))),
                Err(_) => None,
            },
            b'-' | b'0'..=b'9' => Some((i + numbers::length(&t[i..])?, Kind::Num)),
            b't' if t[i..].starts_with(b"true") => Some((i + 4, Kind::Literal)),
            b'f' if t[i..].starts_with(b"false") => Some((i + 5, Kind::Literal)),
            b'n' if t[i..].starts_with(b"null") => Some((i + 4, Kind::Null)),
            _ => None,
        }
    }

    #[cold]
    #[inline(never)]
    fn scalar_refused(&self, i: usize) -> Scan<Val> {
        match self.byte(i)? {
            b'"' => self.string(i),
            b'-' | b'0'..=b'9' => refuse(i, "a malformed number"),
            _ => refuse(i, "not a JSON value"),
        }
    }

    /// Any value at `i` (no whitespace before it), checked whole; nesting walked with an
    /// explicit stack of at most MAX_DEPTH levels.
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Scan<Val> {
        self.value_within(i, 0)
    }

    /// `value` for a value inside `outer` open containers that count against MAX_DEPTH
    /// (an args member: 1, as if args were walked whole).
    #[inline(always)]
    pub(crate) fn value_within(&self, i: usize, outer: usize) -> Scan<Val> {
        match self.byte(i)? {
            b'{' | b'[' => self.container(i, outer),
            _ => self.scalar(i),
        }
    }

    /// `value_within` for an object or array at `i`.
    #[inline]
    fn container(&self, i: usize, outer: usize) -> Scan<Val> {
        let mut memo = self.memo.borrow_mut();
        let end = match memo.find(self.t, i, outer) {
            Some(end) => Some(end),
            None => {
                let end = self.skip_container(i, outer);
                if let Some(end) = end {
                    memo.keep(self.t, i, end, outer);
                }
                end
            }
        };
        drop(memo);
        match end {
            Some(end) => Ok(Val {
                start: i,
                end,
                kind: if self.t[i] == b'{' {
                    Kind::Object
                } else {
                    Kind::Array
                },
            }),
            None => self.container_refused(i, outer),
        }
    }

    /// The end of the object or array at `i`, checked as `container_refused` checks it (the
    /// same values accepted, the same end), in one tight loop: None where that says why. The
    /// open containers are bits of a word (1: an object), the innermost lowest.
    fn skip_container(&self, i: usize, outer: usize) -> Option<usize> {
        let t = self.t;
        let mut objects: u64 = 0;
        let mut depth = 0usize;
        let mut j = i;
        loop {
            // at a value
            let b = *t.get(j)?;
            if b == b'{' || b == b'[' {
                if depth > 0 && outer + depth >= MAX_DEPTH {
                    return None;
                }
                objects = (objects << 1) | u64::from(b == b'{');
                depth += 1;
                j = self.ws(j + 1);
                if *t.get(j)? == b + 2 {
                    // `{}` or `[]` (the closing bracket is the opening one + 2)
                    objects >>= 1;
                    depth -= 1;
                    j += 1;
                } else {
                    if b == b'{' {
                        j = self.key_colon(j)?;
                    }
                    continue;
                }
            } else {
                j = self.scalar_end(j)?.0;
            }
            // after a value
            loop {
                if depth == 0 {
                    return Some(j);
                }
                if let Some(next) = self.separator(j, b',') {
                    j = next;
                    if objects & 1 == 1 {
                        j = self.key_colon(j)?;
                    }
                    break;
                }
                j = self.ws(j);
                let c = *t.get(j)?;
                if c == b',' {
                    j = self.ws(j + 1);
                    if objects & 1 == 1 {
                        j = self.key_colon(j)?;
                    }
                    break;
                }
                if c != if objects & 1 == 1 { b'}' } else { b']' } {
                    return None;
                }
                objects >>= 1;
                depth -= 1;
                j += 1;
            }
        }
    }

    /// After a key string at `i`, its colon and the whitespace around it: the value's offset.
    #[inline(always)]
    fn key_colon(&self, i: usize) -> Option<usize> {
        if self.t.get(i) != Some(&b'"') {
            return None;
        }
        let j = self.ws(strings::check(self.t, i).ok()?.end);
        (self.t.get(j) == Some(&b':')).then(|| self.ws(j + 1))
    }

    /// The full walk of an object or array that `skip_container` did not take: why it is
    /// refused.
    #[cold]
    #[inline(never)]
    fn container_refused(&self, i: usize, outer: usize) -> Scan<Val> {
        let open = self.byte(i)?;
        let mut stack = Stack::default();
        stack.push(open);
        let mut j = i + 1;
        let mut may_close = true;
        loop {
            // At the start of a container (may_close) or after a comma: an element.
            j = self.ws(j);
            let top = *stack.last().unwrap_or(&b'[');
            let close = if top == b'{' { b'}' } else { b']' };
            let b = self.byte(j)?;
            if may_close && b == close {
                stack.pop();
                j += 1;
            } else {
                if top == b'{' {
                    if b != b'"' {
                        return refuse(j, "expected a key");
                    }
                    j = self.ws(self.string(j)?.end);
                    if self.byte(j)? != b':' {
                        return refuse(j, "expected :");
                    }
                    j = self.ws(j + 1);
                }
                let b = self.byte(j)?;
                if b == b'{' || b == b'[' {
                    if outer + stack.len() >= MAX_DEPTH {
                        return refuse(j, "nested too deeply");
                    }
                    stack.push(b);
                    j += 1;
                    may_close = true;
                    continue;
                }
                j = self.scalar(j)?.end;
            }
            // After an element or a closed container.
            loop {
                if stack.is_empty() {
                    let kind = if open == b'{' {
                        Kind::Object
                    } else {
                        Kind::Array
                    };
                    return Ok(Val {
                        start: i,
                        end: j,
                        kind,
                    });
                }
                j = self.ws(j);
                let top = *stack.last().unwrap_or(&b'[');
                let close = if top == b'{' { b'}' } else { b']' };
                let b = self.byte(j)?;
                if b == b',' {
                    j += 1;
                    may_close = false;
                    break;
                }
                if b != close {
                    return refuse(j, "expected , or a closing bracket");
                }
                stack.pop();
                j += 1;
                if stack.is_empty() {
                    continue;
                }
            }
        }
    }

    /// The members of an object at `i`: each key (unescaped text) with its value's offset,
    /// given to `field`, which walks the value and gives its end; the object's end.
    pub(crate) fn members(
        &self,
        i: usize,
        field: impl FnMut(&'a [u8], usize) -> Scan<usize>,
    ) -> Scan<usize> {
        let j = self.ws(i + 1);
        if self.byte(j)? == b'}' {
            return Ok(j + 1);
        }
        self.members_at(j, field)
    }

    /// `members` from the key at `j` (past the object's `{` and any members before it).
    fn members_at(
        &self,
        mut j: usize,
        mut field: impl FnMut(&'a [u8], usize) -> Scan<usize>,
    ) -> Scan<usize> {
        loop {
            if self.byte(j)? != b'"' {
                return refuse(j, "expected a key");
            }
            let key = self.string(j)?;
            if key.kind != Kind::Str {
                return refuse(j, "an escaped key");
            }
            let name = &self.t[key.start + 1..key.end - 1];
            j = match self.separator(key.end, b':') {
                Some(value) => value,
                None => {
                    j = self.ws(key.end);
                    if self.byte(j)? != b':' {
                        return refuse(j, "expected :");
                    }
                    self.ws(j + 1)
                }
            };
            j = field(name, j)?;
            if let Some(next) = self.separator(j, b',') {
                j = next;
                continue;
            }
            j = self.ws(j);
            match self.byte(j)? {
                b',' => j = self.ws(j + 1),
                b'}' => return Ok(j + 1),
                _ => return refuse(j, "expected , or }"),
            }
        }
    }

    /// `members` of the object at `i`, or from the key at `resume`.
    #[inline(always)]
    fn members_at_or_all(
        &self,
        i: usize,
        resume: Option<usize>,
        field: impl FnMut(&'a [u8], usize) -> Scan<usize>,
    ) -> Scan<usize> {
        match resume {
            Some(j) => self.members_at(j, field),
            None => self.members(i, field),
        }
    }

    /// The event object at `i` and its end. Its args object is walked once, member by
    /// member (each member's value checked whole, as deep as if args were walked whole).
    /// Its fields go to `e` (reset first: one Event serves a chunk, not ~600 bytes returned
    /// by value for each event).
    fn event(&self, i: usize, e: &mut Event) -> Scan<usize> {
        *e = Event::default();
        let t = self.t;
        // the members after a remembered head, else all (the head noted as they come)
        let found = self.heads.borrow_mut().find(t, i, e);
        self.hinted.set(found.and_then(|f| f.1));
        match found {
            Some((resume, _)) => self.walk::<false>(i, Some(resume), e),
            None => self.whole(i, e),
        }
    }

    /// `event` without a remembered head: as a remembered flat event, else walked whole.
    #[inline(never)]
    fn whole(&self, i: usize, e: &mut Event) -> Scan<usize> {
        if let Some(end) = self.flat(i, e) {
            return Ok(end);
        }
        *e = Event::default();
        self.walk::<true>(i, None, e)
    }

    /// `event` member by member, from the key at `resume` after a remembered head (its
    /// members in `e`), else from the `{` (`WHOLE`), its head and (flat) layout noted.
    #[inline(always)]
    fn walk<const WHOLE: bool>(
        &self,
        i: usize,
        resume: Option<usize>,
        e: &mut Event,
    ) -> Scan<usize> {
        let t = self.t;
        let mut head = Head::default();
        let mut noting = WHOLE;
        // the members of a flat event (Flat), while it may be one
        let mut flat = Flat::default();
        let mut flat_ok = WHOLE;
        let end = self.members_at_or_all(i, resume, |key, j| {
            if noting {
                let at = key.as_ptr() as usize - t.as_ptr() as usize - 1;
                noting = head.note(key, at - i);
            }
            if key == b"args" && self.t.get(j) == Some(&b'{') {
                flat_ok = false;
                if let Some(first) = e.args {
                    return refuse(first.start.max(j), "a repeated key");
                }
                let end = self.members(j, |key, j| {
                    let value = self.value_within(j, 1)?;
                    let slot = match arg_key(key) {
                        ArgKey::Correlation => &mut e.correlation,
                        ArgKey::Device => &mut e.device,
                        ArgKey::Stream => &mut e.stream,
                        ArgKey::Launch(n) => &mut e.launch[n],
                        ArgKey::Shape(n) => &mut e.shape[n],
                        ArgKey::Python(n) => &mut e.python[n],
                        ArgKey::Any => {
                            e.extra_any.get_or_insert(value);
                            return Ok(value.end);
                        }
                        ArgKey::Other => return Ok(value.end),
                    };
                    keep(slot, value)?;
                    Ok(value.end)
                })?;
                e.args = Some(Val {
                    start: j,
                    end,
                    kind: Kind::Object,
                });
                return Ok(end);
            }
            let value = self.value(j)?;
            if WHOLE && flat_ok {
                flat_ok = flat.note(i, value, field_code(key));
            }
            let Some(slot) = top_slot!(e, key) else {
                return Ok(value.end);
            };
            keep(slot, value)?;
            if noting {
                noting = head.value(value, i);
            }
            Ok(value.end)
        })?;
        if !WHOLE {
        } else if head.kept() {
            self.hinted.set(self.heads.borrow_mut().keep(t, i, head));
        } else if flat_ok {
            if let (Ok(start), Ok(len)) = (u32::try_from(i), u32::try_from(end - i)) {
                (flat.start, flat.len) = (start, len);
                // in place of the least recent
                let mut flats = self.flats.borrow_mut();
                to_front(&mut flats.order);
                let n = usize::from(flats.order[0]);
                if let Some(slot) = flats.all.get_mut(n) {
                    *slot = flat;
                }
            }
        }
        Ok(end)
    }

    /// The flat event at `i` walked as a remembered one (Flats), its fields put in `e`: its
    /// end, else None (`e` then holds some of them).
    fn flat(&self, i: usize, e: &mut Event) -> Option<usize> {
        let mut flats = self.flats.borrow_mut();
        for n in 0..FLATS {
            let f = flats.all.get(usize::from(flats.order[n]))?;
            if f.len == 0 {
                return None;
            }
            if let Some(end) = self.flat_as(f, i, e) {
                to_front(&mut flats.order[..=n]);
                return Some(end);
            }
            *e = Event::default();
        }
        None
    }

    /// `flat` for one remembered event `f`.
    #[inline(always)]
    fn flat_as(&self, f: &Flat, i: usize, e: &mut Event) -> Option<usize> {
        let t = self.t;
        let start = f.start as usize;
        // the bytes from `from` in `f` to compare with those from `at`
        let (mut from, mut at) = (start, i);
        for m in f.members.get(..f.n)? {
            let value = start + m.value as usize;
            if m.fixed() {
                let v = Val {
                    start: at + (value - from),
                    end: at + (value - from) + m.len as usize,
                    kind: m.kind,
                };
                if let Some(slot) = field_of(e, m.field) {
                    keep(slot, v).ok()?;
                }
                continue;
            }
            if !simd::same_run(t, from, at, value - from) {
                return None;
            }
            at += value - from;
            // an object there is args, walked member by member
            if m.field == 7 && t.get(at) == Some(&b'{') {
                return None;
            }
            let v = self.value(at).ok()?;
            if let Some(slot) = field_of(e, m.field) {
                keep(slot, v).ok()?;
            }
            (from, at) = (value + m.len as usize, v.end);
        }
        let rest = start + f.len as usize - from;
        simd::same_run(t, from, at, rest).then_some(at + rest)
    }

    /// The hint of the last event's head, where it has one.
    fn hinted(&self) -> Option<Hinted> {
        self.hinted.get()
    }

    /// Keep what the lists said of the last event's category and name with its head.
    fn set_hint(&self, hinted: Hinted) {
        self.heads.borrow_mut().set_hint(hinted);
    }

    /// The whole chunk.
    pub(crate) fn chunk(&self) -> &'a [u8] {
        self.t
    }

    /// numbers::is_small_int of a number value.
    pub(crate) fn is_small_int(&self, v: Val) -> bool {
        numbers::is_small_int(self.t, v.start, v.end)
    }

    /// numbers::has_exponent of a number value.
    pub(crate) fn has_exponent(&self, v: Val) -> bool {
        numbers::has_exponent(self.t, v.start, v.end)
    }

    /// numbers::int_digits_and_exp of a number value.
    pub(crate) fn int_digits_and_exp(&self, v: Val) -> (usize, bool) {
        numbers::int_digits_and_exp(self.t, v.start, v.end)
    }

    pub(crate) fn text(&self, v: Val) -> &'a [u8] {
        &self.t[v.start..v.end]
    }

    /// The body of a string without escapes, else None.
    pub(crate) fn plain_str(&self, v: Option<Val>) -> Option<&'a [u8]> {
        let v = v?;
        (v.kind == Kind::Str).then(|| &self.t[v.start + 1..v.end - 1])
    }

    pub(crate) fn number(&self, v: Val) -> Token<'a> {
        // checked when scanned: a number token spans the whole value
        numbers::token(self.text(v))
            .map(|(t, _)| t)
            .unwrap_or(Token {
                negative: false,
                int: b"0",
                frac: b"",
                has_exp: false,
            })
    }
}

pub(crate) fn keep(slot: &mut Option<Val>, value: Val) -> Scan<()> {
    if slot.is_some() {
        return refuse(value.start, "a repeated key");
    }
    *slot = Some(value);
    Ok(())
}

/// What the lists say of a category's text (CATEGORIES, the drop rule's known and
/// categories), found once for each distinct category of a chunk (the first 16 of them).
#[derive(Debug, Clone, Copy)]
struct Category {
    ascii: bool,
    kind: Option<i8>,
    known: bool,
    dropped: bool,
}

struct Categories<'t, 'r> {
    rule: Option<&'r DropRule>,
    seen: Vec<(&'t [u8], Category)>,
}

impl<'t> Categories<'t, '_> {
    fn of(&mut self, cat: &'t [u8]) -> Category {
        if let Some(&(_, found)) = self.seen.iter().find(|(text, _)| *text == cat) {
            return found;
        }
        let same = |c: &[u8]| c.eq_ignore_ascii_case(cat);
        let found = Category {
            ascii: cat.is_ascii(),
            kind: CATEGORIES.iter().find(|(c, _)| same(c)).map(|&(_, k)| k),
            known: self.rule.is_some_and(|r| r.known.iter().any(|c| same(c))),
            dropped: self
                .rule
                .is_some_and(|r| r.categories.iter().any(|c| same(c))),
        };
        if self.seen.len() < 16 {
            self.seen.push((cat, found));
        }
        found
    }
}

/// The row kind of an event: a complete event ("X") of a GPU or runtime category; and its
/// category, where looked up (for `droppable`).
fn kind_of<'t>(
    s: &Scanner<'t>,
    e: &Event,
    cats: &mut Categories<'t, '_>,
    hint: Option<&mut Hint>,
) -> Scan<(Option<i8>, Option<Category>)> {
    match e.ph {
        None => return Ok((None, None)),
        Some(v) if !matches!(v.kind, Kind::Str | Kind::StrEscaped) => {
            return refuse(v.start, "ph not text")
        }
        _ => {}
    }
    let Some(ph) = s.plain_str(e.ph) else {
        return refuse(e.ph.map_or(0, |v| v.start), "an escaped ph");
    };
    if ph != b"X" {
        return Ok((None, None));
    }
    let Some(cat_value) = e.cat else {
        return Ok((None, None));
    };
    let Some(cat) = s.plain_str(Some(cat_value)) else {
        return refuse(cat_value.start, "cat not plain text");
    };
    let found = match hint {
        Some(h) => *h.cat.get_or_insert_with(|| cats.of(cat)),
        None => cats.of(cat),
    };
    if !found.ascii {
        // str.lower() maps some non-ASCII letters to ASCII ones (K, the Kelvin sign → k)
        return refuse(cat_value.start, "a non-ASCII cat");
    }
    Ok((found.kind, Some(found)))
}

/// What an event's field may be: `int | str | None` (pid, tid, device, stream).
pub(crate) fn int_or_text(s: &Scanner<'_>, v: Option<Val>) -> Scan<&'static [u8]> {
    let Some(v) = v else { return Ok(b"null") };
    match v.kind {
        Kind::Str | Kind::StrEscaped | Kind::Null => Ok(b""),
        Kind::Num if s.is_small_int(v) => Ok(b""),
        _ => refuse(v.start, "a field that is not an int, text or null"),
    }
}

/// The field's JSON text, `null` when absent (after int_or_text).
pub(crate) fn text_or_null<'a>(s: &Scanner<'a>, v: Option<Val>) -> &'a [u8] {
    v.map_or(b"null", |v| s.text(v))
}

fn non_null(v: Option<Val>) -> Option<Val> {
    v.filter(|v| v.kind != Kind::Null)
}

struct Pending {
    gpu_ts: Vec<Val>,
    gpu_dur: Vec<Val>,
    rt_ts: Vec<Val>,
    rt_dur: Vec<Val>,
    /// The thread, stream and launch keys, built here (not allocated for each row).
    key: Vec<u8>,
}

impl Chunk {
    /// Room for `rows` GPU and runtime rows (cpu::rows_for).
    fn reserve(&mut self, pending: &mut Pending, rows: usize, options: &Options) {
        self.gpu_kind.reserve(rows);
        for column in [
            &mut self.gpu_name,
            &mut self.gpu_stream,
            &mut self.gpu_launch,
        ] {
            column.reserve(rows);
        }
        for column in [&mut self.gpu_correlation, &mut self.rt_correlation] {
            column.reserve(rows);
        }
        if options.keep_cpu {
            for column in [&mut self.rt_name, &mut self.rt_thread] {
                column.reserve(rows);
            }
        }
        for column in [
            &mut pending.gpu_ts,
            &mut pending.gpu_dur,
            &mut pending.rt_ts,
            &mut pending.rt_dur,
        ] {
            column.reserve(rows);
        }
    }
}

/// Scan one chunk: events separated by commas, no brackets around them.
pub fn scan(text: &[u8], options: &Options) -> Scan<Chunk> {
    let (ascii, comm) = simd::ascii_and_find(text, COMM_KEY);
    if !ascii {
        if let Err(e) = std::str::from_utf8(text) {
            return refuse(e.valid_up_to(), "invalid UTF-8");
        }
    }
    let s = Scanner::new(text);
    let mut keeps = KeepNames::new(options.drop.as_ref());
    let mut cats = Categories {
        rule: options.drop.as_ref(),
        seen: Vec::new(),
    };
    let mut out = Chunk::default();
    let mut pending = Pending {
        gpu_ts: Vec::new(),
        gpu_dur: Vec::new(),
        rt_ts: Vec::new(),
        rt_dur: Vec::new(),
        key: Vec::new(),
    };
    out.cpu.shapes.raw = true;
    let mut cpu_pending = cpu::Pending::default();
    cpu_pending.comm_chunk = comm.is_some();
    out.comm_chunk = comm.is_some();
    out.cpu.reserve(&mut cpu_pending, text.len(), options);
    out.others.reserve(2 * cpu::rows_for(text.len()));
    out.reserve(&mut pending, cpu::rows_for(text.len()), options);
    out.seen = options.seen.then(crate::spans::Seen::default);
    let mut e = Event::default();
    let mut i = s.ws(0);
    if i == text.len() {
        return refuse(i, "no event");
    }
    loop {
        let start = i;
        let end = if s.byte(i)? == b'{' {
            let end = s.event(i, &mut e)?;
            if let Some(seen) = out.seen.as_mut() {
                seen.see(&s, &e);
            }
            let mut hinted = s.hinted();
            let before = hinted.map(|h| h.hint.found());
            let (kind, cat) = kind_of(&s, &e, &mut cats, hinted.as_mut().map(|h| &mut h.hint))?;
            let taken = match kind {
                Some(kind) if kind <= MEMSET || kind == RUNTIME => {
                    row(&s, &e, kind, options, &mut out, &mut pending)?;
                    true
                }
                Some(kind) => cpu::take(&s, &e, kind, options, &mut out.cpu, &mut cpu_pending)?,
                None => cpu::take_flow(&s, &e, options, &mut out.cpu, &mut cpu_pending)?,
            };
            if taken {
                if out.comm_chunk && e.extra_any.is_some() {
                    let row = match kind {
                        Some(kind) if kind <= MEMSET => out.gpu_kind.len() as i64 - 1,
                        Some(RUNTIME) => COMM_CHECKED,
                        // cpu::take takes no other row with such a field in this chunk
                        _ => -(out.cpu.op_mark.len() as i64),
                    };
                    out.comm.extend([start as i64, end as i64, row]);
                }
            } else if options.drop.as_ref().is_some_and(|r| {
                let hint = hinted.as_mut().map(|h| &mut h.hint);
                droppable(&s, &e, cat, r, &mut keeps, &mut cats, hint, options)
            }) {
                out.dropped += 1;
            } else {
                out.others.extend([start as i64, end as i64]);
            }
            // kept with the head where something was found since
            if let Some(h) = hinted.filter(|h| Some(h.hint.found()) != before) {
                s.set_hint(h);
            }
            end
        } else {
            let end = s.value(i)?.end; // not an object: the Python side says what it is
            out.others.extend([start as i64, end as i64]);
            if let Some(seen) = out.seen.as_mut() {
                seen.not_an_event();
            }
            end
        };
        out.events += 1;
        i = s.ws(end);
        if i == text.len() {
            break;
        }
        if text[i] != b',' {
            return refuse(i, "expected , between events");
        }
        i = s.ws(i + 1);
    }
    out.gpu_ts = times(&s, &pending.gpu_ts, options, false)?;
    out.gpu_dur = times(&s, &pending.gpu_dur, options, true)?;
    out.rt_ts = times(&s, &pending.rt_ts, options, false)?;
    out.rt_dur = times(&s, &pending.rt_dur, options, true)?;
    out.cpu.finish(&s, options, &mut cpu_pending)?;
    if let Some(seen) = out.seen.as_mut() {
        seen.events = out.events as i64;
    }
    Ok(out)
}

/// A column of ts or dur values as ns, as the Python path's batch conversion gives it (or
/// refused where that conversion would not take it).
pub(crate) fn times(
    s: &Scanner<'_>,
    values: &[Val],
    options: &Options,
    is_dur: bool,
) -> Scan<Vec<i64>> {
    let at = values.first().map_or(0, |v| v.start);
    let column = if options.exact {
        numbers::map_all(values, |&v| numbers::exact_ns(&s.number(v)))
    } else {
        numbers::map_all(values, |&v| numbers::plain(&s.number(v)))
            .and_then(|plain| numbers::plain_column(&plain))
    };
    match column {
        Some(ns) if !(is_dur && ns.iter().any(|&d| d < 0)) => Ok(ns),
        _ => refuse(at, "times the batch conversion does not take"),
    }
}

fn row(
    s: &Scanner<'_>,
    e: &Event,
    kind: i8,
    options: &Options,
    out: &mut Chunk,
    pending: &mut Pending,
) -> Scan<()> {
    // Each declared field as the fast decoder types it (traceview/read/decode.py Event).
    for v in [e.cat, e.name].into_iter().flatten() {
        if !matches!(v.kind, Kind::Str | Kind::StrEscaped) {
            return refuse(v.start, "cat or name not text");
        }
    }
    int_or_text(s, e.pid)?;
    int_or_text(s, e.tid)?;
    let (Some(ts), Some(dur)) = (e.ts, e.dur) else {
        return refuse(e.ph.map_or(0, |v| v.start), "ts or dur missing");
    };
    for v in [ts, dur] {
        if v.kind != Kind::Num {
            return refuse(v.start, "ts or dur not a number");
        }
    }
    let args = e.args.filter(|a| a.kind != Kind::Null);
    if let Some(a) = args {
        if a.kind != Kind::Object {
            return refuse(a.start, "args not an object");
        }
    }
    int_or_text(s, e.device)?;
    int_or_text(s, e.stream)?;
    if options.keep_frames && !cpu::frame_fields_decodable(s, e) {
        return refuse(
            args.map_or(0, |a| a.start),
            "a frame field the decoder may reject",
        );
    }
    let correlation = match e.correlation.filter(|v| v.kind != Kind::Null) {
        None => -1,
        Some(v) if v.kind == Kind::Num => match numbers::small_int(&s.number(v)) {
            Some(c) if c >= -1 => c,
            _ => return refuse(v.start, "a correlation out of range"),
        },
        Some(v) => return refuse(v.start, "a correlation not an int"),
    };
    let name = e.name.map_or(&b"\"\""[..], |v| s.text(v));
    if kind == RUNTIME {
        pending.rt_ts.push(ts);
        pending.rt_dur.push(dur);
        out.rt_correlation.push(correlation);
        if options.keep_cpu {
            out.rt_name.push(out.rt_names.id(name));
            let key = &mut pending.key;
            key.clear();
            pair(key, text_or_null(s, e.pid), text_or_null(s, e.tid));
            out.rt_thread.push(out.threads.id(key));
        }
        return Ok(());
    }
    pending.gpu_ts.push(ts);
    pending.gpu_dur.push(dur);
    out.gpu_kind.push(kind);
    out.gpu_name.push(out.gpu_names.id(name));
    out.gpu_correlation.push(correlation);
    // (device, stream) = args.device, else pid; args.stream, else tid (columns/batch.py)
    let key = &mut pending.key;
    key.clear();
    match non_null(e.device) {
        Some(device) if args.is_some() => {
            let stream = non_null(e.stream).or(e.tid);
            pair(key, s.text(device), text_or_null(s, stream));
        }
        _ => pair(key, text_or_null(s, e.pid), text_or_null(s, e.tid)),
    }
    out.gpu_stream.push(out.streams.id(key));
    key.clear();
    if args.is_none() {
        key.extend_from_slice(b"null");
    } else {
        for (n, v) in e.launch.iter().enumerate() {
            key.push(if n == 0 { b'[' } else { b',' });
            if let Some(v) = v {
                if v.kind == Kind::Object || (v.kind == Kind::Array && nested(s, *v)) {
                    // unhashable parts: launches._hashable's path, left to Python
                    return refuse(v.start, "a launch value that is not flat");
                }
            }
            key.extend_from_slice(text_or_null(s, *v));
        }
        key.push(b']');
    }
    out.gpu_launch.push(out.launches.id(key));
    Ok(())
}

/// Whether an event that is not a row may be dropped: the rule says the collector never
/// keeps it, and the fast decoder would take its fields (else the Python side decides).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn droppable<'t>(
    s: &Scanner<'t>,
    e: &Event,
    found: Option<Category>,
    rule: &DropRule,
    keeps: &mut KeepNames<'t, '_>,
    cats: &mut Categories<'t, '_>,
    hint: Option<&mut Hint>,
    options: &Options,
) -> bool {
    let Some(name) = (match e.name {
        None => Some(&b""[..]),
        Some(v) => s.plain_str(Some(v)),
    }) else {
        return false;
    };
    let ph = match e.ph {
        None => Some(&b""[..]),
        Some(v) => s.plain_str(Some(v)),
    };
    // kind_of's lookup where it made one (an ASCII category)
    let cat = match (found, e.cat) {
        (Some(found), _) => Some(found),
        (None, None) => Some(cats.of(b"")),
        (None, Some(v)) => s.plain_str(Some(v)).map(|c| cats.of(c)).filter(|c| c.ascii),
    };
    let (Some(ph), Some(cat)) = (ph, cat) else {
        return false;
    };
    let known = ph == b"X" && cat.known;
    let dropped = if known {
        cat.dropped
            && !match hint {
                Some(h) => *h.kept.get_or_insert_with(|| keeps.kept(name)),
                None => keeps.kept(name),
            }
    } else {
        !rule.keep_other_names.iter().any(|n| *n == name)
    };
    dropped && decodable(s, e, options)
}

/// The drop rule's keep lists (name prefixes, suffixes, texts held) asked of a name once a
/// chunk: the answers of the names last met, in SLOTS slots by a hash of the name's length and
/// first and last eight bytes (most dropped ops repeat a few hundred names).
const SLOTS: usize = 512;
/// A name and whether a keep list names it.
type Slot<'t> = Option<(&'t [u8], bool)>;

struct KeepNames<'t, 'r> {
    rule: Option<&'r DropRule>,
    contains: Vec<memchr::memmem::Finder<'r>>,
    slots: Box<[Slot<'t>; SLOTS]>,
}

impl<'t, 'r> KeepNames<'t, 'r> {
    fn new(rule: Option<&'r DropRule>) -> Self {
        KeepNames {
            rule,
            contains: rule.map_or(vec![], |r| {
                r.keep_contains
                    .iter()
                    .map(memchr::memmem::Finder::new)
                    .collect()
            }),
            slots: Box::new([None; SLOTS]),
        }
    }

    /// Whether a keep list names `name`.
    #[inline(never)]
    fn kept(&mut self, name: &'t [u8]) -> bool {
        let slot = short_slot(name, SLOTS);
        if let Some(Some((text, kept))) = self.slots.get(slot) {
            if *text == name {
                return *kept;
            }
        }
        let kept = self.rule.is_some_and(|rule| {
            rule.keep_prefixes.iter().any(|p| name.starts_with(p))
                || rule.keep_suffixes.iter().any(|p| name.ends_with(p))
                || self.contains.iter().any(|f| f.find(name).is_some())
        });
        if let Some(entry) = self.slots.get_mut(slot) {
            *entry = Some((name, kept));
        }
        kept
    }
}

/// Whether the fast decoder takes the fields of an event it does not keep: their types, and
/// values its `Any` fields (launch configuration) would not overflow on (else not dropped).
fn decodable(s: &Scanner<'_>, e: &Event, options: &Options) -> bool {
    let small_int = |v: Option<Val>| match v {
        None => true,
        Some(v) => match v.kind {
            Kind::Null | Kind::Str | Kind::StrEscaped => true,
            Kind::Num => s.is_small_int(v),
            _ => false,
        },
    };
    let time = |v: Option<Val>| match v {
        None => true,
        Some(v) if v.kind == Kind::Null => true,
        // exact times take any number without an exponent: its digits are not counted
        Some(v) if v.kind == Kind::Num && options.exact => !s.has_exponent(v),
        Some(v) if v.kind == Kind::Num => {
            let (int_digits, has_exp) = s.int_digits_and_exp(v);
            !has_exp && int_digits <= 18
        }
        _ => false,
    };
    let args_ok = match e.args {
        None => true,
        Some(a) => matches!(a.kind, Kind::Null | Kind::Object),
    };
    let correlation_ok = match e.correlation {
        None => true,
        Some(v) if v.kind == Kind::Null => true,
        Some(v) => v.kind == Kind::Num && s.is_small_int(v),
    };
    args_ok
        && correlation_ok
        && (!options.keep_frames || cpu::frame_fields_decodable(s, e))
        && small_int(e.pid)
        && small_int(e.tid)
        && small_int(e.device)
        && small_int(e.stream)
        && time(e.ts)
        && time(e.dur)
        && e.launch.iter().flatten().all(|v| cpu::sure_scalar(s, *v))
        && e.extra_any.is_none()
}

pub(crate) fn pair(key: &mut Vec<u8>, a: &[u8], b: &[u8]) {
    key.push(b'[');
    key.extend_from_slice(a);
    key.push(b',');
    key.extend_from_slice(b);
    key.push(b']');
}

/// Whether an array (checked) holds a container: a `{` or `[` outside strings after its own.
fn nested(s: &Scanner<'_>, v: Val) -> bool {
    let mut i = v.start + 1;
    while i < v.end {
        match s.t[i] {
            b'"' => match strings::check(s.t, i) {
                Ok(c) => i = c.end,
                Err(_) => return true,
            },
            b'{' | b'[' => return true,
            _ => i += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL_EVENT: &str = r#"{"ph": "X", "cat": "kernel", "name": "k\u00e9", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2, "args": {"correlation": 5, "device": 0, "stream": 7, "grid": [1, 2, 3], "block": [4, 1, 1], "registers per thread": 32, "other": {"x": [1, {"y": null}]}}}"#;
    const RUNTIME_EVENT: &str = r#"{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":9,"dur":1,"args":{"correlation":5}}"#;
    const OP_EVENT: &str = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":8,"dur":3,"args":{"Input Dims":[[2,3]]}}"#;

    fn chunk(events: &[&str]) -> String {
        events.join(",\n  ")
    }

    fn scanned(text: &str) -> Chunk {
        scan(text.as_bytes(), &Options::default()).expect("accepted")
    }

    #[test]
    fn columns_and_others() {
        let text = chunk(&[OP_EVENT, KERNEL_EVENT, RUNTIME_EVENT, KERNEL_EVENT]);
        let c = scanned(&text);
        assert_eq!(c.events, 4);
        assert_eq!(c.gpu_kind, vec![KERNEL, KERNEL]);
        assert_eq!(c.gpu_ts, vec![10_500, 10_500]);
        assert_eq!(c.gpu_dur, vec![2000, 2000]);
        assert_eq!(c.gpu_correlation, vec![5, 5]);
        assert_eq!(c.gpu_name, vec![0, 0]);
        assert_eq!(c.gpu_names.finished(), br#"["k\u00e9"]"#.to_vec());
        assert_eq!(c.streams.finished(), b"[[0,7]]".to_vec());
        assert_eq!(
            c.launches.finished(),
            b"[[[1, 2, 3],[4, 1, 1],32,null,null]]".to_vec()
        );
        assert_eq!(c.rt_ts, vec![9000]);
        assert_eq!(c.rt_correlation, vec![5]);
        assert_eq!(c.others, vec![0, OP_EVENT.len() as i64]);
    }

    #[test]
    fn splits_at_every_event_boundary() {
        let events = [
            OP_EVENT,
            KERNEL_EVENT,
            RUNTIME_EVENT,
            KERNEL_EVENT,
            OP_EVENT,
        ];
        let whole = scanned(&chunk(&events));
        for cut in 0..=events.len() {
            let (a, b) = events.split_at(cut);
            let parts: Vec<Chunk> = [a, b]
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| scanned(&chunk(p)))
                .collect();
            let ts: Vec<i64> = parts.iter().flat_map(|p| p.gpu_ts.clone()).collect();
            let kinds: Vec<i8> = parts.iter().flat_map(|p| p.gpu_kind.clone()).collect();
            let n: usize = parts.iter().map(|p| p.events).sum();
            let others: usize = parts.iter().map(|p| p.others.len()).sum();
            assert_eq!(ts, whole.gpu_ts);
            assert_eq!(kinds, whole.gpu_kind);
            assert_eq!(n, whole.events);
            assert_eq!(others, whole.others.len());
        }
        // A cut inside an event is refused, never a wrong row.
        let text = chunk(&events);
        for cut in 1..text.len() {
            let part = &text.as_bytes()[..cut];
            if let Ok(c) = scan(part, &Options::default()) {
                let full = text[..cut].trim_end();
                assert!(full.ends_with('}'), "accepted a cut at {cut}");
                assert!(c.events <= events.len());
            }
        }
    }

    #[test]
    fn refusals() {
        let cases = [
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"ts":2}"#,
                "a repeated key",
            ),
            (
                r#"{"ph":"X","c\u0061t":"kernel","ts":1,"dur":1}"#,
                "an escaped key",
            ),
            (r#"{"ph":"X","cat":"kernel","ts":1e3,"dur":1}"#, "times"),
            (r#"{"ph":"X","cat":"kernel","ts":1,"dur":-1}"#, "times"),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"pid":1.5}"#,
                "int",
            ),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"name":5}"#,
                "text",
            ),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"args":[]}"#,
                "args",
            ),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"args":{"correlation":"1"}}"#,
                "corr",
            ),
            (r#"{"ph":"X","cat":"kernel","ts":1}"#, "missing"),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"x":"\ud800"}"#,
                "surrogate",
            ),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"x":NaN}"#,
                "value",
            ),
            (
                r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"x":01}"#,
                "expected",
            ),
            (r#"{"ph":"X","cat":"kernel","ts":1,"dur":1} x"#, "expected"),
            (r#"{"ph":"X","cat":"kernel","ts":1,"dur":1},"#, "ends"),
        ];
        for (text, why) in cases {
            let refused = scan(text.as_bytes(), &Options::default()).expect_err(text);
            assert!(refused.why.contains(why), "{text}: {}", refused.why);
        }
        let deep = format!(
            "{{\"x\":{}{}}}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(
            scan(deep.as_bytes(), &Options::default()).unwrap_err().why,
            "nested too deeply"
        );
        let ok = format!(
            "{{\"x\":{}{}}}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(scan(ok.as_bytes(), &Options::default()).is_ok());
        assert!(scan(b"{\"name\":\"\xff\"}", &Options::default()).is_err());
    }

    #[test]
    fn the_fast_walk_takes_what_the_full_walk_takes() {
        // damaged values: skip_container accepts exactly what container_refused accepts,
        // with the same end, at every depth budget
        let bases = [
            KERNEL_EVENT.to_string(),
            OP_EVENT.to_string(),
            r#"{"a": [1, -2.5e+3, true, false, null, "x\u00e9\n", {}], "b": {"c": [[], [8192, 50257]]}}"#.to_string(),
            format!("{}1{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1)),
            format!("{}{}", "[{\"k\":".repeat(40), "0}]".repeat(40)),
        ];
        let alphabet = b"{}[]\",:\\ \n\t0123456789eE.+-truefalsnux\x01\x1fd8c";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let (mut accepted, mut refused) = (0, 0);
        for round in 0..4000 {
            let mut text = bases[round % bases.len()].as_bytes().to_vec();
            for _ in 0..1 + next(3) {
                if text.is_empty() {
                    break;
                }
                let at = next(text.len());
                match next(4) {
                    0 => text[at] = alphabet[next(alphabet.len())],
                    1 => {
                        text.remove(at);
                    }
                    2 => text.insert(at, alphabet[next(alphabet.len())]),
                    _ => text.truncate(at.max(1)),
                }
            }
            let s = Scanner::new(&text);
            for i in 0..text.len() {
                if !matches!(text[i], b'{' | b'[') {
                    continue;
                }
                for outer in [0, 1, MAX_DEPTH - 2, MAX_DEPTH] {
                    let fast = s.skip_container(i, outer);
                    let full = s.container_refused(i, outer).map(|v| v.end).ok();
                    assert_eq!(fast, full, "{i} {outer} {}", String::from_utf8_lossy(&text));
                    if fast.is_some() {
                        accepted += 1;
                    } else {
                        refused += 1;
                    }
                }
            }
        }
        assert!(accepted > 1000 && refused > 1000, "{accepted} {refused}");
    }

    #[test]
    fn a_remembered_value_is_the_walked_value() {
        // values met again (equal bytes, equal first 24 bytes then different ones,
        // damaged copies, deep ones at other depth budgets), each asked of one scanner
        // that remembers and of a fresh one: the same end or the same refusal
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        let mut values: Vec<String> = vec![
            r#"[[8192, 50257, 1024, 7, 9], []]"#.into(),
            r#"[[8192, 50257, 1024, 7, 9], [1]]"#.into(),
            r#"[[8192, 50257, 1024, 7, 9], [1, 2]]"#.into(),
            r#"["float", "Scalar", "Scalar", "long int"]"#.into(),
            r#"["float", "Scalar", "Scalar", "long"]"#.into(),
            r#"{"x": [1, {"y": null}], "z": "a\"]b"}"#.into(),
            r#"[]"#.into(),
            r#"[[51463168, 50257, 1], []]"#.into(),
            deep.clone(),
            format!(
                "{}1{}",
                "[".repeat(MAX_DEPTH - 3),
                "]".repeat(MAX_DEPTH - 3)
            ),
        ];
        let count = values.len();
        for n in 0..count {
            for (at, b) in [(5, b'x'), (12, b']'), (20, b','), (26, b'"'), (30, b' ')] {
                let mut v = values[n].clone().into_bytes();
                if at < v.len() {
                    v[at] = b;
                    values.push(String::from_utf8(v).unwrap());
                }
            }
        }
        let mut text = String::new();
        let mut starts = vec![];
        for round in 0..6 {
            for (n, v) in values.iter().enumerate() {
                starts.push((text.len(), (n + round / 2) % 3));
                text.push_str(v);
                text.push_str(if n % 2 == 0 { ", " } else { "]\n " });
            }
        }
        let shared = Scanner::new(text.as_bytes());
        let (mut accepted, mut refused, mut hits) = (0, 0, 0);
        for &(i, budget) in &starts {
            let outer = [0, 1, MAX_DEPTH - 2][budget];
            let t = text.as_bytes();
            hits += usize::from(shared.memo.borrow_mut().find(t, i, outer).is_some());
            let remembered = shared.value_within(i, outer).map(|v| v.end);
            let fresh = Scanner::new(text.as_bytes())
                .value_within(i, outer)
                .map(|v| v.end);
            assert_eq!(remembered, fresh, "{i} {outer}");
            if fresh.is_ok() {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(accepted > 30 && refused > 30, "{accepted} {refused}");
        assert!(hits > 30, "{hits}");
    }

    /// The event at `i` scanned by `shared` (which remembers) and by a fresh scanner: the
    /// same end and fields, or the same refusal (asserted); true when it is accepted.
    fn walked_alike(shared: &Scanner, t: &[u8], i: usize, e: &mut Event) -> bool {
        let remembered = shared.event(i, e).map(|end| (end, format!("{e:?}")));
        let fresh = Scanner::new(t)
            .event(i, e)
            .map(|end| (end, format!("{e:?}")));
        assert_eq!(remembered, fresh, "{i}");
        fresh.is_ok()
    }

    #[test]
    fn a_remembered_head_is_the_walked_head() {
        // events whose heads repeat (then differ past them, or are damaged, or followed by
        // whitespace or nothing), each walked by one scanner that remembers and by a fresh
        // one: the same fields and end, or the same refusal
        let head = r#"{"ph": "X", "cat": "cpu_op", "name": "aten::a_rather_long_operator_name", "pid": 486, "tid": 486"#;
        let tails = [
            r#", "ts": 1.5, "dur": 2, "args": {"External id": 7}}"#,
            r#", "ts": 2.5, "dur": 3}"#,
            r#",  "ts": 2.5, "dur": 3}"#,
            r#",
    "ts": 2.5}"#,
            r#"}"#,
            r#", "ph": "X"}"#,
            r#", "name": "x", "ts": 1}"#,
            r#", ts": 1}"#,
            r#", "ts" 1}"#,
            r#", "args": [1], "ts": 1}"#,
        ];
        let heads = [
            head.to_string(),
            head.replace("486,", "487,"),
            head.replace("\"tid\": 486", "\"tid\": \"t\""),
            head.replace("\"ph\": \"X\", ", ""),
            head.replace("cpu_op", "cpu\\u006fp"),
            head.replace(", \"pid\"", ", \"ph\": \"X\", \"pid\""),
            head.replace("\"tid\": 486", "\"tid\": [486]"),
        ];
        let mut text = String::new();
        let mut starts = vec![];
        for round in 0..3 {
            for (n, h) in heads.iter().enumerate() {
                for tail in tails.iter().cycle().skip(n + round).take(tails.len()) {
                    starts.push(text.len());
                    text.push_str(h);
                    text.push_str(tail);
                    text.push_str(",\n  ");
                }
            }
        }
        let t = text.as_bytes();
        let shared = Scanner::new(t);
        let (mut accepted, mut refused, mut hits) = (0, 0, 0);
        for &i in &starts {
            let mut e = Event::default();
            hits += usize::from(shared.heads.borrow_mut().find(t, i, &mut e).is_some());
            if walked_alike(&shared, t, i, &mut e) {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(
            accepted > 50 && refused > 50 && hits > 50,
            "{accepted} {refused} {hits}"
        );
    }

    #[test]
    fn a_remembered_flat_event_is_the_walked_event() {
        // flows and their near misses (other numbers, kinds, whitespace, members, damage),
        // each walked by one scanner that remembers and by a fresh one: the same fields
        // and end, or the same refusal
        let flow = "{\n    \"ph\": \"f\", \"id\": 1124394, \"pid\": 0, \"tid\": 7, \"ts\": 4891434670174.659,\n    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }";
        let variants = [
            flow.to_string(),
            flow.replace("1124394", "5"),
            flow.replace("1124394", "-12345678901234567890"),
            flow.replace("4891434670174.659", "4891434670174"),
            flow.replace("4891434670174.659", "1.5e3"),
            flow.replace("4891434670174.659", "1.5e400"),
            flow.replace("1124394", "\"s\""),
            flow.replace("1124394", "[1, 2]"),
            flow.replace("1124394", "{\"a\": [1]}"),
            flow.replace("1124394", "1124394 "),
            flow.replace("1124394", " 1124394"),
            flow.replace("1124394", "1x"),
            flow.replace("1124394", "01"),
            flow.replace("1124394", "tru"),
            flow.replace("1124394", "true"),
            flow.replace("\"bp\": \"e\"", "\"bp\": \"e\", \"id\": 3"),
            flow.replace(", \"bp\": \"e\"", ""),
            flow.replace("\"f\"", "\"s\""),
            flow.replace("\"ac2g\", \"bp\"", "\"a\\u0041\", \"bp\""),
            flow.replace("\"ac2g\", \"bp\"", "\"ac2g\", \"args\": 5, \"bp\""),
            flow.replace("\"bp\": \"e\"", "\"bp\": \"e\", \"args\": {\"x\": 1}"),
            flow.replace("\"pid\": 0", "\"pid\": null"),
            flow.replace("\"pid\": 0", "\"pid\": 00"),
            flow.replace("\n  }", "}"),
            flow.replace("\n  }", "\n  ]"),
            flow.replace("\"e\"\n", "\"e\n"),
            "{}".to_string(),
            "{ }".to_string(),
        ];
        let mut text = String::new();
        let mut starts = vec![];
        for round in 0..4 {
            for n in 0..variants.len() {
                // each variant after each other, and runs of one
                for v in [
                    &variants[n],
                    &variants[(n * 7 + round) % variants.len()],
                    flow,
                ] {
                    starts.push(text.len());
                    text.push_str(v);
                    text.push_str(",\n  ");
                }
            }
        }
        let t = text.as_bytes();
        let shared = Scanner::new(t);
        let (mut accepted, mut refused, mut hits) = (0, 0, 0);
        for &i in &starts {
            let mut e = Event::default();
            if shared.heads.borrow_mut().find(t, i, &mut e).is_none() {
                let flats = shared.flats.borrow();
                hits +=
                    usize::from(flats.all.iter().any(|f| {
                        f.len > 0 && shared.flat_as(f, i, &mut Event::default()).is_some()
                    }));
            }
            if walked_alike(&shared, t, i, &mut e) {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(
            accepted > 100 && refused > 20 && hits > 100,
            "{accepted} {refused} {hits}"
        );
    }

    #[test]
    fn a_head_hint_is_what_the_lists_say() {
        // events with remembered heads, kept or dropped by their names, and heads without
        // the category or the name (which then come after them): a chunk scanned by one
        // scanner drops and leaves what scanning each event alone does
        let options = Options {
            drop: Some(rule()),
            ..Options::default()
        };
        let pad = "p".repeat(60);
        let space = " ".repeat(60);
        let events = [
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "aten::mm_{pad}", "pid": 1, "tid": 2, "ts": 1, "dur": 2}}"#
            ),
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3{pad}", "pid": 1, "tid": 2, "ts": 1, "dur": 2}}"#
            ),
            format!(
                r#"{{"ph": "X", "name": "aten::mm_{pad}", "pid": 1, "tid": 2, "ts": 1, "cat": "cpu_op"}}"#
            ),
            format!(
                r#"{{"ph": "X", "name": "aten::mm_{pad}", "pid": 1, "tid": 2, "ts": 1, "cat": "user_annotation"}}"#
            ),
            format!(
                r#"{{"ph": "X", "cat": "cpu_op",{space} "pid": 1, "tid": 2, "ts": 1, "name": "ProfilerStep#1"}}"#
            ),
            format!(
                r#"{{"ph": "X", "cat": "cpu_op",{space} "pid": 1, "tid": 2, "ts": 1, "name": "aten::mm"}}"#
            ),
            format!(
                r#"{{"ph": "X", "cat": "python_function", "name": "a: execute_model{pad}", "pid": 1, "tid": 2, "ts": 1}}"#
            ),
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k{pad}", "pid": 1, "tid": 2, "ts": 1, "dur": 1}}"#
            ),
        ];
        for round in 0..3 {
            let order: Vec<&str> = (0..events.len() * 3)
                .map(|n| events[(n * (round + 1) + n / events.len()) % events.len()].as_str())
                .collect();
            let whole = scan(chunk(&order).as_bytes(), &options).unwrap();
            let alone: Vec<Chunk> = order
                .iter()
                .map(|e| scan(e.as_bytes(), &options).unwrap())
                .collect();
            assert_eq!(
                whole.dropped,
                alone.iter().map(|c| c.dropped).sum::<usize>()
            );
            assert_eq!(
                whole.others.len(),
                alone.iter().map(|c| c.others.len()).sum::<usize>()
            );
            assert_eq!(
                whole.gpu_ts.len(),
                alone.iter().map(|c| c.gpu_ts.len()).sum::<usize>()
            );
            assert!(whole.dropped > 0 && !whole.others.is_empty());
        }
    }

    #[test]
    fn table_ids_in_first_seen_order_whatever_the_slot() {
        // values of one length and the same first and last eight bytes share a slot of
        // Table::recent: each keeps its own id, first met first
        let values: Vec<Vec<u8>> = (0..40)
            .map(|n| format!("\"aaaaaaaa{n:03}zzzzzzzz\"").into_bytes())
            .chain((0..40).map(|n| format!("{n}").into_bytes()))
            .collect();
        let mut table = Table::default();
        for round in 0..3 {
            for (n, v) in values.iter().enumerate().skip(round) {
                assert_eq!(table.id(v), n as i32, "{round} {n}");
            }
        }
        assert_eq!(table.len(), values.len());
    }

    #[test]
    fn whitespace_runs_of_every_length() {
        // runs 0..70 long of the four whitespace bytes, at 17 offsets, ended by every byte
        // value or by the end of the text: ws against a byte loop
        let kinds = [b' ', b'\n', b'\t', b'\r'];
        for len in 0..70usize {
            for offset in 0..17 {
                for (mix, end) in
                    (0..3).flat_map(|m| (0..=255u8).map(Some).chain([None]).map(move |e| (m, e)))
                {
                    // spaces; a newline then spaces (indentation); a mix of all four
                    let kind = |n: usize| match mix {
                        0 => b' ',
                        1 if n == 0 => b'\n',
                        1 => b' ',
                        _ => kinds[(n * n * 31 + len * 17) / 4 % 4],
                    };
                    let mut text = vec![b'x'; offset];
                    text.extend((0..len).map(kind));
                    text.extend(end);
                    let naive = offset
                        + text[offset..]
                            .iter()
                            .take_while(|&&b| matches!(b, b' ' | b'\n' | b'\t' | b'\r'))
                            .count();
                    let s = Scanner::new(&text);
                    assert_eq!(s.ws(offset), naive, "{len} {offset} {end:?}");
                }
            }
        }
    }

    fn rule() -> DropRule {
        let v = |items: &[&str]| items.iter().map(|s| s.as_bytes().to_vec()).collect();
        DropRule {
            known: v(&[
                "kernel",
                "cuda_runtime",
                "cpu_op",
                "python_function",
                "user_annotation",
            ]),
            categories: v(&["cpu_op", "python_function"]),
            keep_prefixes: v(&["ProfilerStep#"]),
            keep_suffixes: v(&[": execute_model"]),
            keep_contains: v(&["ForCausalLM_"]),
            keep_other_names: v(&["[memory]"]),
        }
    }

    #[test]
    fn dropped_unread_only_what_the_rule_says() {
        let options = Options {
            drop: Some(rule()),
            ..Options::default()
        };
        let kept = [
            r#"{"ph":"X","cat":"cpu_op","name":"ProfilerStep#3","ts":1,"dur":2}"#,
            r#"{"ph":"X","cat":"python_function","name":"a: execute_model","ts":1}"#,
            r#"{"ph":"X","cat":"python_function","name":"x ForCausalLM_ y","ts":1}"#,
            r#"{"ph":"i","cat":"cpu_instant_event","name":"[memory]","ts":1}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"a\u0041","ts":1}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":"1"}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1e3}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1.5}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","args":{"grid":1e40}}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","args":{"Bytes":1}}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","args":{"correlation":-2.5}}"#,
            r#"{"ph":"X","cat":"user_annotation","name":"a"}"#,
            r#"[1]"#,
        ];
        let dropped = [
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":2,"args":{"Input Dims":[[1]]}}"#,
            r#"{"ph":"X","cat":"Python_Function","name":"f","ts":1.5}"#,
            r#"{"ph":"f","cat":"ac2g","name":"x","id":5}"#,
            r#"{"ph":"M","name":"process_name","args":{"name":"python"}}"#,
        ];
        for k in kept {
            assert_eq!(scan(k.as_bytes(), &options).unwrap().dropped, 0, "{k}");
        }
        let text = chunk(&[&kept[..], &dropped[..]].concat());
        let c = scan(text.as_bytes(), &options).unwrap();
        assert_eq!(c.dropped, dropped.len());
        assert_eq!(c.others.len(), 2 * kept.len());
        assert_eq!(c.events, kept.len() + dropped.len());
        // a float that may be past f64's range: the Python path decodes the chunk
        let far = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","args":{"grid":1e400}}"#;
        assert!(scan(far.as_bytes(), &options).is_err());
    }

    #[test]
    fn args_keys_by_their_bit() {
        for (n, key) in LAUNCH_KEYS.iter().enumerate() {
            assert_eq!(arg_key(key), ArgKey::Launch(n));
        }
        for key in ANY_KEYS {
            assert_eq!(arg_key(key), ArgKey::Any);
        }
        for (n, key) in SHAPE_KEYS.iter().enumerate() {
            assert_eq!(arg_key(key), ArgKey::Shape(n));
        }
        for (n, key) in PYTHON_KEYS.iter().enumerate() {
            assert_eq!(arg_key(key), ArgKey::Python(n));
        }
        assert_eq!(arg_key(b"correlation"), ArgKey::Correlation);
        assert_eq!(arg_key(b"device"), ArgKey::Device);
        assert_eq!(arg_key(b"stream"), ArgKey::Stream);
        for other in [
            &b""[..],
            b"External id",
            b"Input Strides",
            b"Input DIMS",
            b"grids",
            b"Seq ",
            b"bytes\0",
        ] {
            assert_eq!(arg_key(other), ArgKey::Other);
        }
    }

    #[test]
    fn exact_mode() {
        let text = r#"{"ph":"X","cat":"Kernel","ts":1712195495505582.988,"dur":0.0015,"pid":"Spans","tid":1}"#;
        let c = scan(
            text.as_bytes(),
            &Options {
                exact: true,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(c.gpu_ts, vec![1_712_195_495_505_582_988]);
        assert_eq!(c.gpu_dur, vec![2]);
        assert_eq!(c.streams.finished(), br#"[["Spans",1]]"#.to_vec());
        assert_eq!(c.launches.finished(), b"[null]".to_vec());
        // the plain decoder's float would lose the ns: refused there (NeedsExactTimes)
        assert!(scan(text.as_bytes(), &Options::default()).is_err());
    }

    #[test]
    fn collective_metadata_rows_are_handed_back() {
        let kernel = r#"{"ph":"X","cat":"kernel","ts":1,"dur":1,"args":{"Collective name":"allreduce","dtype":"Float"}}"#;
        let plain = r#"{"ph":"X","cat":"kernel","ts":2,"dur":1}"#;
        let call =
            r#"{"ph":"X","cat":"cuda_runtime","ts":1,"dur":1,"args":{"correlation":3,"dtype":1}}"#;
        let op = r#"{"ph":"X","cat":"cpu_op","name":"record_param_comms","ts":1,"dur":1,"args":{"Collective name":"allreduce"}}"#;
        let text = [plain, kernel, call, op].join(",");
        let cpu = Options {
            keep_cpu: true,
            ..Options::default()
        };
        for options in [Options::default(), cpu] {
            let c = scan(text.as_bytes(), &options).expect("scanned");
            assert!(c.comm_chunk);
            let span = |e: &str, row: i64| {
                let at = text.find(e).unwrap_or_default() as i64;
                [at, at + e.len() as i64, row]
            };
            let mut want = [span(kernel, 1), span(call, COMM_CHECKED)].concat();
            if options.keep_cpu {
                want.extend(span(op, -1));
            }
            assert_eq!(c.comm, want, "keep_cpu {}", options.keep_cpu);
        }
        // a chunk without the key: nothing handed back, and a CPU op's fields still refused
        let memory = r#"{"ph":"X","cat":"cpu_op","name":"a","ts":1,"dur":1,"args":{"Bytes":1}}"#;
        let c = scan(plain.as_bytes(), &Options::default()).expect("scanned");
        assert!(!c.comm_chunk && c.comm.is_empty());
        assert!(scan(memory.as_bytes(), &cpu_options()).is_err());
        // a python frame with them, in a read of frames: refused (the Python side reads it)
        let frame = r#"{"ph":"X","cat":"python_function","name":"f.py(1): f","ts":1,"dur":1,"args":{"Collective name":"x"}}"#;
        let frames = Options {
            keep_frames: true,
            ..cpu_options()
        };
        assert!(scan(frame.as_bytes(), &frames).is_err());
        assert!(scan(frame.as_bytes(), &cpu_options()).is_ok()); // not read: left to Python
    }

    fn cpu_options() -> Options {
        Options {
            keep_cpu: true,
            ..Options::default()
        }
    }

    #[test]
    fn not_complete_or_other_category_is_left() {
        let text = chunk(&[
            r#"{"ph":"i","cat":"kernel","ts":1}"#,
            r#"{"ph":"X","cat":"cpu_op","ts":"x"}"#,
            r#"[1,2]"#,
            r#"{"cat":"kernel"}"#,
        ]);
        let c = scanned(&text);
        assert_eq!(c.others.len(), 8);
        assert!(c.gpu_ts.is_empty());
    }
}
