//! A fake HTCondor (being written).

/// Runs the fake command named `argv0` (`condor_submit`, `condor_rm`, `condor_q`),
/// if it is one; `None` when `argv0` is not a fake command's name.
pub fn main_as(_argv0: &str) -> Option<std::process::ExitCode> {
    None
}
