//! Streaming gzip inflation, on a background thread a few blocks ahead of the reader.
//!
//! `Gunzip` follows traceview/read/source.py's `_gunzip` step for step (the same reads of
//! the file, the same output limit per inflate call, the same member and trailing-data
//! checks), so both paths stop at the same decompressed offset with the same message.
//! `Background` runs it on its own thread into reused buffers, so inflation overlaps the
//! scan; memory stays flat (`ahead` blocks in flight, one input buffer).

use std::io::{self, Read, Seek, SeekFrom};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use flate2::{Decompress, FlushDecompress, Status};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// zlib's Z_DATA_ERROR, as Python's zlib modules print it.
const DATA_ERROR: &str = "Error -3 while decompressing data";
/// What zlib-rs (0.6.8) says when its fast loop found the damage: the fast loop's own message
/// is overwritten on the way out, so `Gunzip` replays the member to find it (`first_error`).
const BAD_STATE: &str = "repeated call with bad state";

/// What the stream gives next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// `data[..len]` inflated; `end`: decompressed bytes so far; `consumed`: file bytes used.
    Block {
        data: Vec<u8>,
        len: usize,
        end: u64,
        consumed: u64,
    },
    /// The last member ended, followed by nothing (or only zero bytes).
    End { after: u64, consumed: u64 },
    /// The file ends inside a member, `after` decompressed bytes.
    Truncated { after: u64, consumed: u64 },
    /// Something that is not a gzip member follows one.
    Trailing { after: u64, consumed: u64 },
    /// The inflater failed: `message` as Python's zlib says it.
    Corrupt {
        after: u64,
        consumed: u64,
        message: String,
    },
    /// The file could not be read (or the inflate thread failed).
    Io { message: String },
}

/// gzip member after member from `raw`, in blocks of at most `block_size` bytes.
pub struct Gunzip<R> {
    raw: R,
    read_size: usize,
    block_size: usize,
    inflater: Decompress,
    input: Vec<u8>,
    pos: usize, // input[pos..] not yet inflated
    file_pos: u64,
    member_start: u64, // the file offset of the current member's first byte
    decompressed: u64,
    consumed: u64, // file bytes inflated, as of the last inflate call
    tail: usize,   // what Python's zlib keeps as the call's unconsumed_tail
    member_end: bool,
    finished: bool,
}

impl<R: Read + Seek> Gunzip<R> {
    pub fn new(raw: R, read_size: usize, block_size: usize) -> Self {
        Gunzip {
            raw,
            read_size: read_size.max(1),
            block_size: block_size.max(1),
            inflater: Decompress::new_gzip(15),
            input: Vec::with_capacity(read_size.max(1)),
            pos: 0,
            file_pos: 0,
            member_start: 0,
            decompressed: 0,
            consumed: 0,
            tail: 0,
            member_end: false,
            finished: false,
        }
    }

    /// The next step; `out` is the buffer to inflate into (kept by a Block, else unused).
    pub fn next_step(&mut self, mut out: Vec<u8>) -> Step {
        if self.finished {
            return self.end();
        }
        let step = self.step(&mut out);
        match step {
            Ok(Some(len)) => Step::Block {
                data: out,
                len,
                end: self.decompressed,
                consumed: self.consumed,
            },
            Ok(None) => {
                self.finished = true;
                self.end()
            }
            Err(step) => {
                self.finished = true;
                step
            }
        }
    }

    fn end(&self) -> Step {
        Step::End {
            after: self.decompressed,
            consumed: self.consumed,
        }
    }

    /// Some(bytes inflated into `out`) for a block, None at the clean end.
    fn step(&mut self, out: &mut Vec<u8>) -> Result<Option<usize>, Step> {
        out.resize(self.block_size, 0); // a reused buffer keeps its length: no new fill
        loop {
            if self.member_end {
                self.member_end = false;
                if !self.next_member()? {
                    return Ok(None);
                }
            }
            if self.pos == self.input.len() {
                self.read_input()?;
                if self.input.is_empty() {
                    return Err(Step::Truncated {
                        after: self.decompressed,
                        consumed: self.consumed,
                    });
                }
            }
            let (before_in, before_out) = (self.inflater.total_in(), self.inflater.total_out());
            let status = self
                .inflater
                .decompress(
                    &self.input[self.pos..],
                    &mut out[..self.block_size],
                    FlushDecompress::None,
                )
                .map_err(|e| {
                    let why = match e.message() {
                        Some(BAD_STATE) => self.first_error(before_in),
                        why => why.map(str::to_string),
                    };
                    Step::Corrupt {
                        after: self.decompressed,
                        consumed: self.consumed,
                        message: match why {
                            Some(why) => format!("{DATA_ERROR}: {why}"),
                            None => DATA_ERROR.to_string(),
                        },
                    }
                })?;
            // Both totals grow by at most the slices' lengths.
            self.pos += (self.inflater.total_in() - before_in) as usize;
            let len = (self.inflater.total_out() - before_out) as usize;
            self.member_end = status == Status::StreamEnd;
            // Python's unconsumed_tail: at a member's end the bytes after it only if the
            // last call left some (CPython's zlib, save_unconsumed_input), else none.
            let left = self.input.len() - self.pos;
            self.tail = if self.member_end && self.tail == 0 {
                0
            } else {
                left
            };
            self.consumed = self.file_pos - self.tail as u64;
            self.decompressed += len as u64;
            if len > 0 {
                return Ok(Some(len));
            }
        }
    }

    /// After a member: true if another one starts (its bytes are `input[pos..]`), false at
    /// a clean end (nothing more, or only zero bytes up to the end of the file).
    fn next_member(&mut self) -> Result<bool, Step> {
        if self.pos == self.input.len() {
            self.read_input()?;
        }
        let rest = &self.input[self.pos..];
        if rest.is_empty() {
            return Ok(false);
        }
        if rest.iter().all(|&b| b == 0) {
            let mut one = [0u8; 1];
            let n = read_full(&mut self.raw, &mut one).map_err(io_step)?;
            self.file_pos += n as u64;
            if n == 0 {
                return Ok(false);
            }
        }
        if !rest.starts_with(&GZIP_MAGIC) {
            return Err(Step::Trailing {
                after: self.decompressed,
                consumed: self.consumed,
            });
        }
        self.inflater = Decompress::new_gzip(15);
        self.member_start = self.file_pos - rest.len() as u64;
        self.tail = 0;
        Ok(true)
    }

    /// zlib's first message for the damage that the member's inflate call starting at input
    /// byte `failed_at` met: the member is inflated again from its start, up to that byte at
    /// full speed, then a byte at a time, which keeps zlib-rs out of the fast loop that
    /// loses the message. Only on corrupt input; None if the replay cannot tell.
    fn first_error(&mut self, failed_at: u64) -> Option<String> {
        self.raw.seek(SeekFrom::Start(self.member_start)).ok()?;
        let mut inflater = Decompress::new_gzip(15);
        let mut input = vec![0u8; self.read_size];
        let mut out = vec![0u8; self.block_size];
        let (mut pos, mut len) = (0, 0);
        loop {
            if pos == len {
                len = read_full(&mut self.raw, &mut input).ok()?;
                pos = 0;
                if len == 0 {
                    return None;
                }
            }
            let total = inflater.total_in();
            let step = if total < failed_at {
                (failed_at - total).min((len - pos) as u64) as usize
            } else {
                1
            };
            let (before, made) = (inflater.total_in(), inflater.total_out());
            match inflater.decompress(&input[pos..pos + step], &mut out, FlushDecompress::None) {
                Err(e) => return e.message().map(str::to_string),
                Ok(Status::StreamEnd) => return None,
                Ok(_) if (inflater.total_in(), inflater.total_out()) == (before, made) => {
                    return None; // no progress: cannot tell
                }
                Ok(_) => pos += (inflater.total_in() - before) as usize,
            }
        }
    }

    /// Replace the consumed input with the next `read_size` bytes (fewer only at the end).
    fn read_input(&mut self) -> Result<(), Step> {
        self.input.resize(self.read_size, 0);
        let n = read_full(&mut self.raw, &mut self.input).map_err(io_step)?;
        self.input.truncate(n);
        self.pos = 0;
        self.file_pos += n as u64;
        Ok(())
    }
}

fn io_step(e: io::Error) -> Step {
    Step::Io {
        message: e.to_string(),
    }
}

/// Fill `buf` unless the end comes first (as Python's buffered read(n) does).
fn read_full(raw: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match raw.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A `Gunzip` on its own thread, at most `ahead` blocks in front of the reader.
pub struct Background {
    steps: Option<Receiver<Step>>,
    recycle: Option<Sender<Vec<u8>>>,
    skip_before: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    done: bool,
    owner: u32, // the process that started the thread: a forked child has no such thread
}

impl Background {
    pub fn start<R: Read + Seek + Send + 'static>(
        raw: R,
        read_size: usize,
        block_size: usize,
        ahead: usize,
    ) -> io::Result<Self> {
        let (send, steps) = mpsc::sync_channel(ahead.max(1));
        let (recycle, reuse) = mpsc::channel();
        let skip_before = Arc::new(AtomicU64::new(0));
        let skip = Arc::clone(&skip_before);
        let thread = std::thread::Builder::new()
            .name("traceview-inflate".into())
            .spawn(move || {
                let gunzip = Gunzip::new(raw, read_size, block_size);
                let run = catch_unwind(AssertUnwindSafe(|| {
                    inflate_ahead(gunzip, &send, &reuse, &skip)
                }));
                if run.is_err() {
                    let _ = send.send(Step::Io {
                        message: "the inflate thread failed (a bug)".into(),
                    });
                }
            })?;
        Ok(Background {
            steps: Some(steps),
            recycle: Some(recycle),
            skip_before,
            thread: Some(thread),
            done: false,
            owner: std::process::id(),
        })
    }

    /// The next step (blocks until the thread has it); none after the last one.
    pub fn next_step(&mut self) -> Step {
        if std::process::id() != self.owner {
            self.done = true;
            return Step::Io {
                message: "a gzip reader cannot be read after a fork (a bug)".into(),
            };
        }
        let step = match (&self.steps, self.done) {
            (Some(steps), false) => steps.recv().unwrap_or(Step::Io {
                message: "the inflate thread stopped early (a bug)".into(),
            }),
            _ => Step::Io {
                message: "the gzip stream was read to its end or closed (a bug)".into(),
            },
        };
        if !matches!(step, Step::Block { .. }) {
            self.done = true;
        }
        step
    }

    /// A block's buffer, used: the thread inflates into it again.
    pub fn give_back(&self, buffer: Vec<u8>) {
        if std::process::id() != self.owner {
            return; // a forked child: its channels are left as they are (see close)
        }
        if let Some(recycle) = &self.recycle {
            let _ = recycle.send(buffer);
        }
    }

    /// Blocks that end before `offset` are not wanted: the thread drops them unsent.
    pub fn skip_before(&self, offset: u64) {
        self.skip_before.store(offset, Ordering::Relaxed);
    }

    /// Stop the thread (it ends at its next block) and wait for it.
    pub fn close(&mut self) {
        self.done = true;
        if std::process::id() != self.owner {
            // A forked child: the thread is not here, and a lock of the channels it held at
            // the fork stays held; dropping them would wait on it for ever. Left as they are.
            std::mem::forget(self.steps.take());
            std::mem::forget(self.recycle.take());
            std::mem::forget(self.thread.take());
            return;
        }
        self.steps = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.close();
    }
}

fn inflate_ahead<R: Read + Seek>(
    mut gunzip: Gunzip<R>,
    send: &SyncSender<Step>,
    reuse: &Receiver<Vec<u8>>,
    skip: &AtomicU64,
) {
    let mut spare: Option<Vec<u8>> = None;
    loop {
        let out = spare
            .take()
            .or_else(|| reuse.try_recv().ok())
            .unwrap_or_default();
        match gunzip.next_step(out) {
            Step::Block { data, end, .. } if end < skip.load(Ordering::Relaxed) => {
                spare = Some(data);
            }
            step @ Step::Block { .. } => {
                if send.send(step).is_err() {
                    return; // the reader is gone
                }
            }
            step => {
                let _ = send.send(step);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::{Cursor, Write};

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"{\"ph\":\"X\",\"ts\":12345},\n"[i % 23] ^ (i / 9973 % 3) as u8)
            .collect()
    }

    /// Every step of a synchronous run: the bytes, and the step that ended it.
    fn run(file: &[u8], read: usize, block: usize) -> (Vec<u8>, Step) {
        let mut g = Gunzip::new(Cursor::new(file.to_vec()), read, block);
        let mut all = Vec::new();
        loop {
            match g.next_step(Vec::new()) {
                Step::Block { data, len, end, .. } => {
                    assert!(len > 0 && len <= block);
                    all.extend_from_slice(&data[..len]);
                    assert_eq!(end, all.len() as u64);
                }
                step => return (all, step),
            }
        }
    }

    fn run_background(file: &[u8], read: usize, block: usize, ahead: usize) -> (Vec<u8>, Step) {
        let mut b = Background::start(Cursor::new(file.to_vec()), read, block, ahead).unwrap();
        let mut all = Vec::new();
        loop {
            match b.next_step() {
                Step::Block { data, len, .. } => {
                    all.extend_from_slice(&data[..len]);
                    b.give_back(data);
                }
                step => return (all, step),
            }
        }
    }

    #[test]
    fn inflates_members_in_blocks() {
        let (a, b) = (text(300_000), text(5_000));
        let mut file = gzip(&a);
        file.extend(gzip(&b));
        file.extend(gzip(b""));
        for (read, block) in [(1 << 20, 2 << 20), (7, 1000), (4096, 1)] {
            let (out, end) = run(&file, read, block);
            let n = (a.len() + b.len()) as u64;
            assert_eq!(
                end,
                Step::End {
                    after: n,
                    consumed: file.len() as u64
                }
            );
            assert_eq!(out, [a.clone(), b.clone()].concat());
        }
        let (out, end) = run_background(&file, 1000, 4096, 2);
        assert!(matches!(end, Step::End { .. }));
        assert_eq!(out, [a, b].concat());
    }

    #[test]
    fn empty_member_gives_no_block() {
        let file = gzip(b"");
        let end = Step::End {
            after: 0,
            consumed: file.len() as u64,
        };
        assert_eq!(run(&file, 1 << 20, 1 << 20), (Vec::new(), end));
    }

    #[test]
    fn truncated_keeps_what_inflated() {
        let data = text(200_000);
        let file = gzip(&data);
        for cut in [1, 10, 11, file.len() / 2, file.len() - 8, file.len() - 1] {
            let (out, end) = run(&file[..cut], 1 << 20, 1 << 20);
            let after = out.len() as u64;
            assert!(matches!(end, Step::Truncated { after: a, .. } if a == after));
            assert_eq!(out[..], data[..out.len()]);
        }
    }

    #[test]
    fn trailing_data_and_zero_padding() {
        let data = text(1000);
        let mut file = gzip(&data);
        let clean = file.len();
        file.extend([0u8; 100]);
        assert!(matches!(
            run(&file, 1 << 20, 1 << 20).1,
            Step::End { after: 1000, .. }
        ));
        file.truncate(clean);
        file.extend(b"\n");
        assert_eq!(
            run(&file, 1 << 20, 1 << 20).1,
            Step::Trailing {
                after: 1000,
                consumed: file.len() as u64
            }
        );
        // Zero bytes then other bytes are trailing data too.
        file.truncate(clean);
        file.extend([0, 0, 7]);
        assert_eq!(
            run(&file, 1 << 20, 1 << 20).1,
            Step::Trailing {
                after: 1000,
                consumed: file.len() as u64
            }
        );
    }

    #[test]
    fn corrupt_data_is_zlibs_message() {
        let mut file = gzip(&text(1000));
        file[2] = 7; // compression method
        let (_, end) = run(&file, 1 << 20, 1 << 20);
        assert_eq!(
            end,
            Step::Corrupt {
                after: 0,
                consumed: 0,
                message: "Error -3 while decompressing data: unknown compression method".into()
            }
        );
        let mut file = gzip(&text(100_000));
        let n = file.len();
        file[n - 6] ^= 1; // the stored CRC
        match run(&file, 1 << 20, 1 << 20).1 {
            Step::Corrupt { message, after, .. } => {
                assert_eq!(after, 0); // one call inflated it all: its output is lost, as in Python
                assert!(message.ends_with("incorrect data check"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn damage_in_the_fast_loop_keeps_zlibs_first_message() {
        // A byte flipped inside the deflate data: zlib-rs's fast loop finds most of these,
        // and alone would say "repeated call with bad state" for each.
        let mut seed = 43u64;
        let mut events = Vec::new();
        while events.len() < 100_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let line = format!(
                "{{\"ph\":\"X\",\"ts\":{},\"dur\":{}}},\n",
                seed >> 40,
                seed % 997
            );
            events.extend_from_slice(line.as_bytes());
        }
        let file = gzip(&events);
        let mut told = std::collections::BTreeSet::new();
        for spot in (40..file.len() - 8).step_by(331) {
            let mut bad = file.clone();
            bad[spot] ^= 0x80;
            for (read, block) in [(1 << 20, 1 << 20), (4096, 8192)] {
                if let Step::Corrupt { message, .. } = run(&bad, read, block).1 {
                    assert!(!message.contains(BAD_STATE), "{spot}: {message}");
                    told.insert(message);
                }
            }
        }
        assert!(
            told.iter()
                .any(|m| m.ends_with("invalid distance too far back")),
            "{told:?}"
        );
    }

    #[test]
    fn background_skips_and_stops_early() {
        let data = text(400_000);
        let file = gzip(&data);
        let mut b = Background::start(Cursor::new(file.clone()), 4096, 10_000, 2).unwrap();
        b.skip_before(250_000);
        let mut spans = Vec::new();
        while let Step::Block {
            data: d, len, end, ..
        } = b.next_step()
        {
            let begin = end as usize - len;
            assert_eq!(d[..len], data[begin..end as usize]);
            spans.push((begin, end as usize));
        }
        // At most the blocks in flight before the hint came end before 250,000; from the
        // block that holds it on, every block comes.
        let sent = spans.iter().position(|&(_, end)| end >= 250_000).unwrap();
        assert!(sent <= 3 && spans[sent].0 <= 250_000);
        assert!(spans[sent..].windows(2).all(|w| w[0].1 == w[1].0));
        assert_eq!(spans.last().unwrap().1, 400_000);
        // Closed with blocks in flight: the thread ends, nothing hangs.
        let mut b = Background::start(Cursor::new(file), 4096, 1000, 1).unwrap();
        assert!(matches!(b.next_step(), Step::Block { .. }));
        b.close();
        assert!(matches!(b.next_step(), Step::Io { .. }));
    }
}
