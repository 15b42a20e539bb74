//! The state database as [`CondorSite`](crate::condor::CondorSite)'s
//! [`SubmitJournal`]: a batch's intent is committed before `condor_submit`
//! runs and its outcome after it answers (why that makes resume safe is in
//! [`crate::run::drive`]). It sits beside the database, so that a
//! submission's way down (policy → site task → journal → `condor_submit`)
//! never climbs back up into a command.

use super::{Db, StateError};
use crate::condor::SubmitJournal;
use crate::policy::{JobId, SiteId};
use crate::sync::Locked;
use crate::Exit;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One run's journal in the state database, shared by its sites. A write
/// that fails stops cosched at once: submitting without the record would
/// break resume, and stopping here is just one more crash that resume
/// handles.
pub struct DbJournal {
    db: Arc<Mutex<Db>>,
    run: String,
    site_names: Arc<Vec<String>>,
}

impl DbJournal {
    /// The journal of run `run`, whose sites are `site_names` in site order.
    pub fn new(db: Arc<Mutex<Db>>, run: String, site_names: Arc<Vec<String>>) -> DbJournal {
        DbJournal { db, run, site_names }
    }

    fn fatal(&self, what: &str, e: StateError) -> ! {
        eprintln!(
            "cosched: cannot record {what} in the state database: {e}\n\
             Stopping before anything unrecorded happens; fix the cause and run `cosched submit --resume`."
        );
        std::process::exit(Exit::Partial as i32)
    }

    fn name(&self, site: SiteId) -> &str {
        self.site_names.get(site.index()).map_or("?", String::as_str)
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Db> {
        self.db.locked()
    }
}

impl SubmitJournal for DbJournal {
    fn intent(&mut self, site: SiteId, batch: &str, jobs: &[JobId], submit_file: &Path) {
        let r = self.db().record_intent(&self.run, self.name(site), site.0, batch, jobs, submit_file);
        if let Err(e) = r {
            self.fatal("a submission", e);
        }
    }
    fn submitted(&mut self, batch: &str, cluster: i64) {
        let r = self.db().record_submitted(&self.run, batch, cluster);
        if let Err(e) = r {
            self.fatal("a submitted cluster", e);
        }
    }
    fn failed(&mut self, batch: &str, error: &str) {
        let r = self.db().record_failed(&self.run, batch, error);
        if let Err(e) = r {
            self.fatal("a failed submission", e);
        }
    }
    fn log_offset(&mut self, site: SiteId, offset: u64) {
        let r = self.db().set_log_offset(&self.run, self.name(site), offset);
        if let Err(e) = r {
            tracing::warn!("cannot checkpoint the user log offset: {e}");
        }
    }
}
