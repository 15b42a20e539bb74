//! `jobrouter` policy (being written).
