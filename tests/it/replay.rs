//! Integration tests: replay.
