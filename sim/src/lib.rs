//! Discrete-event simulator of RoCEv2 fabrics.
