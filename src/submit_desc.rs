//! The user's submit description (being written).
