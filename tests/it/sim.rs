//! Integration tests: sim.
