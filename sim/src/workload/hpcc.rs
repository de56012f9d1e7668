//! Import of the HPCC ns-3 simulator's flow files.
//!
//! Format (`simulation/mix/flow.txt`): the first line is the flow count,
//! then one line per flow: `src dst pg dport size_bytes start_time_s`.
//! `src` and `dst` are node ids; they are taken as [`NodeId`]s, which is
//! exact for topologies imported from HPCC files (ids are kept) and for
//! generated topologies (hosts come first, so node id = host index). `pg`
//! becomes the priority; `dport` is not used (rocelab derives UDP ports
//! from QPs). Start times are decimal seconds, kept exactly (at most 12
//! decimals); the convention is to start at 2.0 s, and `shift` moves every
//! flow earlier by that much (e.g. 2 s) so a run can start at zero.

use std::path::Path;

use roce::time::{Duration, Instant};

use super::{FlowOp, FlowSpec};
use crate::input::FileError;
use crate::topology::{NodeId, NodeKind, Topology};

/// Parse an HPCC flow file's text into WRITE flows (ids `0..n` in file
/// order, one message each, QP 0), checking endpoints against `topo`.
pub fn parse(
    file: &Path,
    text: &str,
    topo: &Topology,
    shift: Duration,
) -> Result<Vec<FlowSpec>, FileError> {
    let bad = |line: usize, msg: String| FileError {
        file: file.to_path_buf(),
        position: Some((line, 1)),
        key: None,
        message: msg,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty());
    let (hl, header) = lines
        .next()
        .ok_or_else(|| bad(1, "empty file: expected the flow count".into()))?;
    let count: usize = header
        .parse()
        .map_err(|_| bad(hl, format!("{header:?}: expected the flow count")))?;
    let mut flows = Vec::with_capacity(count.min(1 << 20));
    for (ln, line) in lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [src, dst, pg, dport, size, start] = w[..] else {
            return Err(bad(
                ln,
                format!("{line:?}: expected `src dst pg dport size start_s`"),
            ));
        };
        let host = |s: &str| -> Result<NodeId, FileError> {
            let id: u32 = s
                .parse()
                .map_err(|_| bad(ln, format!("node {s:?}: expected a node id")))?;
            match topo.nodes.get(id as usize) {
                Some(n) if n.kind == NodeKind::Host => Ok(NodeId(id)),
                Some(n) => Err(bad(
                    ln,
                    format!("node {id} is switch {:?}: expected a host", n.name),
                )),
                None => Err(bad(
                    ln,
                    format!("node {id}: expected below {}", topo.nodes.len()),
                )),
            }
        };
        let (src, dst) = (host(src)?, host(dst)?);
        if src == dst {
            return Err(bad(
                ln,
                format!("flow from node {} to itself: expected two hosts", src.0),
            ));
        }
        let priority: u8 = pg
            .parse()
            .ok()
            .filter(|&p| p < 8)
            .ok_or_else(|| bad(ln, format!("pg {pg:?}: expected a priority 0-7")))?;
        dport
            .parse::<u16>()
            .map_err(|_| bad(ln, format!("dport {dport:?}: expected a port number")))?;
        let size: u64 = size
            .parse()
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| bad(ln, format!("size {size:?}: expected a positive byte count")))?;
        let at: Duration = format!("{start}s").parse().map_err(|_| {
            bad(
                ln,
                format!("start {start:?}: expected seconds such as 2.000001"),
            )
        })?;
        let at = at.checked_sub(shift).ok_or_else(|| {
            bad(ln, format!("start {start} s is before the shift of {shift}: expected a later start or a smaller shift"))
        })?;
        flows.push(FlowSpec {
            id: flows.len() as u32,
            src,
            dst,
            size,
            start: Instant::ZERO + at,
            op: FlowOp::Write,
            message_size: size,
            qp_index: 0,
            priority,
            group: None,
            after: Vec::new(),
            workload: 0,
            post: None,
            local: None,
            landing: false,
            delay: roce::time::Duration::ZERO,
        });
    }
    if flows.len() != count {
        return Err(bad(
            hl,
            format!(
                "{} flows listed: expected {count} as the first line says",
                flows.len()
            ),
        ));
    }
    Ok(flows)
}
