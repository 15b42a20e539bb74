//! Integration tests: bench.
