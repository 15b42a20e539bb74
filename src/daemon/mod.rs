//! `cosched daemon` (being written).

pub mod client;
pub fn command(_args: crate::cli::DaemonArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
