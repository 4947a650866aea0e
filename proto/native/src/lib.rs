//! The per-bucket loops of `loadfleet.wire.histogram`, in one pass each.
//!
//! A controller of 1,000 agents × 10 rows reads some ten million histogram buckets a second.
//! In numpy each step (widen the escapes, sum the deltas, restart each row, check the ranges)
//! is a pass of its own over temporary arrays; here a row is decoded, merged or summarized in
//! one loop. The Python module keeps the shapes and the rules (histogram.py's docstring); this
//! crate holds only the loops, and `tests/wire/test_histogram.py` checks them against hdrh.
//!
//! Arrays cross as bytes of native-endian i64 or f64 (numpy reads them with `frombuffer`, no
//! copy) and are read back through the buffer protocol. `merge` and `summarize` also take a
//! histogram as its packed bytes, read in place: most of a report's rows are only merged, and
//! decoding them into arrays first cost more than the merge (16 bytes a bucket, on fresh pages).

use pyo3::buffer::{PyBuffer, ReadOnlyCell};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// Buckets of loadfleet's one histogram shape: 1 µs to 1 h at 3 significant digits.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF_COUNT: i64 = 1 << SUB_BUCKET_HALF_MAGNITUDE;
const COUNTS_LEN: usize = 23 * (1 << SUB_BUCKET_HALF_MAGNITUDE);
/// The packed form's header: n, wide deltas, wide counts, zero (four little-endian u16).
const HEADER: usize = 8;

/// The lowest value (µs) counted in bucket `index`, and the bucket's width.
fn bucket_bounds(index: i64) -> (i64, i64) {
    let bucket = (index >> SUB_BUCKET_HALF_MAGNITUDE) - 1;
    let sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    if bucket < 0 {
        (sub_bucket - SUB_BUCKET_HALF_COUNT, 1)
    } else {
        (sub_bucket << bucket, 1 << bucket)
    }
}

fn bad(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

fn u16_at(raw: &[u8], at: usize) -> usize {
    u16::from_le_bytes([raw[at], raw[at + 1]]) as usize
}

/// One row of the packed form, its parts located and their lengths checked.
struct PackedRow<'a> {
    deltas: &'a [u8],
    counts: &'a [u8],
    wide_deltas: &'a [u8],
    wide_counts: &'a [u8],
}

impl<'a> PackedRow<'a> {
    fn parse(raw: &'a [u8]) -> PyResult<Option<Self>> {
        if raw.is_empty() {
            return Ok(None);
        }
        if raw.len() < HEADER {
            return Err(bad(format!("{} bytes are too short for packed buckets", raw.len())));
        }
        let (n, n_wide_deltas, n_wide_counts, zero) = (u16_at(raw, 0), u16_at(raw, 2), u16_at(raw, 4), u16_at(raw, 6));
        let wide_at = HEADER + 2 * n;
        let counts_at = wide_at + 2 * n_wide_deltas;
        if zero != 0 || n == 0 || raw.len() != counts_at + 4 * n_wide_counts {
            return Err(bad(format!("packed buckets of {} bytes do not match their header", raw.len())));
        }
        Ok(Some(PackedRow {
            deltas: &raw[HEADER..HEADER + n],
            counts: &raw[HEADER + n..wide_at],
            wide_deltas: &raw[wide_at..counts_at],
            wide_counts: &raw[counts_at..],
        }))
    }

    fn len(&self) -> usize {
        self.deltas.len()
    }

    /// Calls `f` with each bucket's index and count, in order; every index in range and
    /// above the one before, every count above zero, every escape matched by a wide value.
    fn for_each(&self, mut f: impl FnMut(i64, i64)) -> PyResult<()> {
        let (mut wide_delta, mut wide_count) = (self.wide_deltas.chunks_exact(2), self.wide_counts.chunks_exact(4));
        let mut index: i64 = -1;
        for i in 0..self.len() {
            let delta = match self.deltas[i] {
                0 => wide_delta.next().map(|w| u16::from_le_bytes([w[0], w[1]]) as i64),
                narrow => Some(narrow as i64),
            };
            let count = match self.counts[i] {
                0 => wide_count.next().map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i64),
                narrow => Some(narrow as i64),
            };
            let (Some(delta), Some(count)) = (delta, count) else {
                return Err(bad("packed buckets with more escapes than wide values"));
            };
            // The first delta counts from 0 and may be 0 (bucket 0); the others may not.
            index = if i == 0 { delta } else { index + delta };
            if (i > 0 && delta == 0) || index >= COUNTS_LEN as i64 || count == 0 {
                return Err(bad("packed buckets out of range, not ascending, or with an empty bucket"));
            }
            f(index, count);
        }
        if wide_delta.next().is_some() || wide_count.next().is_some() {
            return Err(bad("packed buckets with more wide values than escapes"));
        }
        Ok(())
    }

    /// Writes the row's bucket indices and counts (native-endian i64 each), checked as `for_each` does.
    fn decode_into(&self, indices: &mut [u8], counts: &mut [u8]) -> PyResult<()> {
        let mut outputs = indices.chunks_exact_mut(8).zip(counts.chunks_exact_mut(8));
        self.for_each(|index, count| {
            let (index_out, count_out) = outputs.next().expect("outputs sized by the caller");
            index_out.copy_from_slice(&index.to_ne_bytes());
            count_out.copy_from_slice(&count.to_ne_bytes());
        })
    }
}

/// Checks packed-bucket rows as `unpack` would, without decoding them anywhere: ValueError
/// names what is wrong with the first malformed row.
#[pyfunction]
fn check(rows: &Bound<'_, PyList>) -> PyResult<()> {
    for row in rows.iter() {
        let row = row.cast_into::<PyBytes>().map_err(|_| bad("a row of packed buckets that is not bytes"))?;
        if let Some(packed) = PackedRow::parse(row.as_bytes())? {
            packed.for_each(|_, _| ())?;
        }
    }
    Ok(())
}

/// `(indices, counts, lengths)`: the rows' bucket indices and counts one after the other, as
/// bytes of i64, and each row's number of buckets (0 for b"", the empty histogram).
/// ValueError names what is wrong with the first malformed row.
#[pyfunction]
fn unpack<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyList>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<usize>)> {
    let raws: Vec<Bound<'py, PyBytes>> = rows
        .iter()
        .map(|r| r.cast_into::<PyBytes>().map_err(|_| bad("a row of packed buckets that is not bytes")))
        .collect::<PyResult<_>>()?;
    let parsed: Vec<Option<PackedRow>> =
        raws.iter().map(|r| PackedRow::parse(r.as_bytes())).collect::<PyResult<_>>()?;
    let lengths: Vec<usize> = parsed.iter().map(|p| p.as_ref().map_or(0, PackedRow::len)).collect();
    let size = 8 * lengths.iter().sum::<usize>();
    // Decoded straight into the bytes objects numpy will read: no array between.
    let mut counts = None;
    let indices = PyBytes::new_with(py, size, |indices| {
        counts = Some(PyBytes::new_with(py, size, |counts| {
            let mut at = 0;
            for row in parsed.iter().flatten() {
                let end = at + 8 * row.len();
                row.decode_into(&mut indices[at..end], &mut counts[at..end])?;
                at = end;
            }
            Ok(())
        })?);
        Ok(())
    })?;
    Ok((indices, counts.expect("made with indices"), lengths))
}

fn i64_bytes<'py>(py: Python<'py>, values: &[i64]) -> Bound<'py, PyBytes> {
    // SAFETY: i64 has no padding and every byte is a valid u8; the length covers the slice exactly.
    PyBytes::new(py, unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) })
}

fn f64_bytes<'py>(py: Python<'py>, values: &[f64]) -> Bound<'py, PyBytes> {
    // SAFETY: as in i64_bytes: f64 has no padding.
    PyBytes::new(py, unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) })
}

/// An i64 array's elements, read in place.
type Cells<'a> = &'a [ReadOnlyCell<i64>];

/// A histogram's (indices, counts) arrays as read through the buffer protocol.
struct Arrays {
    indices: PyBuffer<i64>,
    counts: PyBuffer<i64>,
}

impl Arrays {
    fn of(part: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (indices, counts): (Bound<'_, PyAny>, Bound<'_, PyAny>) = part.extract()?;
        let arrays = Arrays { indices: PyBuffer::get(&indices)?, counts: PyBuffer::get(&counts)? };
        if arrays.indices.item_count() != arrays.counts.item_count() {
            return Err(bad("a histogram with more indices than counts or the other way round"));
        }
        Ok(arrays)
    }

    /// The two arrays' elements (a copy-free view while the buffers are held).
    fn cells<'a>(&'a self, py: Python<'a>) -> PyResult<(Cells<'a>, Cells<'a>)> {
        match (self.indices.as_slice(py), self.counts.as_slice(py)) {
            (Some(indices), Some(counts)) => Ok((indices, counts)),
            _ => Err(bad("a histogram's arrays must be contiguous")),
        }
    }
}

/// A histogram as Python hands it over: its packed bytes (read in place: a row that is only
/// merged or summarized is never decoded into arrays) or its (indices, counts) arrays.
enum Part<'py> {
    Packed(Bound<'py, PyBytes>),
    Arrays(Arrays),
}

impl<'py> Part<'py> {
    fn of(part: &Bound<'py, PyAny>) -> PyResult<Self> {
        match part.cast::<PyBytes>() {
            Ok(packed) => Ok(Part::Packed(packed.clone())),
            Err(_) => Ok(Part::Arrays(Arrays::of(part)?)),
        }
    }

    /// Calls `f` with each bucket's index (checked to be in range) and count, in order.
    fn for_each(&self, py: Python<'py>, mut f: impl FnMut(usize, i64)) -> PyResult<()> {
        match self {
            Part::Packed(packed) => match PackedRow::parse(packed.as_bytes())? {
                Some(row) => row.for_each(|index, count| f(index as usize, count)),
                None => Ok(()),
            },
            Part::Arrays(arrays) => {
                let (indices, counts) = arrays.cells(py)?;
                for (index, count) in indices.iter().zip(counts) {
                    let index = usize::try_from(index.get())
                        .ok()
                        .filter(|&i| i < COUNTS_LEN)
                        .ok_or_else(|| bad("a bucket index out of range"))?;
                    f(index, count.get());
                }
                Ok(())
            }
        }
    }
}

/// `(indices, counts)` of the sum of histograms, each given as packed bytes or as an
/// (indices, counts) pair, as bytes of i64.
#[pyfunction]
fn merge<'py>(py: Python<'py>, parts: &Bound<'py, PyList>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let mut dense = vec![0i64; COUNTS_LEN];
    let (mut low, mut high) = (COUNTS_LEN, 0);
    for part in parts.iter() {
        Part::of(&part)?.for_each(py, |index, count| {
            dense[index] += count;
            low = low.min(index);
            high = high.max(index + 1);
        })?;
    }
    let (indices, counts): (Vec<i64>, Vec<i64>) =
        (low..high.max(low)).filter(|&i| dense[i] != 0).map(|i| (i as i64, dense[i])).unzip();
    Ok((i64_bytes(py, &indices), i64_bytes(py, &counts)))
}

/// Figures of non-empty histograms, each given as packed bytes or as an (indices, counts)
/// pair, by hdrh's rules (histogram.py): bytes of f64 for means and standard deviations, of
/// i64 for minimums, maximums and the percentiles (row-major, one row of `percents` per histogram).
#[pyfunction]
#[allow(clippy::type_complexity)] // five arrays, as Summaries names them
fn summarize<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyList>,
    percents: Vec<f64>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>
{
    let n = parts.len();
    let (mut means, mut stddevs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut mins, mut maxes) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut percentiles = Vec::with_capacity(n * percents.len());
    let mut buckets: Vec<(i64, i64)> = Vec::new(); // one histogram's (index, count), reused
    for part in parts.iter() {
        buckets.clear();
        Part::of(&part)?.for_each(py, |index, count| buckets.push((index as i64, count)))?;
        let (Some(&(first, _)), Some(&(last, _))) = (buckets.first(), buckets.last()) else {
            return Err(bad("figures of non-empty histograms only"));
        };
        let weight = buckets.iter().map(|&(_, c)| c).sum::<i64>() as f64;
        let median = |index: i64| {
            let (lowest, size) = bucket_bounds(index);
            (lowest + (size >> 1)) as f64
        };
        let mean = buckets.iter().map(|&(i, c)| c as f64 * median(i)).sum::<f64>() / weight;
        let variance = buckets.iter().map(|&(i, c)| c as f64 * (median(i) - mean).powi(2)).sum::<f64>() / weight;
        means.push(mean);
        stddevs.push(variance.sqrt());
        mins.push(bucket_bounds(first).0);
        maxes.push(highest_value(last));
        // The first bucket whose cumulative count reaches max(1, round(p % of the total)).
        let targets: Vec<i64> = percents.iter().map(|p| ((p * weight / 100.0 + 0.5).floor() as i64).max(1)).collect();
        let mut order: Vec<usize> = (0..targets.len()).collect();
        order.sort_by_key(|&j| targets[j]);
        let mut found = vec![last; targets.len()];
        let (mut cumulative, mut at) = (0i64, 0usize);
        for &j in &order {
            while at < buckets.len() && cumulative + buckets[at].1 < targets[j] {
                cumulative += buckets[at].1;
                at += 1;
            }
            found[j] = buckets[at.min(buckets.len() - 1)].0;
        }
        percentiles.extend(found.into_iter().map(highest_value));
    }
    Ok((
        f64_bytes(py, &means),
        f64_bytes(py, &stddevs),
        i64_bytes(py, &mins),
        i64_bytes(py, &maxes),
        i64_bytes(py, &percentiles),
    ))
}

/// The highest value (µs) counted in bucket `index`.
fn highest_value(index: i64) -> i64 {
    let (lowest, size) = bucket_bounds(index);
    lowest + size - 1
}

#[pymodule]
fn loadfleet_buckets(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(unpack, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    Ok(())
}
