//! `adaptive` policy (being written).
