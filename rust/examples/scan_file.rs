//! Time the scanner alone over a trace's event array, chunk by chunk as the reader cuts it
//! (about 2 MB at a `},\n{` boundary): `cargo run --release --example scan_file -- FILE`
//! (`KEEP_CPU=1`: with CPU rows, as gaps reads; `FRAMES=1`: and frames, as summary reads).
use std::time::Instant;

use _core::scan::{scan, DropRule, Options};

fn main() {
    let path = std::env::args().nth(1).expect("a plain JSON trace");
    let text = std::fs::read(&path).expect("readable");
    let start = text
        .windows(15)
        .position(|w| w == b"\"traceEvents\": ")
        .expect("an array")
        + 16;
    let start = start
        + text[start..]
            .iter()
            .position(|&b| b == b'{')
            .expect("an event");
    let v = |items: &[&str]| items.iter().map(|s| s.as_bytes().to_vec()).collect();
    let flag = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    let (exact, keep_frames) = (flag("EXACT"), flag("FRAMES"));
    let keep_cpu = keep_frames || flag("KEEP_CPU");
    let cpu_categories: &[&str] = if keep_cpu {
        &[]
    } else {
        &["user_annotation", "cpu_op", "operator"]
    };
    let options = Options {
        exact,
        keep_cpu,
        keep_frames,
        drop: Some(DropRule {
            known: v(&[
                "kernel",
                "gpu_memcpy",
                "memcpy",
                "gpu_memset",
                "memset",
                "cuda_runtime",
                "cuda_driver",
                "runtime",
                "user_annotation",
                "cpu_op",
                "operator",
                "gpu_user_annotation",
                "python_function",
            ]),
            categories: v(&[&["gpu_user_annotation", "python_function"], cpu_categories].concat()),
            keep_prefixes: v(&["ProfilerStep#"]),
            keep_suffixes: v(&[": execute_model"]),
            keep_contains: v(&["ForCausalLM_", "LMHeadModel_"]),
            keep_other_names: v(&["[memory]"]),
        }),
        seen: false,
    };
    let began = Instant::now();
    let (mut pos, mut rows, mut dropped, mut refused, mut bytes) = (start, 0, 0, 0, 0);
    while pos < text.len() {
        let window_end = (pos + (2 << 20)).min(text.len());
        let window = &text[pos..window_end];
        let cut = window
            .windows(4)
            .rposition(|w| w == b"},\n ")
            .map(|i| i + 1);
        let end = match cut {
            Some(c) if window_end < text.len() => pos + c,
            _ => break,
        };
        match scan(&text[pos..end], &options) {
            Ok(c) => {
                rows += c.gpu_ts.len() + c.rt_ts.len() + c.cpu.op_ts.len();
                rows += c.cpu.frame_ts.len() + c.cpu.flow_ts.len();
                dropped += c.dropped;
            }
            Err(r) => {
                refused += 1;
                if refused < 4 {
                    eprintln!("refused: {} at {}", r.why, r.at);
                }
            }
        }
        bytes += end - pos;
        pos = end + 1;
        while pos < text.len() && matches!(text[pos], b' ' | b'\n' | b',') {
            pos += 1;
        }
    }
    let secs = began.elapsed().as_secs_f64();
    println!(
        "{bytes} bytes in {secs:.3} s: {:.0} MB/s; rows {rows}, dropped {dropped}, refused chunks {refused}",
        bytes as f64 / secs / 1e6
    );
}
