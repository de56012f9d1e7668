//! Counter dumps in the real tools formats.
