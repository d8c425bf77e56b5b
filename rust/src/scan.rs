//! The column scanner: one chunk of whole events (what traceview/read/reader.py cuts) →
//! the columns of its GPU activities and runtime calls, and the byte spans of every other
//! event, which the Python side decodes as before.
//!
//! The scanner only accepts a chunk that the Python path's fast decoder would read whole
//! and convert a batch at a time; anything else is refused (with the offset and why) and the
//! chunk takes the Python path, so both paths accept, reject and convert the same inputs.
//! Refused, among others: invalid UTF-8, an escaped key, a repeated key that is read, a
//! wrongly typed field of an event read here, numbers the batch conversion would not take,
//! nesting deeper than MAX_DEPTH, a collective's metadata (traceview/columns/comms.py).

use std::collections::HashMap;

use crate::numbers::{self, Plain, Token};
use crate::strings;

/// Nesting deeper than this is refused (skipped iteratively, never by recursion).
pub const MAX_DEPTH: usize = 64;
/// The kinds of the rows (traceview/columns/schema.py KERNEL, MEMCPY, MEMSET; collect.py's
/// _RUNTIME).
pub const KERNEL: i8 = 0;
pub const MEMCPY: i8 = 1;
pub const MEMSET: i8 = 2;
const RUNTIME: i8 = 10;
/// Text whose presence sends the chunk to the Python path: a collective's metadata
/// (read.decode.COMM_KEY), which the collector reads from the decoded events.
const COMM_KEY: &[u8] = b"\"Collective name\"";

/// Category (lower case) → kind, as traceview/columns/collect.py's _CATEGORIES has them.
const CATEGORIES: [(&[u8], i8); 8] = [
    (b"kernel", KERNEL),
    (b"gpu_memcpy", MEMCPY),
    (b"memcpy", MEMCPY),
    (b"gpu_memset", MEMSET),
    (b"memset", MEMSET),
    (b"cuda_runtime", RUNTIME),
    (b"cuda_driver", RUNTIME),
    (b"runtime", RUNTIME),
];

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// ts and dur as exact decimals (the reader's exact mode), else as the fast decoder's
    /// int or float.
    pub exact: bool,
    /// Runtime calls' names and threads (CPU rows are kept).
    pub keep_cpu: bool,
    /// Which other events the collector never looks at (None: every one goes to Python).
    pub drop: Option<DropRule>,
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

/// Distinct values of a chunk in the order first met, as one JSON array text.
#[derive(Debug, Default)]
pub struct Table {
    ids: HashMap<Vec<u8>, i32>,
    /// `[v0,v1,…]`: each value's JSON text.
    pub json: Vec<u8>,
}

impl Table {
    fn id(&mut self, text: &[u8]) -> i32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.ids.len() as i32;
        self.json.push(if id == 0 { b'[' } else { b',' });
        self.json.extend_from_slice(text);
        self.ids.insert(text.to_vec(), id);
        id
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The JSON array of the values.
    pub fn finished(&self) -> Vec<u8> {
        if self.ids.is_empty() {
            return b"[]".to_vec();
        }
        let mut out = self.json.clone();
        out.push(b']');
        out
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
    /// (start, end) of each event left to the Python side, in file order.
    pub others: Vec<i64>,
    /// Events dropped unread (DropRule).
    pub dropped: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Str { escaped: bool },
    Num,
    Literal,
    Null,
    Object,
    Array,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Val {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
}

#[derive(Default)]
struct Event {
    ph: Option<Val>,
    cat: Option<Val>,
    name: Option<Val>,
    pid: Option<Val>,
    tid: Option<Val>,
    ts: Option<Val>,
    dur: Option<Val>,
    args: Option<Val>,
    correlation: Option<Val>,
    device: Option<Val>,
    stream: Option<Val>,
    // launch configuration (traceview/columns/launches.py), in raw_key's order
    launch: [Option<Val>; 5],
    // the first args field the allocator's or a collective's decoder reads as any value
    extra_any: Option<Val>,
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

const LAUNCH_OR_ANY: u64 = key_mask(&LAUNCH_KEYS) | key_mask(&ANY_KEYS);

/// The args key's meaning. Most keys of an op's args ("External id", "Input Dims", ...)
/// are told by their bit (key_bit) before any text is compared.
fn arg_key(key: &[u8]) -> ArgKey {
    match key {
        b"correlation" => ArgKey::Correlation,
        b"device" => ArgKey::Device,
        b"stream" => ArgKey::Stream,
        _ if key_bit(key) & LAUNCH_OR_ANY == 0 => ArgKey::Other,
        _ => match LAUNCH_KEYS.iter().position(|k| *k == key) {
            Some(n) => ArgKey::Launch(n),
            None if ANY_KEYS.contains(&key) => ArgKey::Any,
            None => ArgKey::Other,
        },
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

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The end of the run of spaces at `i` (a pretty-printed trace's indentation), eight bytes a
/// step: the first byte that differs from a space is the lowest nonzero byte of `word ^ spaces`.
fn spaces(text: &[u8], mut i: usize) -> usize {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    while let Some(&word) = text.get(i..).and_then(|r| r.first_chunk::<8>()) {
        let other = u64::from_le_bytes(word) ^ SPACES;
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + text
        .get(i..)
        .map_or(0, |r| r.iter().take_while(|&&b| b == b' ').count())
}

pub(crate) struct Scanner<'a> {
    pub(crate) t: &'a [u8],
}

impl<'a> Scanner<'a> {
    pub(crate) fn ws(&self, mut i: usize) -> usize {
        while let Some(&b) = self.t.get(i) {
            if !is_ws(b) {
                break;
            }
            i += 1;
            if self.t.get(i) == Some(&b' ') {
                i = spaces(self.t, i);
            }
        }
        i
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
                kind: Kind::Str { escaped: c.escaped },
            }),
            Err((at, why)) => string_refused(at, why),
        }
    }

    /// A scalar at `i` (not a container).
    #[inline]
    fn scalar(&self, i: usize) -> Scan<Val> {
        let b = self.byte(i)?;
        let (kind, len) = match b {
            b'"' => return self.string(i),
            b'-' | b'0'..=b'9' => match numbers::length(&self.t[i..]) {
                Some(n) => (Kind::Num, n),
                None => return refuse(i, "a malformed number"),
            },
            b't' if self.t[i..].starts_with(b"true") => (Kind::Literal, 4),
            b'f' if self.t[i..].starts_with(b"false") => (Kind::Literal, 5),
            b'n' if self.t[i..].starts_with(b"null") => (Kind::Null, 4),
            _ => return refuse(i, "not a JSON value"),
        };
        Ok(Val {
            start: i,
            end: i + len,
            kind,
        })
    }

    /// Any value at `i` (no whitespace before it), checked whole; nesting walked with an
    /// explicit stack of at most MAX_DEPTH levels.
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Scan<Val> {
        self.value_within(i, 0)
    }

    /// `value` for a value inside `outer` open containers that count against MAX_DEPTH
    /// (an args member: 1, as if args were walked whole).
    #[inline]
    pub(crate) fn value_within(&self, i: usize, outer: usize) -> Scan<Val> {
        match self.byte(i)? {
            b'{' | b'[' => self.container(i, outer),
            _ => self.scalar(i),
        }
    }

    /// `value_within` for an object or array at `i`.
    fn container(&self, i: usize, outer: usize) -> Scan<Val> {
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
        mut field: impl FnMut(&'a [u8], usize) -> Scan<usize>,
    ) -> Scan<usize> {
        let mut j = self.ws(i + 1);
        if self.byte(j)? == b'}' {
            return Ok(j + 1);
        }
        loop {
            if self.byte(j)? != b'"' {
                return refuse(j, "expected a key");
            }
            let key = self.string(j)?;
            if key.kind != (Kind::Str { escaped: false }) {
                return refuse(j, "an escaped key");
            }
            let name = &self.t[key.start + 1..key.end - 1];
            j = self.ws(key.end);
            if self.byte(j)? != b':' {
                return refuse(j, "expected :");
            }
            j = self.ws(j + 1);
            j = self.ws(field(name, j)?);
            match self.byte(j)? {
                b',' => j = self.ws(j + 1),
                b'}' => return Ok(j + 1),
                _ => return refuse(j, "expected , or }"),
            }
        }
    }

    /// The event object at `i` and its end. Its args object is walked once, member by
    /// member (each member's value checked whole, as deep as if args were walked whole).
    fn event(&self, i: usize) -> Scan<(Event, usize)> {
        let mut e = Event::default();
        let end = self.members(i, |key, j| {
            if key == b"args" && self.t.get(j) == Some(&b'{') {
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
            let slot = match key {
                b"ph" => &mut e.ph,
                b"cat" => &mut e.cat,
                b"name" => &mut e.name,
                b"pid" => &mut e.pid,
                b"tid" => &mut e.tid,
                b"ts" => &mut e.ts,
                b"dur" => &mut e.dur,
                b"args" => &mut e.args,
                _ => return Ok(value.end),
            };
            keep(slot, value)?;
            Ok(value.end)
        })?;
        Ok((e, end))
    }

    pub(crate) fn text(&self, v: Val) -> &'a [u8] {
        &self.t[v.start..v.end]
    }

    /// The body of a string without escapes, else None.
    fn plain_str(&self, v: Option<Val>) -> Option<&'a [u8]> {
        let v = v?;
        (v.kind == Kind::Str { escaped: false }).then(|| &self.t[v.start + 1..v.end - 1])
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

/// The row kind of an event: a complete event ("X") of a GPU or runtime category.
fn kind_of<'t>(s: &Scanner<'t>, e: &Event, cats: &mut Categories<'t, '_>) -> Scan<Option<i8>> {
    match e.ph {
        None => return Ok(None),
        Some(v) if !matches!(v.kind, Kind::Str { .. }) => return refuse(v.start, "ph not text"),
        _ => {}
    }
    let Some(ph) = s.plain_str(e.ph) else {
        return refuse(e.ph.map_or(0, |v| v.start), "an escaped ph");
    };
    if ph != b"X" {
        return Ok(None);
    }
    let Some(cat_value) = e.cat else {
        return Ok(None);
    };
    let Some(cat) = s.plain_str(Some(cat_value)) else {
        return refuse(cat_value.start, "cat not plain text");
    };
    let found = cats.of(cat);
    if !found.ascii {
        // str.lower() maps some non-ASCII letters to ASCII ones (K, the Kelvin sign → k)
        return refuse(cat_value.start, "a non-ASCII cat");
    }
    Ok(found.kind)
}

/// What an event's field may be: `int | str | None` (pid, tid, device, stream).
fn int_or_text(s: &Scanner<'_>, v: Option<Val>) -> Scan<&'static [u8]> {
    let Some(v) = v else { return Ok(b"null") };
    match v.kind {
        Kind::Str { .. } | Kind::Null => Ok(b""),
        Kind::Num if numbers::is_small_int(s.text(v)) => Ok(b""),
        _ => refuse(v.start, "a field that is not an int, text or null"),
    }
}

/// The field's JSON text, `null` when absent (after int_or_text).
fn text_or_null<'a>(s: &Scanner<'a>, v: Option<Val>) -> &'a [u8] {
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
}

/// Scan one chunk: events separated by commas, no brackets around them.
pub fn scan(text: &[u8], options: &Options) -> Scan<Chunk> {
    if let Err(e) = std::str::from_utf8(text) {
        return refuse(e.valid_up_to(), "invalid UTF-8");
    }
    if let Some(at) = memchr::memmem::find(text, COMM_KEY) {
        return refuse(at, "a collective's metadata");
    }
    let s = Scanner { t: text };
    // the searchers of the drop rule's keep_contains, built once a chunk
    let contains: Vec<memchr::memmem::Finder<'_>> = options.drop.as_ref().map_or(vec![], |r| {
        r.keep_contains
            .iter()
            .map(memchr::memmem::Finder::new)
            .collect()
    });
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
    };
    let mut i = s.ws(0);
    if i == text.len() {
        return refuse(i, "no event");
    }
    loop {
        let start = i;
        let end = if s.byte(i)? == b'{' {
            let (e, end) = s.event(i)?;
            match kind_of(&s, &e, &mut cats)? {
                Some(kind) => row(&s, &e, kind, options, &mut out, &mut pending)?,
                None if options
                    .drop
                    .as_ref()
                    .is_some_and(|r| droppable(&s, &e, r, &contains, &mut cats, options)) =>
                {
                    out.dropped += 1
                }
                None => out.others.extend([start as i64, end as i64]),
            }
            end
        } else {
            let end = s.value(i)?.end; // not an object: the Python side says what it is
            out.others.extend([start as i64, end as i64]);
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
    Ok(out)
}

/// A column of ts or dur values as ns, as the Python path's batch conversion gives it (or
/// refused where that conversion would not take it).
fn times(s: &Scanner<'_>, values: &[Val], options: &Options, is_dur: bool) -> Scan<Vec<i64>> {
    let at = values.first().map_or(0, |v| v.start);
    let column = if options.exact {
        values
            .iter()
            .map(|&v| numbers::exact_ns(&s.number(v)))
            .collect::<Option<Vec<i64>>>()
    } else {
        values
            .iter()
            .map(|&v| numbers::plain(&s.number(v)))
            .collect::<Option<Vec<Plain>>>()
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
        if !matches!(v.kind, Kind::Str { .. }) {
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
            let mut key = Vec::with_capacity(32);
            pair(&mut key, text_or_null(s, e.pid), text_or_null(s, e.tid));
            out.rt_thread.push(out.threads.id(&key));
        }
        return Ok(());
    }
    pending.gpu_ts.push(ts);
    pending.gpu_dur.push(dur);
    out.gpu_kind.push(kind);
    out.gpu_name.push(out.gpu_names.id(name));
    out.gpu_correlation.push(correlation);
    // (device, stream) = args.device, else pid; args.stream, else tid (columns/batch.py)
    let mut key = Vec::with_capacity(32);
    match non_null(e.device) {
        Some(device) if args.is_some() => {
            let stream = non_null(e.stream).or(e.tid);
            pair(&mut key, s.text(device), text_or_null(s, stream));
        }
        _ => pair(&mut key, text_or_null(s, e.pid), text_or_null(s, e.tid)),
    }
    out.gpu_stream.push(out.streams.id(&key));
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
    out.gpu_launch.push(out.launches.id(&key));
    Ok(())
}

/// Whether an event that is not a row may be dropped: the rule says the collector never
/// keeps it, and the fast decoder would take its fields (else the Python side decides).
fn droppable<'t>(
    s: &Scanner<'t>,
    e: &Event,
    rule: &DropRule,
    contains: &[memchr::memmem::Finder<'_>],
    cats: &mut Categories<'t, '_>,
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
    let cat = match e.cat {
        None => Some(cats.of(b"")),
        Some(v) => s.plain_str(Some(v)).map(|c| cats.of(c)).filter(|c| c.ascii),
    };
    let (Some(ph), Some(cat)) = (ph, cat) else {
        return false;
    };
    let known = ph == b"X" && cat.known;
    let dropped = if known {
        cat.dropped
            && !rule.keep_prefixes.iter().any(|p| name.starts_with(p))
            && !rule.keep_suffixes.iter().any(|p| name.ends_with(p))
            && !contains.iter().any(|f| f.find(name).is_some())
    } else {
        !rule.keep_other_names.iter().any(|n| *n == name)
    };
    dropped && decodable(s, e, options)
}

/// Whether the fast decoder takes the fields of an event it does not keep: their types, and
/// values its `Any` fields (launch configuration) would not overflow on (else not dropped).
fn decodable(s: &Scanner<'_>, e: &Event, options: &Options) -> bool {
    let small_int = |v: Option<Val>| match v {
        None => true,
        Some(v) => match v.kind {
            Kind::Null | Kind::Str { .. } => true,
            Kind::Num => numbers::is_small_int(s.text(v)),
            _ => false,
        },
    };
    let time = |v: Option<Val>| match v {
        None => true,
        Some(v) if v.kind == Kind::Null => true,
        Some(v) if v.kind == Kind::Num => {
            let (int_digits, has_exp) = numbers::int_digits_and_exp(s.text(v));
            !has_exp && (options.exact || int_digits <= 18)
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
        Some(v) => v.kind == Kind::Num && numbers::is_small_int(s.text(v)),
    };
    args_ok
        && correlation_ok
        && small_int(e.pid)
        && small_int(e.tid)
        && small_int(e.device)
        && small_int(e.stream)
        && time(e.ts)
        && time(e.dur)
        && e.launch.iter().all(Option::is_none)
        && e.extra_any.is_none()
}

fn pair(key: &mut Vec<u8>, a: &[u8], b: &[u8]) {
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
            (r#"{"args":{"Collective name":"x"}}"#, "collective"),
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
            r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","args":{"grid":1e400}}"#,
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
    }

    #[test]
    fn args_keys_by_their_bit() {
        for (n, key) in LAUNCH_KEYS.iter().enumerate() {
            assert_eq!(arg_key(key), ArgKey::Launch(n));
        }
        for key in ANY_KEYS {
            assert_eq!(arg_key(key), ArgKey::Any);
        }
        assert_eq!(arg_key(b"correlation"), ArgKey::Correlation);
        assert_eq!(arg_key(b"device"), ArgKey::Device);
        assert_eq!(arg_key(b"stream"), ArgKey::Stream);
        for other in [
            &b""[..],
            b"External id",
            b"Input Dims",
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
