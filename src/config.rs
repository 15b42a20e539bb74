//! `sites.toml` (being written).
