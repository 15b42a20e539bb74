//! `cosched log dump|stats|follow` (being written).

use std::path::{Path, PathBuf};
pub fn dump(_file: &Path) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
pub fn stats(_files: &[PathBuf], _json: bool) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
pub fn follow(_file: &Path) -> crate::CmdResult {
    Err(crate::Failure::failed("not implemented yet"))
}
