//! The wasted area of a run (Σ end − submit of failed and removed
//! attempts), summed in one fixed order whatever order the attempts end in:
//! job by job, each job's attempts by submission time, then by site, then
//! in the order the site got them. Floating-point sums depend on their
//! order, and the bench's figures since the first baseline were summed in
//! this one, bit for bit.
//!
//! The terms wait in memory, sorted and written to an unlinked scratch file
//! a million at a time, and are merged at the end: a policy that takes back
//! what has not started may waste tens of millions of attempts (35 million
//! at 10^6 jobs for `thesis`, BENCHMARKS.md "Memory at scale"), and the
//! job that comes first in the order may be the last to finish.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Terms held in memory before a sorted run of them goes to disk.
const IN_MEMORY: usize = 1 << 20;

/// Bytes read at once from each run while merging.
const READ_AHEAD: usize = 1 << 16;

/// One wasted attempt: where it comes in the order, and its end − submit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Term {
    /// (job, submission time as ordered bits, site and the site's number
    /// for the attempt).
    key: (u64, u64, u64),
    /// The term's bits (compared only after the key, which is unique).
    value: u64,
}

const TERM_BYTES: usize = 32;

impl Term {
    fn new(job: u64, submitted: f64, site: u32, number: u64, value: f64) -> Self {
        // f64::total_cmp's order, as unsigned integers.
        let bits = submitted.to_bits();
        let ordered = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
        // 24 bits of site and 40 of the site's attempt number.
        let place = (u64::from(site) << 40) | (number & ((1 << 40) - 1));
        Term { key: (job, ordered, place), value: value.to_bits() }
    }

    fn bytes(&self) -> [u8; TERM_BYTES] {
        let mut out = [0; TERM_BYTES];
        for (i, word) in [self.key.0, self.key.1, self.key.2, self.value].into_iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    fn from_bytes(b: &[u8]) -> Self {
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Term { key: (word(0), word(1), word(2)), value: word(3) }
    }
}

/// The wasted area of one run, term by term.
#[derive(Default)]
pub struct WasteSum {
    held: Vec<Term>,
    /// The scratch file and, per sorted run written to it, its offset and
    /// its number of terms.
    spilled: Option<(File, Vec<(u64, u64)>)>,
    /// Where the next run goes.
    end: u64,
    /// The first write error: the sum is then incomplete.
    error: Option<String>,
}

impl WasteSum {
    /// Adds the attempt numbered `number` by `site` of `job`, submitted at
    /// `submitted`, that wasted `value` seconds.
    pub fn add(&mut self, job: u64, submitted: f64, site: u32, number: u64, value: f64) {
        self.held.push(Term::new(job, submitted, site, number, value));
        if self.held.len() >= IN_MEMORY && self.error.is_none() {
            if let Err(e) = self.spill() {
                self.error = Some(format!(
                    "the wasted area could not be put aside in {}: {e} (free space there, or set TMPDIR)",
                    std::env::temp_dir().display()
                ));
            }
        }
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.spilled.is_none() {
            static FILES: AtomicU64 = AtomicU64::new(0);
            let name = format!(
                ".cosched-waste-{}-{}.tmp",
                std::process::id(),
                FILES.fetch_add(1, Ordering::Relaxed)
            );
            let path = std::env::temp_dir().join(name);
            let file = File::options().read(true).write(true).create_new(true).open(&path)?;
            // Unlinked at once: the file lives while it is open, also if
            // cosched dies.
            std::fs::remove_file(&path)?;
            self.spilled = Some((file, Vec::new()));
        }
        let Some((file, runs)) = self.spilled.as_mut() else { unreachable!("made above") };
        self.held.sort_unstable();
        let mut writer = BufWriter::with_capacity(READ_AHEAD, &*file);
        for term in &self.held {
            writer.write_all(&term.bytes())?;
        }
        writer.flush()?;
        drop(writer);
        runs.push((self.end, self.held.len() as u64));
        self.end += (self.held.len() * TERM_BYTES) as u64;
        self.held.clear();
        Ok(())
    }

    /// The sum in its order, or why it could not be had.
    pub fn total(mut self) -> Result<f64, String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.held.sort_unstable();
        let Some((file, runs)) = self.spilled.take() else {
            return Ok(self.held.iter().fold(0.0, |sum, t| sum + f64::from_bits(t.value)));
        };
        let read = |e: io::Error| format!("the wasted area put aside could not be read back: {e}");
        let mut readers: Vec<RunReader> =
            runs.iter().map(|&(offset, terms)| RunReader::new(offset, terms)).collect();
        let mut heap = BinaryHeap::new();
        for (i, reader) in readers.iter_mut().enumerate() {
            if let Some(term) = reader.next(&file).map_err(read)? {
                heap.push(Reverse((term, i)));
            }
        }
        let mut in_memory = self.held.iter().copied().peekable();
        let mut sum = 0.0;
        loop {
            let from_disk = heap.peek().map(|Reverse((t, _))| *t);
            let term = match (from_disk, in_memory.peek()) {
                (Some(d), Some(&m)) if m < d => in_memory.next(),
                (Some(_), _) => {
                    let Some(Reverse((term, i))) = heap.pop() else { unreachable!("peeked") };
                    if let Some(next) = readers[i].next(&file).map_err(read)? {
                        heap.push(Reverse((next, i)));
                    }
                    Some(term)
                }
                (None, _) => in_memory.next(),
            };
            let Some(term) = term else { break };
            sum += f64::from_bits(term.value);
        }
        Ok(sum)
    }
}

/// One sorted run in the scratch file, read a block at a time.
struct RunReader {
    offset: u64,
    left: u64,
    block: Vec<u8>,
    at: usize,
}

impl RunReader {
    fn new(offset: u64, terms: u64) -> Self {
        RunReader { offset, left: terms, block: Vec::new(), at: 0 }
    }

    fn next(&mut self, file: &File) -> io::Result<Option<Term>> {
        if self.at == self.block.len() {
            if self.left == 0 {
                return Ok(None);
            }
            let terms = self.left.min((READ_AHEAD / TERM_BYTES) as u64);
            self.block.resize(terms as usize * TERM_BYTES, 0);
            file.read_exact_at(&mut self.block, self.offset)?;
            self.offset += self.block.len() as u64;
            self.left -= terms;
            self.at = 0;
        }
        let term = Term::from_bytes(&self.block[self.at..self.at + TERM_BYTES]);
        self.at += TERM_BYTES;
        Ok(Some(term))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Terms whose sum depends on its order: small ones are lost beside
    /// large ones or not, depending on what they were added to.
    fn terms(n: u64) -> Vec<(u64, f64, u32, u64, f64)> {
        (0..n)
            .map(|i| {
                let last = n / 3;
                let job = (i * 7919) % (last + 1);
                // The last job's terms come last in the order and swallow
                // whatever small term is added to them.
                let value = if job == last { 1.0e16 } else { 1.0 + 0.1 * (i % 10) as f64 };
                (job, (i % 17) as f64 * 10.0, (i % 3) as u32, i, value)
            })
            .collect()
    }

    fn in_order(mut ts: Vec<(u64, f64, u32, u64, f64)>) -> f64 {
        ts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
        ts.iter().fold(0.0, |s, t| s + t.4)
    }

    #[test]
    fn the_sum_is_taken_in_job_then_submission_order_whatever_order_terms_come_in() {
        let ts = terms(1000);
        let mut sum = WasteSum::default();
        for &(job, submitted, site, number, value) in ts.iter().rev() {
            sum.add(job, submitted, site, number, value);
        }
        let arrival_order = ts.iter().rev().fold(0.0, |s, t| s + t.4);
        let expected = in_order(ts);
        assert_ne!(arrival_order.to_bits(), expected.to_bits(), "the terms must be order-sensitive");
        assert_eq!(sum.total().unwrap().to_bits(), expected.to_bits());
    }

    #[test]
    fn terms_put_aside_on_disk_sum_as_those_kept_in_memory() {
        let n = (IN_MEMORY * 2 + 12345) as u64;
        let ts = terms(n);
        let mut sum = WasteSum::default();
        for &(job, submitted, site, number, value) in &ts {
            sum.add(job, submitted, site, number, value);
        }
        assert_eq!(sum.spilled.as_ref().map(|s| s.1.len()), Some(2), "two runs went to disk");
        assert_eq!(sum.total().unwrap().to_bits(), in_order(ts).to_bits());
    }
}
