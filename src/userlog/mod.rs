//! HTCondor user (job event) logs: parser, follower and the `cosched log` commands (being written).

pub mod cmd;
