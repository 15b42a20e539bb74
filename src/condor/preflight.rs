//! HTCondor's own check of a run's submit files, before any is submitted.
//!
//! `submit_desc` reads the submit language only as far as cosched needs;
//! `condor_submit` refuses more: an unterminated quote in `arguments`, an
//! expression that does not parse, an unknown universe, a malformed
//! `environment`, a script with DOS line ends (HTCondor 25.0: each exit 1,
//! "ERROR: …"). Refused at its first batch, a run would already have
//! batches queued at other sites. So before a run submits anything, and in
//! `cosched check`, one batch of one job per kind and per shape of site
//! goes through `condor_submit -dry-run`, which queues nothing. A shape is
//! what the batch file takes from the site: a local pool or a grid type,
//! and the site's `[site.submit]` commands; sites alike in both write the
//! same file but for names, so one of them stands for all.
//!
//! A permanent refusal is an error naming the kind and the site. A
//! transient one (schedd unreachable, a timeout) is only a warning that the
//! check could not be made: the run's own submissions retry those.

use super::{Condor, CondorError, ErrorKind};
use crate::config::{Problem, SiteConfig, SitesFile};
use crate::policy::JobId;
use crate::submit_desc::JobKinds;
use std::path::{Path, PathBuf};

/// What the dry runs found: how many submit files HTCondor read, and what
/// it refused or could not read.
pub struct Preflight {
    pub checked: usize,
    pub problems: Vec<Problem>,
}

/// Dry-runs one batch per kind and per shape of site (the module doc).
/// `Err` when `condor_submit` cannot be run at all (not installed, not on
/// `PATH` nor in `[condor] bin_dir`), with the reason.
pub fn preflight(condor: &Condor, sites: &SitesFile, kinds: &JobKinds) -> Result<Preflight, String> {
    let dir = scratch_dir(&std::env::temp_dir())?;
    let outcome = dry_run_all(condor, sites, kinds, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

fn dry_run_all(
    condor: &Condor,
    sites: &SitesFile,
    kinds: &JobKinds,
    dir: &Path,
) -> Result<Preflight, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let mut found = Preflight { checked: 0, problems: Vec::new() };
    for site in shapes(sites) {
        for kind in kinds.types().ids() {
            let name = kinds.types().name(kind);
            let desc = kinds.desc(kind);
            let file = dir.join(format!("{}-{}.sub", found.checked, crate::submit_desc::plain_id(name)));
            let text = desc.render_batch(
                site,
                "preflight",
                "preflight",
                name,
                &[JobId(0)],
                &dir.join("preflight.log"),
            );
            std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
            let result = runtime.block_on(condor.dry_run(&file, &dir.join("ads")));
            found.checked += 1;
            match result {
                Ok(()) => {}
                Err(e) if e.status.is_none() && e.kind == ErrorKind::Permanent => return Err(e.stderr),
                Err(e) => found.problems.push(refusal(&desc.path, site, name, kinds.types().len() > 1, &e)),
            }
        }
    }
    Ok(found)
}

fn refusal(desc: &Path, site: &SiteConfig, kind: &str, several_kinds: bool, e: &CondorError) -> Problem {
    let what = if several_kinds {
        format!("kind `{kind}` at site `{}`", site.name)
    } else {
        format!("site `{}`", site.name)
    };
    // HTCondor prints its progress and the error on one line ("Dry-Run
    // job(s)ERROR: …"): the error is what follows.
    let said = e.stderr.find("ERROR").map_or(e.stderr.as_str(), |at| &e.stderr[at..]);
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    match e.kind {
        ErrorKind::Permanent => Problem::error(
            desc,
            None,
            format!("condor_submit refuses the submit file cosched writes for {what}: {said}"),
        )
        .with_hint("fix the description (or the site's [site.submit] commands); nothing was submitted"),
        ErrorKind::Transient => Problem::warning(
            desc,
            None,
            format!("condor_submit could not check the submit file for {what} (the run's submissions retry this): {said}"),
        ),
    }
}

/// One site per shape, in the sites file's order.
fn shapes(sites: &SitesFile) -> Vec<&SiteConfig> {
    let shape =
        |s: &SiteConfig| (s.grid_resource.as_ref().map(|g| g.kind.clone()), s.submit_commands.clone());
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for site in &sites.sites {
        let key = shape(site);
        if !seen.contains(&key) {
            seen.push(key);
            out.push(site);
        }
    }
    out
}

/// A fresh directory in `base` that only we can use. Its name is random, so
/// that no other local user can make it first (a predictable name in /tmp
/// let anyone block every dry run, hence every submit); `create_dir` fails
/// on anything already there (a directory or link planted by someone else
/// is never used), and the mode keeps others out.
fn scratch_dir(base: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    // Sixteen random bytes collide with nothing; a few attempts only guard
    // against a broken random source.
    const ATTEMPTS: usize = 8;
    let failed = |e: &dyn std::fmt::Display| {
        format!(
            "cannot make a scratch directory for the dry run in {}: {e}; check that it exists and is \
             writable (or set TMPDIR to a directory that is)",
            base.display()
        )
    };
    for _ in 0..ATTEMPTS {
        let dir = base.join(format!("cosched-preflight-{}", random_hex().map_err(|e| failed(&e))?));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            made => return made.map(|()| dir).map_err(|e| failed(&e)),
        }
    }
    Err(failed(&format!("{ATTEMPTS} random names were all taken")))
}

/// 16 bytes from the kernel's random source, in hex.
fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into `bytes`,
    // which we own.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{args, script};
    use super::*;
    use crate::config::CondorSettings;

    fn inputs(dir: &Path) -> (Condor, SitesFile, JobKinds) {
        let sites = "[[site]]\nname = \"pool\"\n\n\
                     [[site]]\nname = \"ce1\"\ngrid_resource = \"condor ce1.example.org ce1.example.org:9619\"\n\n\
                     [[site]]\nname = \"ce2\"\ngrid_resource = \"condor ce2.example.org ce2.example.org:9619\"\n\n\
                     [[site]]\nname = \"big\"\ngrid_resource = \"condor ce3.example.org ce3.example.org:9619\"\n\
                     [site.submit]\nrequest_memory = \"4096\"\n";
        let (sites, _) = crate::config::parse(&dir.join("sites.toml"), sites).unwrap();
        let desc = |exe: &str| {
            crate::submit_desc::parse(
                &dir.join(format!("{exe}.sub")),
                &format!("executable = {exe}\nqueue\n"),
            )
            .unwrap()
        };
        let kinds =
            JobKinds::new(vec![("io".into(), 3, desc("io.sh")), ("cpu".into(), 5, desc("cpu.sh"))]).unwrap();
        let condor = Condor::new(&CondorSettings { bin_dir: Some(dir.to_path_buf()), ..Default::default() });
        (condor, sites, kinds)
    }

    #[test]
    fn one_batch_per_kind_and_shape_of_site_is_read_and_a_refusal_names_both() {
        let dir = tempfile::tempdir().unwrap();
        // Refuses the batches of grid sites with no [site.submit] commands.
        script(
            dir.path(),
            "condor_submit",
            "f=\"$3\"\nif grep -q '^universe = grid' \"$f\" && ! grep -q '^request_memory' \"$f\"; then\n\
             echo 'Dry-Run job(s)ERROR: Parse error in expression:' >&2; exit 1; fi\nexit 0",
        );
        let (condor, sites, kinds) = inputs(dir.path());
        let found = preflight(&condor, &sites, &kinds).expect("condor_submit runs");
        assert_eq!(found.checked, 6, "3 shapes (pool; grid; grid with its own commands) × 2 kinds");
        let said: Vec<String> = found.problems.iter().map(|p| p.message.clone()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].contains("kind `io` at site `ce1`")
                && said[0].ends_with("ERROR: Parse error in expression:")
        );
        assert!(said[1].contains("kind `cpu` at site `ce1`"), "{said:?}");
        assert!(found.problems.iter().all(Problem::is_error));
        assert_eq!(args(dir.path(), "condor_submit").iter().filter(|a| *a == "-dry-run").count(), 6);
    }

    /// B3 of the daemon's exploratory test: the names the scratch directory
    /// used to take (`cosched-preflight-PID-0` to `-100`), made beforehand by
    /// another user, stopped every dry run with "File exists".
    #[test]
    fn the_scratch_directory_cannot_be_taken_beforehand() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        for attempt in 0..=100 {
            std::fs::create_dir(
                base.path().join(format!("cosched-preflight-{}-{attempt}", std::process::id())),
            )
            .unwrap();
        }
        let dir = scratch_dir(base.path()).expect("a scratch directory despite the planted ones");
        let again = scratch_dir(base.path()).unwrap();
        assert_ne!(dir, again);
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "only the daemon's account may use it");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a fresh directory");

        let nowhere = base.path().join("missing");
        let why = scratch_dir(&nowhere).unwrap_err();
        assert!(why.contains(&nowhere.display().to_string()) && why.contains("No such file"), "{why}");
    }

    #[test]
    fn a_schedd_out_of_reach_only_warns_and_no_condor_submit_at_all_is_said() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "condor_submit", "echo \"ERROR: Can't find address of local schedd\" >&2; exit 1");
        let (condor, sites, kinds) = inputs(dir.path());
        let found = preflight(&condor, &sites, &kinds).expect("condor_submit runs");
        assert_eq!(found.problems.len(), 6);
        assert!(
            found.problems.iter().all(|p| !p.is_error()),
            "the run's submissions retry a transient failure"
        );
        let (_, sites, kinds) = inputs(dir.path());
        let nowhere =
            Condor::new(&CondorSettings { bin_dir: Some(dir.path().join("none")), ..Default::default() });
        let why = preflight(&nowhere, &sites, &kinds).err().expect("nothing to run");
        assert!(why.contains("not found") && why.contains("bin_dir"), "{why}");
    }
}
