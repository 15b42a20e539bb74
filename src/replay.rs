//! `cosched replay` (being written).

pub fn command(_args: crate::cli::ReplayArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
