//! The simulated grid (being written).
