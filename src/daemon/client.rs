//! Daemon clients (being written).

use crate::cli::{ClientArgs, RunRefArgs, StatusArgs};
pub fn runs(_a: ClientArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
pub fn status(_a: StatusArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
pub fn cancel(_a: RunRefArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
pub fn watch(_a: RunRefArgs) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
