//! `cosched bench` (being written).

pub fn command(_args: crate::cli::BenchArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
