//! traceview's compiled core: a private Python module, `traceview._core`, called only from
//! `traceview/read/compiled.py`. Columns cross into Python whole, as little-endian bytes that
//! numpy views without a copy; the scan runs with the GIL released; a panic never reaches
//! Python (it is caught and the chunk refused, so the Python path reads it).

pub mod cpu;
pub mod inflate;
mod keys;
pub mod numbers;
pub mod pool;
pub mod scan;
mod simd;
pub mod spans;
pub mod strings;

#[cfg(feature = "python")]
mod module;
