//! Reports, comparisons, parsers for real RDMA tools' output, and the doctor.
