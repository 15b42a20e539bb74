//! The HTCondor edge (being written).
