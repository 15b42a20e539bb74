//! Integration tests: submit.
