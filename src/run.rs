//! `cosched submit` and `cosched check` (being written).

pub fn command(_args: crate::cli::SubmitArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
pub fn check_command(_args: crate::cli::CheckArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
