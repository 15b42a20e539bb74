//! Integration tests: userlog.
