//! Each event's span and the fields trim judges by (traceview/app/trim_copy.py `Judge`): one
//! chunk of whole events → a column per field, the values trim compares as ids into the
//! chunk's small tables (their JSON text, decoded once a distinct value on the Python side).
//!
//! What traceview/read/raw.py decodes as `RawEvent`, and nothing more: ph, cat, pid (any
//! value), ts and dur (exact ns, as trim_copy.ts_ns has them), id (a hash of its raw text,
//! which pairs a flow's start and finish), args.device and args.correlation. A chunk the
//! Python path would not read whole with its fast decoder, or whose values it would not take
//! the same way, is refused (the Python path reads it): invalid UTF-8, an element that is not
//! an object, an escaped or repeated key read here, a time that is not a plain number,
//! nesting deeper than scan::MAX_DEPTH.

use std::collections::HashMap;
use std::hash::Hasher;

use crate::keys::top_slot;
use crate::numbers::{self, Token};
use crate::scan::{keep, refuse, Kind, Refused, Scan, Scanner, Val};

/// A chunk at least this long is scanned by two threads (see `spans`).
const SPLIT_MIN: usize = 256 * 1024;
/// How far past the middle an event boundary is looked for.
const BOUNDARY_WINDOW: usize = 64 * 1024;

/// Distinct JSON texts of a chunk in the order first met (a value like the last one is
/// found without hashing: consecutive events mostly share their pid and cat).
#[derive(Debug, Default)]
pub struct Table {
    ids: HashMap<Vec<u8>, i32>,
    values: Vec<Vec<u8>>,
    last: usize,
}

impl Table {
    pub fn id(&mut self, text: &[u8]) -> i32 {
        if self.values.get(self.last).is_some_and(|v| v == text) {
            return self.last as i32;
        }
        let id = match self.ids.get(text) {
            Some(&id) => id,
            None => {
                let id = self.values.len() as i32;
                self.ids.insert(text.to_vec(), id);
                self.values.push(text.to_vec());
                id
            }
        };
        self.last = id as usize;
        id
    }

    /// The values as one JSON array text.
    pub fn finished(&self) -> Vec<u8> {
        let mut out = vec![b'['];
        for (n, v) in self.values.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(v);
        }
        out.push(b']');
        out
    }

    /// `other`'s ids as ids of this table (its values added).
    fn merged(&mut self, other: &Table) -> Vec<i32> {
        other.values.iter().map(|v| self.id(v)).collect()
    }
}

/// `has` bits: the event has a ts, a dur (neither absent nor null).
pub const HAS_TS: u8 = 1;
pub const HAS_DUR: u8 = 2;

/// The spans of a chunk's events and the fields trim judges by, one entry an event, in file
/// order. ph, cat, pid, device: ids into the tables (device −1: absent or null).
#[derive(Debug, Default)]
pub struct Spans {
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub ph: Vec<i32>,
    pub cat: Vec<i32>,
    pub pid: Vec<i32>,
    pub ts: Vec<i64>,
    pub dur: Vec<i64>,
    pub has: Vec<u8>,
    pub correlation: Vec<i64>,
    pub device: Vec<i32>,
    pub flow: Vec<u64>,
    pub phs: Table,
    pub cats: Table,
    pub pids: Table,
    pub devices: Table,
}

/// The members of an event trim reads.
#[derive(Default)]
struct Fields {
    ph: Option<Val>,
    cat: Option<Val>,
    name: Option<Val>,
    pid: Option<Val>,
    tid: Option<Val>,
    ts: Option<Val>,
    dur: Option<Val>,
    id: Option<Val>,
    args: Option<Val>,
    device: Option<Val>,
    correlation: Option<Val>,
}

/// The hash of a flow id's raw text (the Python side combines it with the category's).
pub fn id_hash(text: &[u8]) -> u64 {
    #[allow(deprecated)] // SipHasher: fixed keys, the same hash in every call of a build
    let mut h = std::hash::SipHasher::new();
    h.write(text);
    h.finish()
}

/// The event object at `i` and its end; args walked member by member (device, correlation).
fn fields(s: &Scanner<'_>, i: usize) -> Scan<(Fields, usize)> {
    let mut e = Fields::default();
    let end = s.members(i, |key, j| {
        if key == b"args" && s.t.get(j) == Some(&b'{') {
            if let Some(first) = e.args {
                return refuse(first.start.max(j), "a repeated key");
            }
            let end = s.members(j, |key, j| {
                let value = s.value_within(j, 1)?;
                match key {
                    b"device" => keep(&mut e.device, value)?,
                    b"correlation" => keep(&mut e.correlation, value)?,
                    _ => {}
                }
                Ok(value.end)
            })?;
            e.args = Some(Val {
                start: j,
                end,
                kind: Kind::Object,
            });
            return Ok(end);
        }
        let value = s.value(j)?;
        let Some(slot) = top_slot!(e, key) else {
            return Ok(value.end);
        };
        keep(slot, value)?;
        Ok(value.end)
    })?;
    Ok((e, end))
}

/// A number every decoder reads alike: no exponent, at most 18 digits each side of the point.
fn plain_number(t: &Token<'_>) -> bool {
    !t.has_exp && t.int.len() <= 18 && t.frac.len() <= 18
}

/// A field decoded as any value (ph, cat, name, pid, tid, device): text, null, a boolean or
/// a plain number; anything else is refused (the decoders may differ on it).
fn simple(s: &Scanner<'_>, v: Option<Val>) -> Scan<()> {
    match v {
        None => Ok(()),
        Some(v) => match v.kind {
            Kind::Str | Kind::StrEscaped | Kind::Null | Kind::Literal => Ok(()),
            Kind::Num if plain_number(&s.number(v)) => Ok(()),
            _ => refuse(v.start, "a field trim reads that is not a plain value"),
        },
    }
}

/// A ts or dur as exact ns (None: absent or null); refused when ts_ns would not read it as
/// a plain number of |ns| < 2^62.
fn time(s: &Scanner<'_>, v: Option<Val>) -> Scan<Option<i64>> {
    let Some(v) = v.filter(|v| v.kind != Kind::Null) else {
        return Ok(None);
    };
    if v.kind != Kind::Num {
        return refuse(v.start, "a time that is not a number");
    }
    let t = s.number(v);
    if t.int.len() > 18 {
        return refuse(v.start, "a time of more than 18 digits");
    }
    match numbers::exact_ns(&t) {
        Some(ns) => Ok(Some(ns)),
        None => refuse(v.start, "a time trim's batch conversion does not take"),
    }
}

/// args.correlation as trim_copy._correlation has it: an int in [0, 2^63), else −1.
fn correlation(s: &Scanner<'_>, v: Option<Val>) -> Scan<i64> {
    let Some(v) = v else { return Ok(-1) };
    if v.kind != Kind::Num {
        return Ok(-1); // text, null, a boolean (not an int), a container
    }
    let t = s.number(v);
    if t.has_exp || t.int.len() > 19 || t.frac.len() > 18 {
        return refuse(v.start, "a correlation that is not a plain number");
    }
    if !t.frac.is_empty() {
        return Ok(-1); // a float
    }
    let mut value: u64 = 0;
    for &d in t.int {
        value = value * 10 + u64::from(d - b'0'); // 19 digits < 2^64
    }
    Ok(match (t.negative, i64::try_from(value)) {
        (_, Ok(0)) => 0,
        (false, Ok(c)) => c,
        _ => -1,
    })
}

/// The field's JSON text, `null` when absent.
fn text_or_null<'a>(s: &Scanner<'a>, v: Option<Val>) -> &'a [u8] {
    v.map_or(b"null", |v| s.text(v))
}

/// Scan one chunk: events separated by commas, no brackets around them.
///
/// A long chunk is scanned by two threads: the second from an event boundary guessed past
/// the middle (a `{` after `}` and `,`), the first from the start until it reaches that
/// offset as the start of an event; only then is the second's scan used (a scan from the
/// start of an event gives the same result whoever runs it), else the first scans on.
pub fn spans(text: &[u8]) -> Scan<Spans> {
    if let Err(e) = std::str::from_utf8(text) {
        return refuse(e.valid_up_to(), "invalid UTF-8");
    }
    let s = Scanner::new(text);
    let i = s.ws(0);
    if i == text.len() {
        return refuse(i, "no event");
    }
    let guess = if text.len() >= SPLIT_MIN {
        boundary(text, text.len() / 2)
    } else {
        None
    };
    split_at(&s, i, guess)
}

/// `spans` of the events from `i`, split at `guess` (any offset: used only if an event
/// starts there).
fn split_at(s: &Scanner<'_>, i: usize, guess: Option<usize>) -> Scan<Spans> {
    let Some(guess) = guess.filter(|&g| g > i) else {
        let mut out = Spans::default();
        events(s, i, None, &mut out)?;
        return Ok(out);
    };
    let (first, second) = std::thread::scope(|scope| {
        let t = s.t;
        let second = scope.spawn(move || {
            // its own scanner: a scanner's memo is not shared between threads
            let mut out = Spans::default();
            events(&Scanner::new(t), guess, None, &mut out).map(|_| out)
        });
        let mut out = Spans::default();
        let first = events(s, i, Some(guess), &mut out).map(|stopped| (stopped, out));
        (first, second.join())
    });
    let (stopped, mut out) = first?;
    if stopped {
        match second {
            Ok(rest) => out.append(rest?),
            Err(_) => return refuse(guess, "a scanning thread failed"),
        }
    }
    Ok(out)
}

/// The first offset at or after `from` (within BOUNDARY_WINDOW) that looks like an event's
/// start: a `{` after whitespace, a `,`, whitespace and a `}`.
fn boundary(text: &[u8], from: usize) -> Option<usize> {
    let window = text.get(from..(from + BOUNDARY_WINDOW).min(text.len()))?;
    memchr::memchr_iter(b'{', window)
        .map(|n| from + n)
        .find(|&at| {
            let before = |mut j: usize| {
                while j > 0 && matches!(text[j - 1], b' ' | b'\t' | b'\n' | b'\r') {
                    j -= 1;
                }
                j.checked_sub(1).map(|k| (k, text[k]))
            };
            match before(at) {
                Some((comma, b',')) => matches!(before(comma), Some((_, b'}'))),
                _ => false,
            }
        })
}

impl Spans {
    /// The columns of the events after these (their tables' ids made this chunk's).
    fn append(&mut self, other: Spans) {
        let remap = |ids: &[i32], map: &[i32]| -> Vec<i32> {
            ids.iter()
                .map(|&id| {
                    usize::try_from(id)
                        .ok()
                        .and_then(|n| map.get(n))
                        .map_or(-1, |&m| m)
                })
                .collect()
        };
        let ph = self.phs.merged(&other.phs);
        let cat = self.cats.merged(&other.cats);
        let pid = self.pids.merged(&other.pids);
        let device = self.devices.merged(&other.devices);
        self.ph.extend(remap(&other.ph, &ph));
        self.cat.extend(remap(&other.cat, &cat));
        self.pid.extend(remap(&other.pid, &pid));
        self.device.extend(remap(&other.device, &device));
        self.start.extend(other.start);
        self.end.extend(other.end);
        self.ts.extend(other.ts);
        self.dur.extend(other.dur);
        self.has.extend(other.has);
        self.correlation.extend(other.correlation);
        self.flow.extend(other.flow);
    }
}

/// The events from the one at `i` to the text's end, into `out`; or (with `stop`) until the
/// event that starts at `stop`, then true (false: no event started there).
fn events(s: &Scanner<'_>, mut i: usize, stop: Option<usize>, out: &mut Spans) -> Scan<bool> {
    let text = s.t;
    let no_id = id_hash(b"null");
    loop {
        if Some(i) == stop {
            return Ok(true);
        }
        if s.byte(i)? != b'{' {
            return refuse(i, "an event that is not an object");
        }
        let (e, end) = fields(s, i)?;
        for v in [e.ph, e.cat, e.name, e.pid, e.tid, e.device] {
            simple(s, v)?;
        }
        let ts = time(s, e.ts)?;
        let dur = time(s, e.dur)?;
        out.start.push(i as i64);
        out.end.push(end as i64);
        out.ph.push(out.phs.id(text_or_null(s, e.ph)));
        out.cat.push(out.cats.id(text_or_null(s, e.cat)));
        out.pid.push(out.pids.id(text_or_null(s, e.pid)));
        out.ts.push(ts.unwrap_or(0));
        out.dur.push(dur.unwrap_or(0));
        out.has
            .push(if ts.is_some() { HAS_TS } else { 0 } | if dur.is_some() { HAS_DUR } else { 0 });
        out.correlation.push(correlation(s, e.correlation)?);
        out.device
            .push(match e.device.filter(|v| v.kind != Kind::Null) {
                Some(v) => out.devices.id(s.text(v)),
                None => -1,
            });
        out.flow.push(e.id.map_or(no_id, |v| id_hash(s.text(v))));
        i = s.ws(end);
        if i == text.len() {
            return Ok(false);
        }
        if text[i] != b',' {
            return refuse(i, "expected , between events");
        }
        i = s.ws(i + 1);
    }
}

/// What trim's copy needs of a chunk to leave it unread (traceview/app/trim_copy.py
/// `_Seen`), gathered while scan.rs reads the chunk for the columns: its events, whether
/// one is metadata (ph "M"), whether each has a ts, the least ts and greatest ts + dur, the
/// least and greatest correlation of its GPU activities (low > high: none), whether one
/// tells a GPU process (a GPU activity or annotation, not metadata). `known` false: an event
/// `spans` would not take as it is (trim then reads the chunk itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub known: bool,
    pub events: i64,
    pub metadata: bool,
    pub all_timed: bool,
    pub first: i64,
    pub last: i64,
    pub gpu_low: i64,
    pub gpu_high: i64,
    pub gpu_process: bool,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            known: true,
            events: 0,
            metadata: false,
            all_timed: true,
            first: i64::MAX,
            last: i64::MIN,
            gpu_low: 0,
            gpu_high: -1,
            gpu_process: false,
        }
    }
}

/// The categories `is_gpu_activity` takes (traceview/columns/collect.py), any case.
const GPU_CATEGORIES: [&[u8]; 5] = [
    b"kernel",
    b"gpu_memcpy",
    b"memcpy",
    b"gpu_memset",
    b"memset",
];

impl Seen {
    /// One more event (an object, as scan.rs read it).
    pub(crate) fn see(&mut self, s: &Scanner<'_>, e: &crate::scan::Event) {
        if self.known && self.seen(s, e).is_err() {
            self.known = false;
        }
    }

    /// An element that is not an object: `spans` refuses it.
    pub(crate) fn not_an_event(&mut self) {
        self.known = false;
    }

    /// The values as `[known, events, metadata, all_timed, first, last, gpu_low, gpu_high,
    /// gpu_process]` (`first`, `last`: 0 without an event).
    pub fn values(&self) -> [i64; 9] {
        let (first, last) = if self.first <= self.last {
            (self.first, self.last)
        } else {
            (0, 0)
        };
        [
            i64::from(self.known),
            self.events,
            i64::from(self.metadata),
            i64::from(self.all_timed),
            first,
            last,
            self.gpu_low,
            self.gpu_high,
            i64::from(self.gpu_process),
        ]
    }

    fn seen(&mut self, s: &Scanner<'_>, e: &crate::scan::Event) -> Scan<()> {
        // ph: text without escapes, or absent or null (neither "M" nor a flow)
        let ph: &[u8] = match e.ph {
            None => b"",
            Some(v) if v.kind == Kind::Null => b"",
            Some(v) => match s.plain_str(Some(v)) {
                Some(ph) => ph,
                None => return refuse(v.start, "a ph other than plain text"),
            },
        };
        let ts = time(s, e.ts)?;
        let dur = time(s, e.dur)?;
        match ts {
            Some(ts) => {
                self.first = self.first.min(ts);
                self.last = self.last.max(ts + dur.unwrap_or(0).max(0)); // each |ns| < 2^62
            }
            None => self.all_timed = false,
        }
        if ph == b"M" {
            self.metadata = true;
        }
        let (activity, annotation) = gpu_category(s, e.cat)?;
        self.gpu_process |= (activity || annotation) && ph != b"M";
        if matches!(ph, b"s" | b"t" | b"f") || !activity {
            return Ok(());
        }
        let c = correlation(s, e.correlation)?;
        if self.gpu_low > self.gpu_high {
            (self.gpu_low, self.gpu_high) = (c, c);
        } else {
            self.gpu_low = self.gpu_low.min(c);
            self.gpu_high = self.gpu_high.max(c);
        }
        Ok(())
    }
}

/// Whether the cat is one of GPU_CATEGORIES, and whether it is a GPU annotation's
/// (trim_copy.Judge.kind 1 and 2); refused where str.lower() might make it one (escapes,
/// non-ASCII letters).
fn gpu_category(s: &Scanner<'_>, cat: Option<Val>) -> Scan<(bool, bool)> {
    let Some(v) = cat else {
        return Ok((false, false));
    };
    match v.kind {
        Kind::Str => {
            let text = s.plain_str(Some(v)).unwrap_or(b"");
            if !text.is_ascii() {
                return refuse(v.start, "a non-ASCII cat");
            }
            Ok((
                GPU_CATEGORIES.iter().any(|c| c.eq_ignore_ascii_case(text)),
                text.eq_ignore_ascii_case(b"gpu_user_annotation"),
            ))
        }
        Kind::StrEscaped => refuse(v.start, "an escaped cat"),
        _ => Ok((false, false)), // not text: no category
    }
}

/// The spans `(start, end)` of `text` joined by `,\n` (as trim writes the kept events);
/// refused when a span is not inside the text.
pub fn joined(text: &[u8], spans: &[(i64, i64)]) -> Result<Vec<u8>, Refused> {
    let total: i64 = spans.iter().map(|(a, b)| b - a + 2).sum();
    let mut out = Vec::with_capacity(total.max(0) as usize);
    for (n, &(a, b)) in spans.iter().enumerate() {
        let part = usize::try_from(a)
            .ok()
            .zip(usize::try_from(b).ok())
            .and_then(|(a, b)| text.get(a..b));
        let Some(part) = part else {
            return refuse(0, "a span outside the chunk");
        };
        if n > 0 {
            out.extend_from_slice(b",\n");
        }
        out.extend_from_slice(part);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2, "args": {"correlation": 5, "device": 0, "stream": 7, "grid": [1, 2, 3]}}"#;
    const FLOW: &str =
        r#"{"ph":"s","id":12,"pid":1,"tid":2,"ts":9.0001,"cat":"ac2g","name":"ac2g"}"#;
    const META: &str = r#"{"name":"process_name","ph":"M","pid":1,"args":{"name":"python"}}"#;

    fn scanned(text: &str) -> Spans {
        spans(text.as_bytes()).expect("accepted")
    }

    fn refused(text: &str) -> &'static str {
        spans(text.as_bytes()).expect_err("refused").why
    }

    #[test]
    fn columns_and_tables() {
        let text = [KERNEL, FLOW, META, KERNEL].join(",\n  ");
        let c = scanned(&text);
        assert_eq!(c.start.len(), 4);
        assert_eq!(c.start[0], 0);
        assert_eq!(c.end[0] as usize, KERNEL.len());
        assert_eq!(&text[c.start[1] as usize..c.end[1] as usize], FLOW);
        assert_eq!(c.ph, vec![0, 1, 2, 0]);
        assert_eq!(c.phs.finished(), br#"["X","s","M"]"#.to_vec());
        assert_eq!(c.cats.finished(), br#"["kernel","ac2g",null]"#.to_vec());
        assert_eq!(c.pids.finished(), b"[0,1]".to_vec());
        assert_eq!(c.ts, vec![10_500, 9_000, 0, 10_500]);
        assert_eq!(c.dur, vec![2000, 0, 0, 2000]);
        assert_eq!(c.has, vec![HAS_TS | HAS_DUR, HAS_TS, 0, HAS_TS | HAS_DUR]);
        assert_eq!(c.correlation, vec![5, -1, -1, 5]);
        assert_eq!(c.device, vec![0, -1, -1, 0]);
        assert_eq!(c.devices.finished(), b"[0]".to_vec());
        assert_eq!(c.flow[1], id_hash(b"12"));
        assert_eq!(c.flow[0], id_hash(b"null"));
        assert_ne!(id_hash(b"12"), id_hash(b"\"12\""));
    }

    #[test]
    fn correlations_as_trim_reads_them() {
        let of = |c: &str| {
            let text = format!(r#"{{"ph":"X","args":{{"correlation":{c}}}}}"#);
            spans(text.as_bytes()).map(|s| s.correlation[0])
        };
        assert_eq!(of("7"), Ok(7));
        assert_eq!(of("-0"), Ok(0));
        assert_eq!(of("-3"), Ok(-1));
        assert_eq!(of("7.0"), Ok(-1));
        assert_eq!(of("\"7\""), Ok(-1));
        assert_eq!(of("true"), Ok(-1));
        assert_eq!(of("null"), Ok(-1));
        assert_eq!(of("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(of("9223372036854775808"), Ok(-1));
        assert!(of("1e3").is_err());
        assert!(of("12345678901234567890").is_err());
    }

    #[test]
    fn times_exact_or_refused() {
        let of = |t: &str| {
            let text = format!(r#"{{"ph":"X","ts":{t}}}"#);
            spans(text.as_bytes()).map(|s| (s.ts[0], s.has[0]))
        };
        assert_eq!(of("1.0005"), Ok((1000, HAS_TS)));
        assert_eq!(of("1.0015"), Ok((1002, HAS_TS)));
        assert_eq!(of("-2.5"), Ok((-2500, HAS_TS)));
        assert_eq!(of("null"), Ok((0, 0)));
        assert!(of("1e3").is_err());
        assert!(of("\"1\"").is_err());
        assert!(of("9999999999999999").is_err()); // beyond 2^62 ns
        assert!(of("1234567890123456789").is_err());
    }

    #[test]
    fn refusals() {
        assert_eq!(refused("[1]"), "an event that is not an object");
        assert_eq!(refused(r#"{"ph":"X","ph":"M"}"#), "a repeated key");
        assert_eq!(
            refused(r#"{"args":{"device":0,"device":1}}"#),
            "a repeated key"
        );
        assert_eq!(refused(r#"{"p\u0068":"X"}"#), "an escaped key");
        assert_eq!(
            refused(r#"{"ph":"X"} {"ph":"X"}"#),
            "expected , between events"
        );
        assert_eq!(refused(r#"{"ph":"X"},"#), "the chunk ends inside a value");
        assert_eq!(refused("  "), "no event");
        assert_eq!(
            refused(r#"{"pid":[1]}"#),
            "a field trim reads that is not a plain value"
        );
        assert_eq!(
            refused(r#"{"pid":1e3}"#),
            "a field trim reads that is not a plain value"
        );
        assert!(spans(b"{\"ph\":\"\xff\"}").is_err());
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(80), "]".repeat(80));
        assert_eq!(refused(&deep), "nested too deeply");
    }

    #[test]
    fn other_members_and_args_not_objects() {
        let c = scanned(r#"{"ph":"X","x":{"device":3},"args":[1]},{"args":null,"id":"a"}"#);
        assert_eq!(c.device, vec![-1, -1]);
        assert_eq!(c.flow[1], id_hash(b"\"a\""));
    }

    fn sequential(text: &[u8]) -> Scan<Spans> {
        let s = Scanner::new(text);
        let mut out = Spans::default();
        events(&s, s.ws(0), None, &mut out)?;
        Ok(out)
    }

    fn same(a: &Spans, b: &Spans) {
        assert_eq!(a.start, b.start);
        assert_eq!(a.end, b.end);
        assert_eq!(
            (&a.ph, &a.cat, &a.pid, &a.device),
            (&b.ph, &b.cat, &b.pid, &b.device)
        );
        assert_eq!((&a.ts, &a.dur, &a.has), (&b.ts, &b.dur, &b.has));
        assert_eq!((&a.correlation, &a.flow), (&b.correlation, &b.flow));
        assert_eq!(a.phs.finished(), b.phs.finished());
        assert_eq!(a.cats.finished(), b.cats.finished());
        assert_eq!(a.pids.finished(), b.pids.finished());
        assert_eq!(a.devices.finished(), b.devices.finished());
    }

    /// A long chunk: its second half has pids and devices the first lacks.
    fn long_chunk(trap: &str) -> String {
        let mut events = Vec::new();
        for n in 0..6000 {
            let pid = if n < 3000 { n % 3 } else { n % 5 + 1 };
            let name = if n == 3000 { trap } else { "k" };
            events.push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"{name}","pid":{pid},"ts":{n}.5,"dur":1,"args":{{"device":{},"correlation":{n}}}}}"#,
                pid % 4
            ));
        }
        events.join(",\n  ")
    }

    #[test]
    fn two_threads_as_one() {
        let text = long_chunk("x},\\n {\\\"a\\\":1}, {");
        assert!(text.len() >= SPLIT_MIN);
        let one = sequential(text.as_bytes()).expect("accepted");
        assert_eq!(one.start.len(), 6000);
        same(&one, &scanned(&text));
        // any guess: an event's start, inside a string, a number, a key, the last event
        let s = Scanner::new(text.as_bytes());
        let trap = text.find("x},").unwrap();
        let last = *one.start.last().unwrap() as usize;
        for guess in [
            one.start[10] as usize,
            trap + 3,
            trap + 7,
            5000,
            5001,
            last,
            text.len(),
        ] {
            same(&one, &split_at(&s, 0, Some(guess)).expect("accepted"));
        }
        // damage in either half: refused either way
        for at in [1000, 300_000] {
            let mut text = long_chunk("k").into_bytes();
            let brace = at + text[at..].iter().position(|&b| b == b'{').unwrap();
            text[brace] = b'[';
            assert!(sequential(&text).is_err());
            assert!(spans(&text).is_err());
        }
    }

    #[test]
    fn boundaries() {
        let text = br#"{"a":"},{"},  {"b":1} , {"c":2}"#;
        assert_eq!(boundary(text, 0), Some(8));
        assert_eq!(boundary(text, 9), Some(14));
        assert_eq!(boundary(text, 15), Some(24));
        assert_eq!(boundary(text, 25), None);
    }

    fn seen_of(text: &str) -> [i64; 9] {
        let options = crate::scan::Options {
            exact: true,
            seen: true,
            ..Default::default()
        };
        let chunk = crate::scan::scan(text.as_bytes(), &options).expect("accepted");
        chunk.seen.expect("asked for").values()
    }

    /// What `spans` gives of a chunk, as `Seen::values` (trim_copy._Seen.of).
    fn seen_by_spans(text: &str) -> [i64; 9] {
        let c = scanned(text);
        let phs: Vec<Vec<u8>> = c.phs.values.clone();
        let cats: Vec<Vec<u8>> = c.cats.values.clone();
        let n = c.start.len();
        let timed = |k: usize| c.has[k] & HAS_TS != 0;
        let end = |k: usize| {
            c.ts[k]
                + if c.has[k] & HAS_DUR != 0 {
                    c.dur[k].max(0)
                } else {
                    0
                }
        };
        let cat_of = |k: usize| String::from_utf8_lossy(&cats[c.cat[k] as usize]).to_lowercase();
        let process = (0..n).any(|k| {
            phs[c.ph[k] as usize] != br#""M""#
                && (cat_of(k) == "\"gpu_user_annotation\""
                    || GPU_CATEGORIES
                        .iter()
                        .any(|g| cat_of(k) == format!("\"{}\"", String::from_utf8_lossy(g))))
        });
        let gpu: Vec<i64> = (0..n)
            .filter(|&k| {
                let ph = &phs[c.ph[k] as usize];
                let cat = String::from_utf8_lossy(&cats[c.cat[k] as usize]).to_lowercase();
                !matches!(&ph[..], br#""s""# | br#""t""# | br#""f""#)
                    && GPU_CATEGORIES
                        .iter()
                        .any(|g| cat == format!("\"{}\"", String::from_utf8_lossy(g)))
            })
            .map(|k| c.correlation[k])
            .collect();
        [
            1,
            n as i64,
            i64::from((0..n).any(|k| phs[c.ph[k] as usize] == br#""M""#)),
            i64::from((0..n).all(timed)),
            // (of the timed events: trim looks at them only when every event is timed)
            (0..n)
                .filter(|&k| timed(k))
                .map(|k| c.ts[k])
                .min()
                .unwrap_or(0),
            (0..n).filter(|&k| timed(k)).map(end).max().unwrap_or(0),
            gpu.iter().copied().min().unwrap_or(0),
            gpu.iter().copied().max().unwrap_or(-1),
            i64::from(process),
        ]
    }

    #[test]
    fn seen_while_scanning() {
        let text = [KERNEL, FLOW, KERNEL].join(",\n  ");
        assert_eq!(seen_of(&text), [1, 3, 0, 1, 9000, 12_500, 5, 5, 1]);
        assert_eq!(seen_of(&text), seen_by_spans(&text));
        let text = [KERNEL, META, FLOW].join(",");
        assert_eq!(seen_of(&text), [1, 3, 1, 0, 9000, 12_500, 5, 5, 1]);
        let text = [FLOW, META, r#"{"ph":"M","cat":"kernel","ts":1}"#].join(",");
        assert_eq!(seen_of(&text), [1, 3, 1, 0, 1000, 9000, -1, -1, 0]);
        assert_eq!(seen_of(&text), seen_by_spans(&text));
        let text = [FLOW, r#"{"ph":"X","cat":"GPU_user_annotation","ts":1}"#].join(",");
        assert_eq!(seen_of(&text), [1, 2, 0, 1, 1000, 9000, 0, -1, 1]);
        assert_eq!(seen_of(&text), seen_by_spans(&text));
        let gpu = [
            r#"{"ph":"X","cat":"Kernel","ts":5,"dur":3,"args":{"correlation":9}}"#,
            r#"{"ph":"i","cat":"gpu_memset","ts":7,"dur":-3,"args":{"correlation":"x"}}"#,
            r#"{"ph":"s","cat":"kernel","ts":1,"args":{"correlation":2}}"#,
            r#"{"ph":"X","cat":"cpu_op","ts":2,"dur":10,"args":{"correlation":1}}"#,
        ];
        let text = gpu.join(",");
        assert_eq!(seen_of(&text), [1, 4, 0, 1, 1000, 12_000, -1, 9, 1]);
        assert_eq!(seen_of(&text), seen_by_spans(&text));
        assert_eq!(seen_of(&long_chunk("k")), seen_by_spans(&long_chunk("k")));
    }

    #[test]
    fn seen_unknown_where_spans_would_not_take_it() {
        for event in [
            r#"{"ph":"X","ts":"1"}"#,
            r#"{"ph":"X","ts":1e3}"#,
            r#"{"ph":"X","ts":1,"dur":[1]}"#,
            r#"{"ph":"X","ts":1234567890123456789}"#,
            r#"{"ph":"i","cat":"k\u0065rnel","ts":1}"#,
            r#"{"ph":"i","cat":"\u212aernel","ts":1}"#,
            "{\"ph\":\"i\",\"cat\":\"\u{212a}ernel\",\"ts\":1}", // str.lower(): "kernel"
            r#"{"ph":"i","cat":"kernel","ts":1,"args":{"correlation":1e3}}"#,
        ] {
            let text = format!(r#"{KERNEL},{event}"#);
            assert_eq!(seen_of(&text)[0], 0, "{event}");
        }
        let options = crate::scan::Options {
            seen: true,
            ..Default::default()
        };
        let chunk = crate::scan::scan(format!("{KERNEL},[1]").as_bytes(), &options).unwrap();
        assert_eq!(chunk.seen.unwrap().values()[..2], [0, 2]);
        let plain = crate::scan::scan(b"{}", &Default::default()).unwrap();
        assert!(plain.seen.is_none());
    }

    #[test]
    fn joined_spans() {
        let text = b"{\"a\":1},\n  {\"b\":2},{\"c\":3}";
        assert_eq!(
            joined(text, &[(0, 7), (19, 26)]).unwrap(),
            b"{\"a\":1},\n{\"c\":3}".to_vec()
        );
        assert_eq!(joined(text, &[]).unwrap(), b"".to_vec());
        assert!(joined(text, &[(20, 99)]).is_err());
        assert!(joined(text, &[(-1, 3)]).is_err());
    }
}
