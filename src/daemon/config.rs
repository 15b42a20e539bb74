//! The daemon's own configuration file (`condor/daemon.example.toml` documents
//! every key). Read at start and again on SIGHUP; a file that does not parse
//! on reload is reported and the running configuration is kept.
//!
//! Relative paths resolve against the config file's directory, so a unit file
//! can point at `/etc/cosched/daemon.toml` and the file at `sites.toml`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The checked configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    /// Where it was read from.
    pub path: PathBuf,
    /// The Unix socket clients connect to.
    pub socket: PathBuf,
    /// Permission bits of the socket (default 0o660: owner and group).
    pub socket_mode: u32,
    /// Group given to the socket so that its members may connect.
    pub socket_group: Option<u32>,
    /// Holds the state database and each run's files.
    pub state_dir: PathBuf,
    /// Where the HTCondor tools this daemon runs are (`condor_submit`,
    /// `condor_q`, `condor_rm`, `condor_config_val`); `None`: its own
    /// `PATH`. The only place they come from: a run's sites file may not
    /// name another (see the daemon's invariants).
    pub condor_bin_dir: Option<PathBuf>,
    /// Sites files naming the sites this daemon shares between users: their
    /// `max_jobs` (else `slots`) is the capacity split by the fair share.
    pub sites: Vec<PathBuf>,
    /// Members of these groups (or the daemon's own account, or root) see and
    /// cancel every run.
    pub admin_gids: Vec<u32>,
    /// Fair-share weight per uid; users not listed get `default_weight`.
    pub weights: BTreeMap<u32, f64>,
    pub default_weight: f64,
    /// Capacity per site name for the fair share, overriding the sites files.
    pub capacity: BTreeMap<String, u64>,
    /// Refuse new runs while this many are unfinished.
    pub max_runs: usize,
    /// Run every job on the in-process simulated grid made of the one
    /// sites file in `sites` (demo, tests, soak benchmark; `memsim`).
    pub simulate: bool,
    /// With `simulate`: simulated seconds per real second.
    pub speedup: f64,
    /// The shortest interval between two checkpoints of a run (real
    /// seconds; 0: no floor). A run's `[run] checkpoint_every` comes from
    /// its client, and each checkpoint is a file written and synced in the
    /// shared state directory: a smaller one is raised to this
    /// ([`super::dbrun::checkpoint_every`]).
    pub min_checkpoint_every: f64,
    /// TESTS ONLY: honour the `as_uid` field of requests instead of the
    /// kernel's peer credentials. Anyone who can reach the socket can then act
    /// as anyone: never set this on a shared host.
    pub trust_client_uid: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    socket: PathBuf,
    #[serde(default)]
    socket_mode: Option<String>,
    #[serde(default)]
    socket_group: Option<String>,
    state_dir: PathBuf,
    #[serde(default)]
    condor_bin_dir: Option<PathBuf>,
    #[serde(default)]
    sites: Vec<PathBuf>,
    #[serde(default)]
    admin_groups: Vec<String>,
    #[serde(default)]
    admin_gids: Vec<u32>,
    #[serde(default)]
    weights: BTreeMap<String, f64>,
    #[serde(default)]
    default_weight: Option<f64>,
    #[serde(default)]
    capacity: BTreeMap<String, u64>,
    #[serde(default)]
    max_runs: Option<usize>,
    #[serde(default)]
    simulate: bool,
    #[serde(default)]
    speedup: Option<f64>,
    #[serde(default)]
    min_checkpoint_every: Option<f64>,
    #[serde(default)]
    trust_client_uid: bool,
}

/// `min_checkpoint_every` when the file does not set it: a run's state is
/// written at most every 10 s. A resume then replays at most the last 10 s
/// of a run, while a client that asks for a checkpoint every millisecond
/// costs the shared disk one synced write per 10 s, not a thousand a second.
pub const DEFAULT_MIN_CHECKPOINT_EVERY: f64 = 10.0;

/// Reads and checks the file; every problem found is in the message.
pub fn load(path: &Path) -> Result<DaemonConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read the daemon config: {e}", path.display()))?;
    parse(path, &text)
}

pub fn parse(path: &Path, text: &str) -> Result<DaemonConfig, String> {
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        format!("{}{at}: {}", path.display(), e.message())
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    let mut resolve = |p: &Path| {
        let p = match expand_env(&p.to_string_lossy()) {
            Ok(s) => PathBuf::from(s),
            Err(e) => {
                problems.push(e);
                p.to_path_buf()
            }
        };
        if p.is_absolute() {
            p
        } else {
            base.join(p)
        }
    };
    let socket = resolve(&raw.socket);
    let state_dir = resolve(&raw.state_dir);
    let condor_bin_dir = raw.condor_bin_dir.as_deref().map(&mut resolve);
    let sites: Vec<PathBuf> = raw.sites.iter().map(|p| resolve(p)).collect();
    let socket_mode = match raw.socket_mode.as_deref() {
        None => 0o660,
        Some(s) => match u32::from_str_radix(s.trim_start_matches("0o"), 8) {
            Ok(m) if m <= 0o777 => m,
            _ => {
                problems.push(format!("socket_mode = {s:?} is not an octal mode like \"0660\""));
                0o660
            }
        },
    };
    let socket_group = raw.socket_group.as_deref().and_then(|g| match group_id(g) {
        Some(gid) => Some(gid),
        None => {
            problems.push(format!("socket_group = {g:?}: no such group on this host"));
            None
        }
    });
    let mut admin_gids = raw.admin_gids.clone();
    for g in &raw.admin_groups {
        match group_id(g) {
            Some(gid) => admin_gids.push(gid),
            // Fewer admins is the safe side of a typo: say so, go on.
            None => tracing::warn!("{}: admin_groups: no group {g:?} on this host; ignored", path.display()),
        }
    }
    let mut weights = BTreeMap::new();
    for (user, &w) in &raw.weights {
        if !(w.is_finite() && w > 0.0) {
            problems.push(format!("weights.{user} = {w}: a weight must be a positive number"));
            continue;
        }
        match user.parse::<u32>().ok().or_else(|| user_id(user)) {
            Some(uid) => {
                weights.insert(uid, w);
            }
            None => problems.push(format!("weights.{user}: no such user on this host (use a uid)")),
        }
    }
    let default_weight = raw.default_weight.unwrap_or(1.0);
    if !(default_weight.is_finite() && default_weight > 0.0) {
        problems.push(format!("default_weight = {default_weight}: must be a positive number"));
    }
    let speedup = raw.speedup.unwrap_or(100.0);
    if !(speedup.is_finite() && speedup > 0.0) {
        problems.push(format!("speedup = {speedup}: must be a positive number"));
    }
    let min_checkpoint_every = raw.min_checkpoint_every.unwrap_or(DEFAULT_MIN_CHECKPOINT_EVERY);
    if !(min_checkpoint_every.is_finite() && min_checkpoint_every >= 0.0) {
        problems.push(format!(
            "min_checkpoint_every = {min_checkpoint_every}: must be a number of seconds, 0 or more (0: no floor)"
        ));
    }
    if !problems.is_empty() {
        return Err(format!("{}: {}", path.display(), problems.join("; ")));
    }
    Ok(DaemonConfig {
        path: path.to_path_buf(),
        socket,
        socket_mode,
        socket_group,
        state_dir,
        condor_bin_dir,
        sites,
        admin_gids,
        weights,
        default_weight,
        capacity: raw.capacity,
        max_runs: raw.max_runs.unwrap_or(1000),
        simulate: raw.simulate,
        speedup,
        min_checkpoint_every,
        trust_client_uid: raw.trust_client_uid,
    })
}

impl DaemonConfig {
    pub fn weight(&self, uid: u32) -> f64 {
        self.weights.get(&uid).copied().unwrap_or(self.default_weight)
    }
}

/// Replaces every `${NAME}` by the environment variable NAME.
pub fn expand_env(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("{s:?}: `${{` without a closing `}}`"))?;
        let name = &after[..end];
        let value =
            std::env::var(name).map_err(|_| format!("{s:?}: environment variable {name} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The gid of a group name (or a number given as text).
pub fn group_id(name: &str) -> Option<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Some(gid);
    }
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer refers to memory we own for the duration of the call.
    let rc = unsafe { libc::getgrnam_r(cname.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(grp.gr_gid)
}

/// The uid of a user name.
pub fn user_id(name: &str) -> Option<u32> {
    passwd_by_name(name).map(|(uid, _)| uid)
}

fn passwd_by_name(name: &str) -> Option<(u32, u32)> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some((pw.pw_uid, pw.pw_gid))
}

/// The name of a uid, if the host knows it.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated by getpwuid_r.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// Every group of a user: its primary gid and its supplementary groups.
pub fn groups_of(uid: u32, primary_gid: u32) -> Vec<u32> {
    let Some(name) = user_name(uid) else { return vec![primary_gid] };
    let Ok(cname) = std::ffi::CString::new(name) else { return vec![primary_gid] };
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let asked = n;
        // SAFETY: `groups` has room for `n` entries; getgrouplist updates `n`.
        let rc = unsafe { libc::getgrouplist(cname.as_ptr(), primary_gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            return groups;
        }
        if n <= asked {
            n = asked * 2;
        }
        if n > 65536 {
            return vec![primary_gid];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_full_config_resolving_relative_paths() {
        let text = r#"
socket = "cosched.sock"
socket_mode = "0600"
state_dir = "/var/lib/cosched"
condor_bin_dir = "condor/bin"
sites = ["sites.toml"]
admin_gids = [4242]
default_weight = 1.5
max_runs = 10
[weights]
"1001" = 3
root = 2
[capacity]
"site-a" = 40
"#;
        let c = parse(Path::new("/etc/cosched/daemon.toml"), text).unwrap();
        assert_eq!(c.socket, Path::new("/etc/cosched/cosched.sock"));
        assert_eq!(c.socket_mode, 0o600);
        assert_eq!(c.state_dir, Path::new("/var/lib/cosched"));
        assert_eq!(c.sites, vec![PathBuf::from("/etc/cosched/sites.toml")]);
        assert_eq!(c.condor_bin_dir.as_deref(), Some(Path::new("/etc/cosched/condor/bin")));
        assert_eq!(c.admin_gids, vec![4242]);
        assert_eq!(c.weight(1001), 3.0);
        assert_eq!(c.weight(0), 2.0, "root resolves to uid 0");
        assert_eq!(c.weight(5), 1.5);
        assert_eq!(c.capacity.get("site-a"), Some(&40));
        assert!(!c.trust_client_uid);
        assert_eq!(c.min_checkpoint_every, DEFAULT_MIN_CHECKPOINT_EVERY, "the floor unless set");
    }

    #[test]
    fn the_checkpoint_floor_is_a_number_of_seconds_zero_or_more() {
        let with = |value: &str| {
            let text = format!("socket = \"s\"\nstate_dir = \"d\"\nmin_checkpoint_every = {value}\n");
            parse(Path::new("d.toml"), &text)
        };
        assert_eq!(with("0.5").unwrap().min_checkpoint_every, 0.5);
        assert_eq!(with("0").unwrap().min_checkpoint_every, 0.0, "0: no floor");
        for bad in ["-1", "nan", "inf"] {
            let e = with(bad).unwrap_err();
            assert!(e.starts_with("d.toml: min_checkpoint_every = "), "{bad}: {e}");
        }
    }

    #[test]
    fn reports_every_problem_with_the_file_name() {
        let text = "socket = \"s\"\nstate_dir = \"d\"\nsocket_mode = \"9x\"\n[weights]\n\"7\" = -1\n";
        let e = parse(Path::new("d.toml"), text).unwrap_err();
        assert!(e.starts_with("d.toml: "), "{e}");
        assert!(e.contains("socket_mode") && e.contains("weights.7"), "{e}");
        let e = parse(Path::new("d.toml"), "socket = \"s\"\nstate_dir = \"d\"\nbogus = 1\n").unwrap_err();
        assert!(e.starts_with("d.toml:3:1: ") && e.contains("bogus"), "{e}");
        let e = parse(Path::new("d.toml"), "state_dir = \"d\"\n").unwrap_err();
        assert!(e.contains("socket"), "{e}");
    }

    #[test]
    fn expands_environment_variables_in_paths() {
        let home = std::env::var("HOME").unwrap_or_default();
        assert_eq!(expand_env("${HOME}/x").unwrap(), format!("{home}/x"));
        assert_eq!(expand_env("plain").unwrap(), "plain");
        assert!(expand_env("${COSCHED_SURELY_UNSET_VARIABLE}/x").unwrap_err().contains("not set"));
        assert!(expand_env("${HOME").is_err());
    }

    #[test]
    fn the_shipped_example_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("condor/daemon.example.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        // The example's socket group need not exist on a build host.
        let text = text.replace("socket_group = \"cosched-users\"", "");
        let c = parse(&path, &text).unwrap();
        assert_eq!(c.socket, Path::new("/run/cosched/cosched.sock"));
        assert_eq!(c.state_dir, Path::new("/var/lib/cosched"));
        assert_eq!(c.socket_mode, 0o660);
        assert!(!c.trust_client_uid && !c.simulate);
        assert_eq!(c.min_checkpoint_every, DEFAULT_MIN_CHECKPOINT_EVERY, "the example shows the default");
    }

    #[test]
    fn looks_up_root() {
        assert_eq!(user_id("root"), Some(0));
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert!(groups_of(0, 0).contains(&0));
        assert_eq!(group_id("0"), Some(0));
    }
}
