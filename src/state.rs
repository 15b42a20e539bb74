//! The SQLite state database (being written).
