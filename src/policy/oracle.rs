//! `oracle` policy (being written).
