//! `thesis` policy (being written).
