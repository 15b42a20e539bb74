//! A report's job records on disk, so that a report of 10^6 jobs does not
//! hold 10^6 records (some 300 bytes each with their runs) in memory: each
//! log's records are appended as the log is read, and every figure is then
//! computed in passes over the file ([`Jobs`]). What stays in memory is one
//! log's records while it is read, the values of one figure at a time (its
//! quantiles need them all, sorted) and one occupancy's changes (see
//! BENCHMARKS.md, "Memory at scale").
//!
//! The file is a scratch file in the report's directory, removed as soon as
//! it is open (on Unix it lives until it is closed, also if cosched dies).
//! A record is its site's number, its length and the record in postcard;
//! the site names are kept here, each once.

use super::model::{JobRecord, Jobs, Part};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// Job records written to a scratch file, visited from it.
#[derive(Debug)]
pub struct Spill {
    file: File,
    /// Buffers the records until [`Spill::finish`].
    writer: Option<BufWriter<File>>,
    /// Where the file ends (the next record's offset).
    end: u64,
    /// Site names by number, each held once.
    sites: Vec<Arc<str>>,
    numbers: HashMap<Arc<str>, u32>,
    /// Consecutive records of one site and log: what visiting a site or a
    /// log reads (one run per log and site, unless a log's sites alternate).
    runs: Vec<Run>,
    /// The first read error of a visit; the visit stops there.
    error: RefCell<Option<io::Error>>,
    /// Reused for each record's bytes.
    scratch: Vec<u8>,
}

#[derive(Debug, Clone, Copy)]
struct Run {
    site: u32,
    log: usize,
    offset: u64,
    records: u64,
}

impl Spill {
    /// A scratch file in `dir` (which must exist).
    pub fn create(dir: &Path) -> io::Result<Spill> {
        let path = dir.join(".cosched-report-jobs.tmp");
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(Spill {
            writer: Some(BufWriter::with_capacity(1 << 16, file.try_clone()?)),
            file,
            end: 0,
            sites: Vec::new(),
            numbers: HashMap::new(),
            runs: Vec::new(),
            error: RefCell::new(None),
            scratch: Vec::new(),
        })
    }

    /// Appends `job` (before [`Spill::finish`]).
    pub fn push(&mut self, job: &JobRecord) -> io::Result<()> {
        let site = match self.numbers.get(&job.site) {
            Some(&n) => n,
            None => {
                let n = u32::try_from(self.sites.len()).map_err(io::Error::other)?;
                self.sites.push(job.site.clone());
                self.numbers.insert(job.site.clone(), n);
                n
            }
        };
        self.scratch.clear();
        self.scratch =
            postcard::to_extend(job, std::mem::take(&mut self.scratch)).map_err(io::Error::other)?;
        let len = u32::try_from(self.scratch.len()).map_err(io::Error::other)?;
        let writer = self.writer.as_mut().ok_or_else(|| io::Error::other("the spill was finished"))?;
        writer.write_all(&site.to_le_bytes())?;
        writer.write_all(&len.to_le_bytes())?;
        writer.write_all(&self.scratch)?;
        match self.runs.last_mut() {
            Some(run) if run.site == site && run.log == job.file => run.records += 1,
            _ => self.runs.push(Run { site, log: job.file, offset: self.end, records: 1 }),
        }
        self.end += 8 + u64::from(len);
        Ok(())
    }

    /// Writes out what is buffered; the records can be visited from now on.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(writer) = self.writer.take() {
            writer.into_inner().map_err(|e| e.into_error())?;
        }
        self.runs.shrink_to_fit();
        Ok(())
    }

    /// The first error a visit met (its pass stopped there, so figures
    /// computed since are incomplete).
    pub fn take_error(&self) -> Option<io::Error> {
        self.error.borrow_mut().take()
    }

    /// Reads `records` records from `offset` into `f`.
    fn read(&self, offset: u64, records: u64, f: &mut dyn FnMut(&JobRecord)) -> io::Result<()> {
        let mut reader = BufReader::with_capacity(1 << 16, At { file: &self.file, offset });
        let mut bytes = Vec::new();
        for _ in 0..records {
            let mut head = [0u8; 8];
            reader.read_exact(&mut head)?;
            let [s0, s1, s2, s3, l0, l1, l2, l3] = head;
            let site = u32::from_le_bytes([s0, s1, s2, s3]) as usize;
            bytes.resize(u32::from_le_bytes([l0, l1, l2, l3]) as usize, 0);
            reader.read_exact(&mut bytes)?;
            let mut job: JobRecord = postcard::from_bytes(&bytes).map_err(io::Error::other)?;
            job.site =
                self.sites.get(site).cloned().ok_or_else(|| io::Error::other("unknown site number"))?;
            f(&job);
        }
        Ok(())
    }
}

impl Jobs for Spill {
    fn visit(&self, part: Part<'_>, f: &mut dyn FnMut(&JobRecord)) {
        if self.error.borrow().is_some() {
            return;
        }
        let result = match part {
            Part::All => {
                let records = self.runs.iter().map(|r| r.records).sum();
                self.read(0, records, f)
            }
            Part::Site(name) => match self.numbers.get(name) {
                Some(&site) => self
                    .runs
                    .iter()
                    .filter(|r| r.site == site)
                    .try_for_each(|r| self.read(r.offset, r.records, f)),
                None => Ok(()),
            },
            Part::Log(log) => {
                self.runs.iter().filter(|r| r.log == log).try_for_each(|r| self.read(r.offset, r.records, f))
            }
        };
        if let Err(e) = result {
            *self.error.borrow_mut() = Some(e);
        }
    }
}

/// Reads a file from an offset of its own, so that visits need no `&mut`.
struct At<'a> {
    file: &'a File,
    offset: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{jobs_from_events, LogEvent};

    #[test]
    fn a_spill_gives_back_each_part_in_order() {
        // Log 0 holds jobs at two grid sites, alternating; log 1 a vanilla job.
        let grid = |proc: i64, site: &str| {
            let mut e = LogEvent::new(27, 1, proc, 1.0 + proc as f64);
            e.grid_resource = Some(site.into());
            vec![LogEvent::new(0, 1, proc, proc as f64), e]
        };
        let a: Vec<LogEvent> =
            (0..5).flat_map(|p| grid(p, if p % 2 == 0 { "ce a" } else { "ce b" })).collect();
        let jobs =
            jobs_from_events(&[("a.log".into(), a), ("b.log".into(), vec![LogEvent::new(0, 2, 0, 9.0)])]);
        let dir = std::env::temp_dir().join(format!("cosched-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut spill = Spill::create(&dir).unwrap();
        for j in &jobs {
            spill.push(j).unwrap();
        }
        spill.finish().unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the scratch file is unlinked");
        for part in [
            Part::All,
            Part::Site("ce a"),
            Part::Site("ce b"),
            Part::Site("b.log"),
            Part::Log(0),
            Part::Log(1),
        ] {
            let mut back = Vec::new();
            spill.visit(part, &mut |j| back.push(j.clone()));
            let mut want = Vec::new();
            jobs.visit(part, &mut |j| want.push(j.clone()));
            assert!(!want.is_empty(), "{part:?}");
            assert_eq!(back, want, "{part:?}");
        }
        assert!(spill.take_error().is_none());
        std::fs::remove_dir(&dir).unwrap();
    }
}
