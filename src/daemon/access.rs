//! Whether the person who hands the daemon a run may read the files its
//! jobs take from the submit host.
//!
//! The daemon submits every run as its own account, so HTCondor reads a
//! description's executable and inputs with the daemon's rights, not the
//! caller's: a description naming another user's file, or the daemon's own
//! state database, would have it shipped with the job (a confused deputy).
//! So a submit is accepted only if the caller could read each such file
//! (every directory on its way searchable, the file readable, a directory's
//! whole tree readable) themselves.
//!
//! - Which files: those `cosched submit` checks before it submits
//!   ([`crate::submit_desc::description_problems`], its file checks): the
//!   executable where it is transferred, and `input` and
//!   `transfer_input_files` where files are transferred, relative names
//!   against `initialdir`, itself against the description's directory. Like
//!   those checks, it skips names with a macro (one job's file) and URLs; an
//!   absolute name is checked even where `initialdir` holds a macro.
//! - How: by the owner, group and mode bits of each file ([`allows`]), for
//!   the caller's uid, primary gid and supplementary groups
//!   ([`super::config::groups_of`]); root may read everything. POSIX ACLs
//!   are not read: a file that only an ACL lets the caller read is refused
//!   (make it readable by its mode bits), and one an ACL keeps from the
//!   caller but its mode bits grant is accepted.
//! - When: at the submit. HTCondor reads the files when each job starts, so
//!   a file or symbolic link the caller changes afterwards is not looked at
//!   again; this stops naming a file one cannot read, not a user who swaps
//!   one later (only submitting as the user, or spooling the inputs, would).
//! - Not covered: names with a macro (HTCondor expands them per job), a
//!   site's `[site.submit]` commands, and files the execute side reads
//!   (`should_transfer_files = NO`).

use crate::submit_desc::{Command, SubmitDescription};
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Who would read: a uid and every group it is in (primary and
/// supplementary).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reader {
    pub uid: u32,
    pub groups: Vec<u32>,
}

/// What `stat` says of a file, as far as reading it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

impl Stat {
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        Stat { uid: meta.uid(), gid: meta.gid(), mode: meta.mode() & 0o7777 }
    }
}

/// What a reader needs of a file on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// A directory passed through: `x`.
    Search,
    /// The file itself: `r`.
    Read,
    /// A directory shipped whole: `r` and `x`, to list it and read what is in it.
    List,
}

/// Whether `reader` gets `need` of a file whose `stat` this is, as the
/// kernel decides without ACLs: the owner's bits for its owner, else the
/// group's for a member of its group, else the others'. Root gets all.
pub fn allows(reader: &Reader, stat: &Stat, need: Need) -> bool {
    if reader.uid == 0 {
        return true;
    }
    let bits = if stat.uid == reader.uid {
        stat.mode >> 6
    } else if reader.groups.contains(&stat.gid) {
        stat.mode >> 3
    } else {
        stat.mode
    } & 0o7;
    let wanted = match need {
        Need::Search => 0o1,
        Need::Read => 0o4,
        Need::List => 0o5,
    };
    bits & wanted == wanted
}

/// What a reader may not pass on the way to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub path: PathBuf,
    pub need: Need,
    pub stat: Stat,
}

impl Denied {
    /// `cannot read `/x/f` (mode 0600, owner uid 0, group 0)`.
    pub fn describe(&self) -> String {
        let what = match self.need {
            Need::Search => "cannot search",
            Need::Read => "cannot read",
            Need::List => "cannot list and read",
        };
        format!(
            "{what} `{}` (mode {:04o}, owner uid {}, group {})",
            self.path.display(),
            self.stat.mode,
            self.stat.uid,
            self.stat.gid
        )
    }
}

/// The first thing `reader` may not pass on the way to `path` and, for a
/// directory, in its tree: each directory of its real path (symbolic
/// links resolved, as the daemon's account resolves them) from `/` down,
/// then the file. `Err` when the path cannot be looked at, with why.
pub fn first_denied(reader: &Reader, path: &Path) -> Result<Option<Denied>, String> {
    Walk { reader, seen: HashSet::new() }.path(path)
}

struct Walk<'a> {
    reader: &'a Reader,
    /// Directories already walked (device, inode): a symbolic link back up
    /// the tree is not followed round.
    seen: HashSet<(u64, u64)>,
}

impl Walk<'_> {
    fn path(&mut self, path: &Path) -> Result<Option<Denied>, String> {
        let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut above: Vec<&Path> = real.ancestors().skip(1).collect();
        above.reverse();
        for dir in above {
            let stat = Stat::of(&std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?);
            if !allows(self.reader, &stat, Need::Search) {
                return Ok(Some(Denied { path: dir.to_path_buf(), need: Need::Search, stat }));
            }
        }
        let meta = std::fs::metadata(&real).map_err(|e| format!("{}: {e}", real.display()))?;
        self.object(&real, &meta)
    }

    fn object(&mut self, path: &Path, meta: &std::fs::Metadata) -> Result<Option<Denied>, String> {
        let stat = Stat::of(meta);
        let need = if meta.is_dir() { Need::List } else { Need::Read };
        if !allows(self.reader, &stat, need) {
            return Ok(Some(Denied { path: path.to_path_buf(), need, stat }));
        }
        if !meta.is_dir() || !self.seen.insert((meta.dev(), meta.ino())) {
            return Ok(None);
        }
        let entries = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", path.display()))?;
            let inside = entry.path();
            let own = std::fs::symlink_metadata(&inside).map_err(|e| format!("{}: {e}", inside.display()))?;
            let found = if own.is_symlink() {
                // Its target may lie anywhere: its own way is checked. A
                // link to nothing ships nothing.
                match self.path(&inside) {
                    Err(_) if std::fs::metadata(&inside).is_err() => None,
                    other => other?,
                }
            } else {
                self.object(&inside, &own)?
            };
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

/// The files `desc`'s jobs take from the submit host, each with the
/// command that names it: the names `submit_desc`'s own file checks look
/// at (see the module doc; `a_description_names_the_files_submit_desc_checks`
/// holds the two to the same list).
pub fn submit_host_files(desc: &SubmitDescription) -> Vec<(&Command, PathBuf)> {
    let last = |key: &str| desc.commands.iter().rev().find(|c| c.normalized_key() == key);
    let mut files = Vec::new();
    if let (Some(exe), Some(c)) = (desc.local_executable(), last("executable")) {
        files.push((c, exe));
    }
    // Without file transfer the inputs are read on the execute side.
    if desc.get("should_transfer_files").is_some_and(|v| v.trim().eq_ignore_ascii_case("no")) {
        return files;
    }
    let dir = match desc.get("initialdir") {
        Some(dir) if dir.contains("$(") => None,
        Some(dir) => Some(desc.dir.join(dir)),
        None => Some(desc.dir.clone()),
    };
    for key in ["input", "transfer_input_files"] {
        let Some(c) = last(key) else { continue };
        for name in c.value.split(',').map(str::trim) {
            if name.is_empty() || name == "/dev/null" || name.contains("$(") || name.contains("://") {
                continue;
            }
            let name = Path::new(name.trim_end_matches('/'));
            match &dir {
                Some(dir) => files.push((c, dir.join(name))),
                None if name.is_absolute() => files.push((c, name.to_path_buf())),
                None => {}
            }
        }
    }
    files
}

/// Why `reader` (named `who`) may not have `desc`'s jobs take its files
/// from the submit host, one line each, as `cosched check` words problems;
/// empty when it may.
pub fn refusals(reader: &Reader, who: &str, desc: &SubmitDescription) -> Vec<String> {
    let mut refused = Vec::new();
    for (c, path) in submit_host_files(desc) {
        let why = match first_denied(reader, &path) {
            Ok(None) => continue,
            Ok(Some(denied)) => format!("{who} {}", denied.describe()),
            Err(e) => format!("cannot be checked for {who}: {e}"),
        };
        let problem = crate::config::Problem::error(
            &desc.path,
            Some((c.line, c.column)),
            format!("`{}` names `{}`: {why}", c.key, path.display()),
        )
        .with_hint(
            "the daemon's account reads the files your jobs take from the submit host, so it takes only \
             files you could read yourself: make it readable by you (and each directory on its way \
             searchable), or check the path",
        );
        refused.push(problem.to_string());
    }
    refused
}

/// `uid 1000 (alice)`, for messages.
pub fn who(uid: u32) -> String {
    match super::config::user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: u32 = 1000;
    const BOB: u32 = 1001;
    const STAFF: u32 = 50;

    fn alice() -> Reader {
        Reader { uid: ALICE, groups: vec![ALICE, STAFF] }
    }

    fn stat(uid: u32, gid: u32, mode: u32) -> Stat {
        Stat { uid, gid, mode }
    }

    #[test]
    fn the_owner_the_group_then_the_others_bits_decide() {
        let cases = [
            // (owner, group, mode, need, allowed, why)
            (ALICE, ALICE, 0o600, Need::Read, true, "her own file"),
            (ALICE, ALICE, 0o044, Need::Read, false, "the owner's bits, though group and others may"),
            (BOB, BOB, 0o600, Need::Read, false, "another user's private file"),
            (BOB, BOB, 0o604, Need::Read, true, "readable by others"),
            (BOB, STAFF, 0o640, Need::Read, true, "readable by a group she is in"),
            (BOB, STAFF, 0o604, Need::Read, false, "the group's bits for a member, though others may"),
            (BOB, 60, 0o640, Need::Read, false, "a group she is not in"),
            (BOB, BOB, 0o711, Need::Search, true, "a directory others may pass through"),
            (BOB, BOB, 0o744, Need::Search, false, "readable is not searchable"),
            (BOB, BOB, 0o701, Need::List, false, "searchable is not listable"),
            (BOB, BOB, 0o705, Need::List, true, "a directory others may list and enter"),
            (BOB, BOB, 0o4777 & !0o4, Need::Read, false, "setuid bits count for nothing"),
        ];
        for (owner, group, mode, need, allowed, why) in cases {
            assert_eq!(
                allows(&alice(), &stat(owner, group, mode), need),
                allowed,
                "{why}: {mode:o} {need:?}"
            );
        }
        let root = Reader { uid: 0, groups: vec![0] };
        assert!(allows(&root, &stat(BOB, BOB, 0o000), Need::List), "root reads everything");
        let nobody = Reader { uid: 65534, groups: Vec::new() };
        assert!(!allows(&nobody, &stat(0, 0, 0o600), Need::Read));
        assert!(allows(&nobody, &stat(0, 0, 0o644), Need::Read));
    }

    /// The files are checked where they are, through symbolic links, and a
    /// directory through its whole tree.
    #[test]
    fn the_way_to_a_file_and_a_directorys_tree_are_checked() {
        use std::os::unix::fs::PermissionsExt;
        let chmod =
            |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        chmod(top, 0o755);
        // Whoever runs the tests owns these: a reader of another uid in
        // none of its groups reads by the others' bits.
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        let other = Reader { uid: if me == 65534 { 65533 } else { 65534 }, groups: Vec::new() };
        let open = top.join("open.txt");
        std::fs::write(&open, "x").unwrap();
        chmod(&open, 0o644);
        assert_eq!(first_denied(&other, &open).unwrap(), None);

        let closed = top.join("closed");
        std::fs::create_dir(&closed).unwrap();
        std::fs::write(closed.join("f"), "x").unwrap();
        chmod(&closed.join("f"), 0o644);
        chmod(&closed, 0o700);
        let denied = first_denied(&other, &closed.join("f")).unwrap().expect("a closed directory on the way");
        assert_eq!((denied.path.as_path(), denied.need), (closed.as_path(), Need::Search));
        let link = top.join("link");
        std::os::unix::fs::symlink(closed.join("f"), &link).unwrap();
        let denied = first_denied(&other, &link).unwrap().expect("its target's way");
        assert_eq!(denied.path, closed);

        let tree = top.join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/secret"), "x").unwrap();
        chmod(&tree.join("sub/secret"), 0o600);
        assert_eq!(first_denied(&other, &tree).unwrap().map(|d| d.path), Some(tree.join("sub/secret")));
        chmod(&tree.join("sub/secret"), 0o644);
        std::os::unix::fs::symlink(&tree, tree.join("sub/loop")).unwrap();
        std::os::unix::fs::symlink(top.join("gone"), tree.join("dangling")).unwrap();
        assert_eq!(
            first_denied(&other, &tree).unwrap(),
            None,
            "a loop is walked once; a dangling link ships nothing"
        );
        std::os::unix::fs::symlink(&closed, tree.join("out")).unwrap();
        assert_eq!(
            first_denied(&other, &tree).unwrap().map(|d| d.path),
            Some(closed.clone()),
            "a link out of the tree"
        );
        assert!(first_denied(&other, &top.join("missing")).unwrap_err().contains("missing"));
    }

    /// The daemon's list of files is `submit_desc`'s: each file its checks
    /// find missing in an empty directory is one this list names, and no
    /// other.
    #[test]
    fn a_description_names_the_files_submit_desc_checks() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job.sub");
        let cases = [
            "executable = run.sh\ninput = in.txt\ntransfer_input_files = a.dat, data/, b.$(CoschedJob), https://x.org/c, /abs/d\nqueue\n",
            "executable = run.sh\ninitialdir = sub\ninput = in.txt\ntransfer_input_files = a.dat\nqueue\n",
            "executable = /opt/run\ntransfer_executable = false\ninput = in.txt\nshould_transfer_files = NO\nqueue\n",
            "executable = run.sh\ninput = /dev/null\nqueue\n",
        ];
        for text in cases {
            let desc = crate::submit_desc::parse(&job, text).unwrap();
            let listed: Vec<String> =
                submit_host_files(&desc).iter().map(|(_, p)| p.display().to_string()).collect();
            let checked: Vec<String> = crate::submit_desc::description_problems(&desc)
                .iter()
                .filter(|p| p.is_error())
                .filter_map(|p| {
                    p.message.split('`').nth(if p.message.starts_with('`') { 3 } else { 1 }).map(String::from)
                })
                .collect();
            assert_eq!(listed, checked, "{text}");
        }
    }
}
