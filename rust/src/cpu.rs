//! CPU rows: the CPU ops and step-marker python frames of a read that keeps CPU activity, the
//! python frames and `fwdbwd` flows of a read that keeps frames, converted as
//! traceview/columns/collect.py and frames.py convert them (schema.py's CPU_COLUMNS,
//! FRAME_COLUMNS, FLOW_COLUMNS; threads, names and shapes as ids into the chunk's tables).
//!
//! Once the scanner takes a chunk, every event of these kinds in it is a row here (or the
//! chunk is refused), so the Python side never holds part of them: it keeps only the
//! ProfilerStep markers, which stay with the Python path.

use std::borrow::Cow;

use crate::scan::{
    int_or_text, pair, refuse, text_or_null, times, Event, Kind, Options, Scan, Scanner, Table, Val,
};

/// Row kinds of the CPU categories (scan.rs CATEGORIES): cpu_op and 2021's operator,
/// user_annotation, python_function.
pub const OP: i8 = 11;
pub const USER_ANNOTATION: i8 = 14;
pub const PYTHON: i8 = 13;

/// The CPU-row marks (traceview/columns/cpu_rows.py OP, ANNOTATION, FRAME).
pub const MARK_OP: i64 = -1;
pub const MARK_ANNOTATION: i64 = -3;
pub const MARK_FRAME: i64 = -4;
/// An id that is absent, null, not an int or out of int64's range (frames.NO_ID).
pub const NO_ID: i64 = -1;

/// collect.py STEP_PREFIX, STEP_FRAMES, MODEL_FRAMES (is_step_frame); frames.FLOW_CATEGORY.
const STEP_PREFIX: &[u8] = b"ProfilerStep#";
const STEP_FRAMES: [&[u8]; 1] = [b": execute_model"];
const MODULE_PREFIX: &[u8] = b"nn.Module: ";
const MODEL_FRAMES: [&[u8]; 2] = [b"ForCausalLM_", b"LMHeadModel_"];
const FLOW_CATEGORY: &[u8] = b"fwdbwd";
/// Texts whose presence makes the Python side decode the frames' fields
/// (read/decode.py FRAME_KEYS): without them every python id and flow id reads as NO_ID.
const FRAME_KEYS: [&[u8]; 2] = [b"fwdbwd", b"python_function"];
/// Between the three texts of a shape key (collect.py _SHAPE_SEPARATOR).
const SHAPE_SEPARATOR: u8 = 0x1f;

/// The CPU rows of a chunk.
#[derive(Debug, Default)]
pub struct CpuRows {
    pub op_thread: Vec<i32>,
    pub op_name: Vec<i32>,
    pub op_ts: Vec<i64>,
    pub op_end: Vec<i64>,
    pub op_mark: Vec<i64>,
    pub op_shape: Vec<i32>,
    pub op_threads: Table,
    pub op_names: Table,
    /// Shape keys (dims, types, concrete texts joined by 0x1f), separated by 0x1e.
    pub shapes: Table,
    pub frame_thread: Vec<i32>,
    pub frame_name: Vec<i32>,
    pub frame_ts: Vec<i64>,
    pub frame_end: Vec<i64>,
    pub frame_python_id: Vec<i64>,
    pub frame_python_parent: Vec<i64>,
    pub frame_threads: Table,
    pub frame_names: Table,
    pub flow_flow: Vec<i64>,
    pub flow_thread: Vec<i32>,
    pub flow_ts: Vec<i64>,
    pub flow_finish: Vec<i8>,
    pub flow_threads: Table,
}

/// What is converted once the chunk is walked: the times (a column at a time, as the
/// Python side converts them) and the step-marker frames, whose op rows follow the ops.
#[derive(Default)]
pub(crate) struct Pending {
    op_ts: Vec<Val>,
    op_dur: Vec<Val>,
    frame_ts: Vec<Val>,
    frame_dur: Vec<Val>,
    flow_ts: Vec<Val>,
    step_frames: Vec<Event>,
    /// Whether the Python side would decode the frames' fields (FRAME_KEYS in the chunk):
    /// known once a row's category is written as one of them, else searched for once, when
    /// an id is first read (two searches of every chunk cost ~5% of a frame read).
    framed: Option<bool>,
    key: Vec<u8>,
    /// The chunk holds a collective's metadata (scan.rs COMM_KEY): a CPU op may have the
    /// fields the collectives' decoder reads as any value (scan.rs Chunk::comm).
    pub(crate) comm_chunk: bool,
}

/// Rows a chunk of `len` bytes may hold, for reserving its columns once: an event takes
/// ~200-400 bytes (the columns grew by doubling: ~4% of a scan with CPU rows went to
/// reallocating them, callgrind). Memory is reserved, not touched, past the rows written.
pub(crate) fn rows_for(len: usize) -> usize {
    len / 192
}

impl CpuRows {
    /// Room for the rows a read keeps (see rows_for).
    pub(crate) fn reserve(&mut self, pending: &mut Pending, len: usize, options: &Options) {
        let rows = rows_for(len);
        if options.keep_cpu {
            for column in [&mut self.op_thread, &mut self.op_name, &mut self.op_shape] {
                column.reserve(rows);
            }
            self.op_mark.reserve(rows);
            pending.op_ts.reserve(rows);
            pending.op_dur.reserve(rows);
        }
        if options.keep_frames {
            for column in [&mut self.frame_thread, &mut self.frame_name] {
                column.reserve(rows);
            }
            for column in [&mut self.frame_python_id, &mut self.frame_python_parent] {
                column.reserve(rows);
            }
            pending.frame_ts.reserve(rows);
            pending.frame_dur.reserve(rows);
        }
    }
}

impl Pending {
    fn framed(&mut self, s: &Scanner<'_>) -> bool {
        *self.framed.get_or_insert_with(|| {
            FRAME_KEYS
                .iter()
                .any(|k| memchr::memmem::find(s.chunk(), k).is_some())
        })
    }
}

impl CpuRows {
    fn thread(table: &mut Table, s: &Scanner<'_>, e: &Event, key: &mut Vec<u8>) -> i32 {
        key.clear();
        pair(key, text_or_null(s, e.pid), text_or_null(s, e.tid));
        table.id(key)
    }

    fn op(&mut self, s: &Scanner<'_>, e: &Event, mark: i64, pending: &mut Pending) -> Scan<()> {
        let (ts, dur) = timed(e)?;
        pending.op_ts.push(ts);
        pending.op_dur.push(dur);
        let key = &mut pending.key;
        self.op_thread
            .push(Self::thread(&mut self.op_threads, s, e, key));
        self.op_name.push(self.op_names.id(name_json(s, e)));
        // (Input Dims or Input dims, Input type, Concrete Inputs) as collect.py _shape_keys
        // joins their raw texts (a missing one: empty)
        key.clear();
        let [dims, dims_2021, types, concrete] = e.shape;
        for (n, part) in [dims.or(dims_2021), types, concrete]
            .into_iter()
            .enumerate()
        {
            if n > 0 {
                key.push(SHAPE_SEPARATOR);
            }
            if let Some(v) = part {
                key.extend_from_slice(s.text(v));
            }
        }
        self.op_shape.push(self.shapes.id(key));
        self.op_mark.push(mark);
        Ok(())
    }

    fn frame(&mut self, s: &Scanner<'_>, e: &Event, pending: &mut Pending) -> Scan<()> {
        let (ts, dur) = timed(e)?;
        pending.frame_ts.push(ts);
        pending.frame_dur.push(dur);
        self.frame_thread.push(Self::thread(
            &mut self.frame_threads,
            s,
            e,
            &mut pending.key,
        ));
        self.frame_name.push(self.frame_names.id(name_json(s, e)));
        let [python_id, python_parent] = e.python;
        self.frame_python_id.push(id_of(s, python_id, pending)?);
        self.frame_python_parent
            .push(id_of(s, python_parent, pending)?);
        Ok(())
    }

    fn flow(
        &mut self,
        s: &Scanner<'_>,
        e: &Event,
        finish: bool,
        pending: &mut Pending,
    ) -> Scan<()> {
        let Some(ts) = e.ts.filter(|v| v.kind == Kind::Num) else {
            return refuse(e.ts.map_or(0, |v| v.start), "a flow's ts not a number");
        };
        // its dur is decoded (float | int | None) but not used
        if let Some(dur) = e.dur.filter(|v| v.kind != Kind::Null) {
            if !(dur.kind == Kind::Num && any_number(s, dur)) {
                return refuse(dur.start, "a flow's dur not a number");
            }
        }
        pending.flow_ts.push(ts);
        self.flow_flow.push(id_of(s, e.id, pending)?);
        self.flow_thread
            .push(Self::thread(&mut self.flow_threads, s, e, &mut pending.key));
        self.flow_finish.push(i8::from(finish));
        Ok(())
    }

    /// The times of the chunk's rows, and the step-marker frames' op rows after the ops.
    pub(crate) fn finish(
        &mut self,
        s: &Scanner<'_>,
        options: &Options,
        pending: &mut Pending,
    ) -> Scan<()> {
        for e in std::mem::take(&mut pending.step_frames) {
            self.op(s, &e, MARK_FRAME, pending)?;
        }
        let ends = |ts: &[i64], dur: &[i64]| ts.iter().zip(dur).map(|(t, d)| t + d).collect();
        self.op_ts = times(s, &pending.op_ts, options, false)?;
        self.op_end = ends(&self.op_ts, &times(s, &pending.op_dur, options, true)?);
        self.frame_ts = times(s, &pending.frame_ts, options, false)?;
        self.frame_end = ends(
            &self.frame_ts,
            &times(s, &pending.frame_dur, options, true)?,
        );
        self.flow_ts = times(s, &pending.flow_ts, options, false)?;
        Ok(())
    }
}

/// An event of a CPU category (kind OP, USER_ANNOTATION or PYTHON) made rows: false when the
/// Python side keeps it (a ProfilerStep marker; a python frame that is no row of this read)
/// or this read keeps no CPU rows.
pub(crate) fn take(
    s: &Scanner<'_>,
    e: &Event,
    kind: i8,
    options: &Options,
    rows: &mut CpuRows,
    pending: &mut Pending,
) -> Scan<bool> {
    if !options.keep_cpu {
        return Ok(false);
    }
    let name = name_of(s, e)?;
    if kind == PYTHON {
        let step = is_step_frame(&name);
        if !(step || options.keep_frames) {
            return Ok(false);
        }
        typed(s, e, options, false)?;
        if options.keep_frames {
            if s.plain_str(e.cat) == Some(FRAME_KEYS[1]) {
                pending.framed = Some(true);
            }
            rows.frame(s, e, pending)?;
        }
        if step {
            timed(e)?;
            pending.step_frames.push(e.clone());
        }
        return Ok(true);
    }
    if name.starts_with(STEP_PREFIX) {
        return Ok(false);
    }
    typed(s, e, options, pending.comm_chunk)?;
    let mark = if kind == USER_ANNOTATION {
        MARK_ANNOTATION
    } else {
        MARK_OP
    };
    rows.op(s, e, mark, pending)?;
    Ok(true)
}

/// An event of no row kind made a flow row, if it is a `fwdbwd` flow's start or finish
/// (frames.is_flow) and this read keeps frames.
pub(crate) fn take_flow(
    s: &Scanner<'_>,
    e: &Event,
    options: &Options,
    rows: &mut CpuRows,
    pending: &mut Pending,
) -> Scan<bool> {
    if !options.keep_frames {
        return Ok(false);
    }
    let finish = match e.ph.and_then(|v| s.plain_str(Some(v))) {
        Some(b"s") => false,
        Some(b"f") => true,
        _ => return Ok(false), // an escaped ph was refused (kind_of)
    };
    let Some(cat) = e
        .cat
        .filter(|v| matches!(v.kind, Kind::Str | Kind::StrEscaped))
    else {
        return Ok(false); // not text: the Python side rejects it
    };
    if decoded(s, cat)?.as_ref() != FLOW_CATEGORY {
        return Ok(false);
    }
    if s.plain_str(Some(cat)).is_none() {
        // its id is decoded only where FRAME_KEYS is in the text
        return refuse(cat.start, "an escaped flow category");
    }
    typed(s, e, options, false)?;
    pending.framed = Some(true); // its category is written `fwdbwd`
    rows.flow(s, e, finish, pending)?;
    Ok(true)
}

/// Each field of a CPU row as the fast decoder types it (traceview/read/decode.py Event,
/// ShapedArgs; the frames' fields where frames are read), else refused: the decoder would
/// reject the chunk. `any_fields`: a collective's or the allocator's fields are let through
/// (a CPU op in a chunk with a collective's metadata: the Python side decodes them).
fn typed(s: &Scanner<'_>, e: &Event, options: &Options, any_fields: bool) -> Scan<()> {
    if let Some(v) = e
        .name
        .filter(|v| !matches!(v.kind, Kind::Str | Kind::StrEscaped))
    {
        return refuse(v.start, "cat or name not text");
    }
    int_or_text(s, e.pid)?;
    int_or_text(s, e.tid)?;
    if let Some(a) = e
        .args
        .filter(|a| !matches!(a.kind, Kind::Null | Kind::Object))
    {
        return refuse(a.start, "args not an object");
    }
    int_or_text(s, e.device)?;
    int_or_text(s, e.stream)?;
    if let Some(v) = e.correlation.filter(|v| v.kind != Kind::Null) {
        if !(v.kind == Kind::Num && s.is_small_int(v)) {
            return refuse(v.start, "a correlation not an int");
        }
    }
    // read as any value by the decoder, and unused on a CPU row: a scalar it surely takes is
    // let through (torch.compile <= 2.4 wrote `"grid": "grid(100,)"` on each Triton op), the
    // rest left to the Python side rather than checked here
    let any = e.extra_any.filter(|_| !any_fields);
    let launch = e.launch.iter().flatten().find(|v| !sure_scalar(s, **v));
    if let Some(v) = launch.or(any.as_ref()) {
        return refuse(v.start, "a launch or allocator field on a CPU row");
    }
    if options.keep_frames && !frame_fields_decodable(s, e) {
        return refuse(
            e.ph.map_or(0, |v| v.start),
            "a frame field the decoder may reject",
        );
    }
    Ok(())
}

/// Whether the decoder's `Any` frame fields (an event's `id`, args' python ids) take the
/// event's values: numbers only where they surely are finite, no containers (else the event
/// goes to the Python side, or the chunk does).
pub(crate) fn frame_fields_decodable(s: &Scanner<'_>, e: &Event) -> bool {
    [e.id, e.python[0], e.python[1]]
        .into_iter()
        .flatten()
        .all(|v| match v.kind {
            Kind::Num => any_number(s, v),
            Kind::Object | Kind::Array => false,
            _ => true,
        })
}

/// A scalar the decoder reads as any value without fail: text, a literal, null or such a
/// number.
pub(crate) fn sure_scalar(s: &Scanner<'_>, v: Val) -> bool {
    match v.kind {
        Kind::Str | Kind::StrEscaped | Kind::Literal | Kind::Null => true,
        Kind::Num => any_number(s, v),
        Kind::Object | Kind::Array => false,
    }
}

/// A number the decoder reads as a finite float or an int (no exponent, < 10^300).
fn any_number(s: &Scanner<'_>, v: Val) -> bool {
    // a token shorter than 300 bytes has fewer integer digits: they are not counted
    !s.has_exponent(v) && (v.end - v.start < 300 || s.int_digits_and_exp(v).0 < 300)
}

/// A row's ts and dur (numbers: the batch conversion refuses anything else).
fn timed(e: &Event) -> Scan<(Val, Val)> {
    match (e.ts, e.dur) {
        (Some(ts), Some(dur)) if ts.kind == Kind::Num && dur.kind == Kind::Num => Ok((ts, dur)),
        _ => refuse(
            e.ts.map_or(0, |v| v.start),
            "a CPU row's ts or dur not a number",
        ),
    }
}

/// frames._id of a python id or flow id: the int in [0, int64 max], else NO_ID (a value
/// the decoder may reject is refused; not decoded at all where the chunk is not `framed`).
fn id_of(s: &Scanner<'_>, v: Option<Val>, pending: &mut Pending) -> Scan<i64> {
    let Some(v) = v.filter(|v| v.kind == Kind::Num && pending.framed(s)) else {
        return Ok(NO_ID);
    };
    let t = s.number(v);
    if !t.frac.is_empty() || t.has_exp {
        return if any_number(s, v) {
            Ok(NO_ID) // a float
        } else {
            refuse(v.start, "an id the decoder may reject")
        };
    }
    let zero = t.int.iter().all(|&d| d == b'0');
    if t.negative && !zero {
        return Ok(NO_ID);
    }
    // at most 19 digits fit u64; longer ints are beyond int64 (no leading zeros in JSON)
    if t.int.len() > 19 {
        return Ok(NO_ID);
    }
    let value = t
        .int
        .iter()
        .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
    Ok(i64::try_from(value).unwrap_or(NO_ID))
}

/// The name's JSON text (`""` when absent), as the tables hold it.
fn name_json<'a>(s: &Scanner<'a>, e: &Event) -> &'a [u8] {
    e.name.map_or(&b"\"\""[..], |v| s.text(v))
}

/// The name as the decoder gives it (UTF-8), "" when absent; not text: refused.
fn name_of<'a>(s: &Scanner<'a>, e: &Event) -> Scan<Cow<'a, [u8]>> {
    match e.name {
        None => Ok(Cow::Borrowed(b"")),
        Some(v) if matches!(v.kind, Kind::Str | Kind::StrEscaped) => decoded(s, v),
        Some(v) => refuse(v.start, "cat or name not text"),
    }
}

/// A checked string's text, escapes decoded (refused where one is not what it should be).
fn decoded<'a>(s: &Scanner<'a>, v: Val) -> Scan<Cow<'a, [u8]>> {
    let body = &s.text(v)[1..v.end - v.start - 1];
    if v.kind == Kind::Str {
        return Ok(Cow::Borrowed(body));
    }
    match unescaped(body) {
        Some(text) => Ok(Cow::Owned(text)),
        None => refuse(v.start, "an escape that is not what it should be"),
    }
}

/// A JSON string's body (checked by strings::check) with its escapes decoded, as UTF-8.
pub fn unescaped(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let decoded = match body.get(i + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = hex4(body.get(i + 2..i + 6)?)?;
                i += 6;
                let code = if (0xD800..0xDC00).contains(&unit) {
                    if body.get(i..i + 2)? != b"\\u" {
                        return None;
                    }
                    let low = hex4(body.get(i + 2..i + 6)?)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    i += 6;
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    unit
                };
                let c = char::from_u32(code)?;
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                continue;
            }
            _ => return None,
        };
        out.push(decoded as u8);
        i += 2;
    }
    Some(out)
}

fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |acc, &d| Some(acc * 16 + (d as char).to_digit(16)?))
}

/// collect.py is_step_frame: a python frame that may be a step marker.
fn is_step_frame(name: &[u8]) -> bool {
    STEP_FRAMES.iter().any(|f| name.ends_with(f))
        || (name.starts_with(MODULE_PREFIX)
            && MODEL_FRAMES
                .iter()
                .any(|m| memchr::memmem::find(name, m).is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{scan, Chunk};

    fn options(keep_cpu: bool, keep_frames: bool) -> Options {
        Options {
            keep_cpu,
            keep_frames,
            ..Options::default()
        }
    }

    fn scanned(events: &[&str], options: &Options) -> Chunk {
        scan(events.join(",\n").as_bytes(), options).expect("accepted")
    }

    fn refused(events: &[&str], options: &Options) -> &'static str {
        scan(events.join(",\n").as_bytes(), options)
            .expect_err("refused")
            .why
    }

    fn text(table: &Table) -> String {
        String::from_utf8(table.finished()).unwrap()
    }

    const OP: &str = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":8,"dur":3,"args":{"Input Dims":[[2, 3], []],"Input type":["float", ""],"Concrete Inputs":["", "1"]}}"#;

    #[test]
    fn a_launch_field_on_an_op_is_taken_only_as_a_sure_scalar() {
        let with = |grid: &str| OP.replace(r#""args":{"#, &format!(r#""args":{{"grid":{grid},"#));
        let cpu = options(true, false);
        for grid in [r#""grid(100,)""#, "100", "null", "true", "1.5"] {
            assert_eq!(
                scanned(&[&with(grid)], &cpu).cpu.op_mark,
                vec![MARK_OP],
                "{grid}"
            );
        }
        for grid in ["[100, 1, 1]", r#"{"x": 1}"#, "1.5e3"] {
            assert!(refused(&[&with(grid)], &cpu).contains("launch"), "{grid}");
        }
        refused(&[&with("1e400")], &cpu); // a number no float holds: refused as such
    }

    #[test]
    fn ops_and_step_frames_are_rows_in_the_python_order() {
        let events = [
            r#"{"ph":"X","cat":"python_function","name":"nn.Module: LlamaForCausalLM_0","pid":1,"tid":3,"ts":1,"dur":100}"#,
            OP,
            r#"{"ph":"X","cat":"User_Annotation","name":"a\"b","pid":1,"tid":2,"ts":9,"dur":1,"args":null}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"\u0050rofilerStep#2","pid":1,"tid":2,"ts":1,"dur":50}"#,
            r#"{"ph":"X","cat":"python_function","name":"f.py(1): g","pid":1,"tid":2,"ts":2,"dur":1}"#,
            r#"{"ph":"X","cat":"operator","name":"conv","pid":"p","tid":2,"ts":10.5,"dur":0.25,"args":{"Input dims":[[1]],"Input type":["int"]}}"#,
            r#"{"ph":"X","cat":"python_function","name":"w.py(9): execute_model","pid":1,"tid":3,"ts":3,"dur":7}"#,
        ];
        let c = scanned(&events, &options(true, false));
        let rows = &c.cpu;
        // the ops in file order, then the step-marker frames
        assert_eq!(
            rows.op_mark,
            vec![MARK_OP, MARK_ANNOTATION, MARK_OP, MARK_FRAME, MARK_FRAME]
        );
        assert_eq!(rows.op_ts, vec![8000, 9000, 10_500, 1000, 3000]);
        assert_eq!(rows.op_end, vec![11_000, 10_000, 10_750, 101_000, 10_000]);
        assert_eq!(
            text(&rows.op_names),
            r#"["aten::mm","a\"b","conv","nn.Module: LlamaForCausalLM_0","w.py(9): execute_model"]"#
        );
        assert_eq!(rows.op_name, vec![0, 1, 2, 3, 4]);
        assert_eq!(text(&rows.op_threads), r#"[[1,2],["p",2],[1,3]]"#);
        assert_eq!(rows.op_thread, vec![0, 0, 1, 2, 2]);
        // the raw texts of the shapes, joined; args null or without shapes: all empty
        assert_eq!(
            text(&rows.shapes),
            "[[2, 3], []]\x1f[\"float\", \"\"]\x1f[\"\", \"1\"]\x1e\x1f\x1f\x1e[[1]]\x1f[\"int\"]\x1f"
        );
        assert_eq!(rows.op_shape, vec![0, 1, 2, 1, 1]);
        // the ProfilerStep marker and the other frame are left to the Python side
        assert_eq!(c.others.len(), 4);
        assert!(rows.frame_ts.is_empty());
    }

    #[test]
    fn without_cpu_rows_ops_are_left() {
        let c = scanned(&[OP, OP], &options(false, false));
        assert!(c.cpu.op_ts.is_empty());
        assert_eq!(c.others.len(), 4);
    }

    #[test]
    fn shapes_of_2021_only_where_the_newer_key_is_absent() {
        let both = r#"{"ph":"X","cat":"cpu_op","ts":1,"dur":1,"args":{"Input dims":[[9]],"Input Dims":[[1]]}}"#;
        let c = scanned(&[both], &options(true, false));
        assert_eq!(text(&c.cpu.shapes), "[[1]]\x1f\x1f");
    }

    #[test]
    fn cpu_rows_refused_where_the_python_path_would_not_batch_them() {
        let keep = options(true, false);
        // the fields after `"ph":"X","cat":"cpu_op",`
        let cases = [
            (r#""ts":1"#, "ts or dur"),
            (r#""ts":"1","dur":1"#, "ts or dur"),
            (r#""ts":1,"dur":null"#, "ts or dur"),
            (r#""ts":1,"dur":-1"#, "times"),
            (r#""ts":1,"dur":1,"args":[]"#, "args"),
            (r#""ts":1,"dur":1,"pid":1.5"#, "int"),
            (r#""ts":1,"dur":1,"name":null"#, "text"),
            (
                r#""ts":1,"dur":1,"args":{"correlation":"1"}"#,
                "correlation",
            ),
            (r#""ts":1,"dur":1,"args":{"grid":[1]}"#, "launch"),
            (
                r#""ts":1,"dur":1,"args":{"Input Dims":1,"Input Dims":2}"#,
                "repeated",
            ),
        ];
        for (fields, why) in cases {
            let event = format!(r#"{{"ph":"X","cat":"cpu_op",{fields}}}"#);
            assert!(refused(&[&event], &keep).contains(why), "{event}");
        }
        let frame = r#"{"ph":"X","cat":"python_function","name":"x: execute_model","ts":1}"#;
        assert!(refused(&[frame], &keep).contains("ts or dur"));
        // plain floats too big for exact ns: the Python path reads them exactly
        let late = r#"{"ph":"X","cat":"cpu_op","ts":1712195495505582.5,"dur":1}"#;
        assert!(refused(&[late], &keep).contains("times"));
    }

    const FRAME: &str = r#"{"ph":"X","cat":"python_function","name":"m.py(3): f","pid":1,"tid":2,"ts":5,"dur":2,"args":{"Python id":7,"Python parent id":3}}"#;

    #[test]
    fn frames_and_flows_are_rows_where_frames_are_read() {
        let ids = [
            ("7", 7),
            ("-3", NO_ID),
            ("-0", 0),
            ("1.5", NO_ID),
            ("\"7\"", NO_ID),
            ("true", NO_ID),
            ("null", NO_ID),
            ("9223372036854775807", i64::MAX),
            ("9223372036854775808", NO_ID),
            ("123456789012345678901234", NO_ID),
        ];
        for (id, expected) in ids {
            let frame = FRAME.replace(r#""Python id":7"#, &format!(r#""Python id":{id}"#));
            let flow = format!(
                r#"{{"ph":"f","cat":"fwdbwd","name":"fwdbwd","id":{id},"pid":1,"tid":4,"ts":6,"bp":"e"}}"#
            );
            let c = scanned(&[&frame, &flow], &options(true, true));
            assert_eq!(c.cpu.frame_python_id, vec![expected], "{id}");
            assert_eq!(c.cpu.frame_python_parent, vec![3]);
            assert_eq!(c.cpu.flow_flow, vec![expected], "{id}");
            assert!(c.others.is_empty());
        }
        let start = r#"{"ph":"s","cat":"fwdbwd","name":"fwdbwd","id":1,"pid":1,"tid":4,"ts":6.5}"#;
        let other = r#"{"ph":"t","cat":"fwdbwd","id":1,"ts":6}"#;
        let no_args = r#"{"ph":"X","cat":"python_function","name":"n","ts":1,"dur":0,"args":null}"#;
        let c = scanned(&[FRAME, start, other, no_args], &options(true, true));
        assert_eq!(c.cpu.frame_ts, vec![5000, 1000]);
        assert_eq!(c.cpu.frame_end, vec![7000, 1000]);
        assert_eq!(c.cpu.frame_python_id, vec![7, NO_ID]);
        assert_eq!(text(&c.cpu.frame_names), r#"["m.py(3): f","n"]"#);
        assert_eq!(text(&c.cpu.frame_threads), "[[1,2],[null,null]]");
        assert_eq!(c.cpu.flow_ts, vec![6500]);
        assert_eq!(c.cpu.flow_finish, vec![0]);
        assert_eq!(text(&c.cpu.flow_threads), "[[1,4]]");
        assert_eq!(c.others.len(), 2); // the flow of another phase
                                       // without frames: the frame and the flow are left (the drop rule decides)
        let c = scanned(&[FRAME, start], &options(true, false));
        assert!(c.cpu.frame_ts.is_empty() && c.cpu.flow_ts.is_empty());
        assert_eq!(c.others.len(), 4);
    }

    #[test]
    fn ids_read_only_where_the_python_side_decodes_them() {
        // no "python_function" nor "fwdbwd" in the text: the decoder leaves the ids out
        let upper = FRAME.replace("python_function", "Python_Function");
        let c = scanned(&[&upper], &options(true, true));
        assert_eq!(c.cpu.frame_python_id, vec![NO_ID]);
        assert_eq!(c.cpu.frame_python_parent, vec![NO_ID]);
    }

    #[test]
    fn frames_refused_where_the_decoder_may_reject_them() {
        let keep = options(true, true);
        let cases = [
            FRAME.replace(r#""Python id":7"#, r#""Python id":1e400"#),
            FRAME.replace(r#""Python id":7"#, r#""Python id":[1]"#),
            FRAME.replace(r#","dur":2"#, ""),
            r#"{"ph":"f","cat":"fwdbwd","id":1,"ts":"6"}"#.to_string(),
            r#"{"ph":"f","cat":"fwdbwd","id":1,"ts":6,"dur":"x"}"#.to_string(),
            r#"{"ph":"f","cat":"fwdbw\u0064","id":1,"ts":6}"#.to_string(),
            r#"{"ph":"f","cat":"ac2g","id":1e400,"ts":6}"#.to_string(),
        ];
        for event in &cases {
            let result = scan(event.as_bytes(), &keep);
            // refused, or (the last) left to the Python side, which says what it is
            match result {
                Err(_) => {}
                Ok(c) => assert_eq!(c.others.len(), 2, "{event}"),
            }
        }
        for event in &cases[..6] {
            assert!(scan(event.as_bytes(), &keep).is_err(), "{event}");
        }
    }

    #[test]
    fn escapes_decoded() {
        let cases: [(&str, &str); 6] = [
            (r"plain", "plain"),
            (r#"a\"b\\c\/d"#, "a\"b\\c/d"),
            (r"\b\f\n\r\t", "\u{8}\u{c}\n\r\t"),
            (r"\u0050rofilerStep#1", "ProfilerStep#1"),
            (r"\u00e9\u20AC", "é€"),
            (r"\ud83d\ude00!", "😀!"),
        ];
        for (body, text) in cases {
            assert_eq!(
                unescaped(body.as_bytes()).unwrap(),
                text.as_bytes(),
                "{body}"
            );
        }
        for bad in [r"\x", r"\u12", r"\ud800", r"\ud800\u0041", "\\"] {
            assert_eq!(unescaped(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn step_frames() {
        for name in [
            "vllm/worker.py(100): execute_model",
            "nn.Module: LlamaForCausalLM_0",
            "nn.Module: GPT2LMHeadModel_1",
        ] {
            assert!(is_step_frame(name.as_bytes()), "{name}");
        }
        for name in [
            "execute_model ",
            "LlamaForCausalLM_0",
            "nn.Module: Linear_0",
            "",
        ] {
            assert!(!is_step_frame(name.as_bytes()), "{name}");
        }
    }
}
