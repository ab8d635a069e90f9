//! Wharf.
