//! The flow builder every generator appends to: unique provisional ids,
//! a pair's bytes split over its queue pairs, groups, and the final
//! sorted list ([`FlowBuilder::finish`]).

use roce::time::Instant;

use super::{finish, DependencyError, FlowOp, FlowShape, FlowSpec, GroupSpec, LocalPath, PostLoop};
use crate::topology::NodeId;

/// What every flow of a workload shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTemplate {
    /// Operation.
    pub op: FlowOp,
    /// Bytes per (source, destination) pair.
    pub size: u64,
    /// Message size (`None`: one message per flow).
    pub message_size: Option<u64>,
    /// Queue pairs per pair; the pair's bytes are split evenly over them
    /// (the first QPs take the remainder), one flow per QP.
    pub qps_per_pair: u32,
    /// When flows are posted.
    pub start: Instant,
    /// Priority (0-7).
    pub priority: u8,
}

impl Default for FlowTemplate {
    /// One 1 MB WRITE on one QP at time zero, priority 3.
    fn default() -> Self {
        FlowTemplate {
            op: FlowOp::Write,
            size: 1_000_000,
            message_size: None,
            qps_per_pair: 1,
            start: Instant::ZERO,
            priority: 3,
        }
    }
}

/// Collects flows with unique ids, and the groups they belong to.
#[derive(Debug, Clone, Default)]
pub struct FlowBuilder {
    flows: Vec<FlowSpec>,
    groups: Vec<GroupSpec>,
}

impl FlowBuilder {
    /// An empty builder.
    pub fn new() -> FlowBuilder {
        FlowBuilder::default()
    }

    /// Flows so far (ids are provisional until [`finish`](Self::finish)).
    pub fn flows(&self) -> &[FlowSpec] {
        &self.flows
    }

    /// Register a group; returns its id (its index in [`groups`](Self::groups)).
    pub fn new_group(&mut self, spec: GroupSpec) -> u32 {
        self.groups.push(spec);
        self.groups.len() as u32 - 1
    }

    /// The groups so far, by id. Group ids do not change in
    /// [`finish`](Self::finish).
    pub fn groups(&self) -> &[GroupSpec] {
        &self.groups
    }

    /// Group `id`, to rename it.
    pub fn group_mut(&mut self, id: u32) -> Option<&mut GroupSpec> {
        self.groups.get_mut(id as usize)
    }

    /// Add the flows of one pair: `size` bytes from `src` to `dst` split
    /// over `t.qps_per_pair` QPs, posted at `start` and after `after`.
    /// Returns the provisional ids (none when `size` is zero).
    #[allow(clippy::too_many_arguments)]
    pub fn pair(
        &mut self,
        src: NodeId,
        dst: NodeId,
        size: u64,
        start: Instant,
        t: &FlowTemplate,
        group: Option<u32>,
        after: &[u32],
    ) -> Vec<u32> {
        let q = u64::from(t.qps_per_pair.max(1));
        let mut ids = Vec::with_capacity(q as usize);
        for i in 0..q {
            let part = size / q + u64::from(i < size % q);
            if part == 0 {
                continue;
            }
            let id = self.flows.len() as u32;
            self.flows.push(FlowSpec {
                id,
                src,
                dst,
                size: part,
                start,
                op: t.op,
                message_size: t.message_size.unwrap_or(part).clamp(1, part),
                qp_index: i as u32,
                priority: t.priority,
                group,
                after: after.to_vec(),
                workload: 0,
                post: None,
                local: None,
                landing: false,
                delay: roce::time::Duration::ZERO,
            });
            ids.push(id);
        }
        ids
    }

    /// Add one copy inside a server (no queue pair; see [`LocalPath`]) of
    /// `size` bytes, posted at `start` and after `after`; `src` and
    /// `dst` are the NICs beside the two ends. Returns its provisional id.
    #[allow(clippy::too_many_arguments)]
    pub fn local(
        &mut self,
        src: NodeId,
        dst: NodeId,
        size: u64,
        start: Instant,
        path: LocalPath,
        group: Option<u32>,
        after: &[u32],
    ) -> u32 {
        let id = self.flows.len() as u32;
        self.flows.push(FlowSpec {
            id,
            src,
            dst,
            size,
            start,
            op: FlowOp::Write,
            message_size: size.max(1),
            qp_index: 0,
            priority: 0,
            group,
            after: after.to_vec(),
            workload: 0,
            post: None,
            local: Some(path),
            landing: false,
            delay: roce::time::Duration::ZERO,
        });
        id
    }

    /// Add one flow with an application posting loop (perftest's);
    /// returns its provisional id.
    pub fn push_flow(
        &mut self,
        src: NodeId,
        dst: NodeId,
        shape: FlowShape,
        group: Option<u32>,
        after: &[u32],
        post: PostLoop,
    ) -> u32 {
        let id = self.flows.len() as u32;
        self.flows.push(FlowSpec {
            id,
            src,
            dst,
            size: shape.size,
            start: shape.start,
            op: shape.op,
            message_size: shape.message_size.clamp(1, shape.size.max(1)),
            qp_index: shape.qp_index,
            priority: shape.priority,
            group,
            after: after.to_vec(),
            workload: 0,
            post: Some(post),
            local: None,
            landing: false,
            delay: roce::time::Duration::ZERO,
        });
        id
    }

    /// Let the flows waiting for `ids` go when their data has landed
    /// (see [`FlowSpec::landing`]).
    pub fn set_landing(&mut self, ids: &[u32]) {
        for &id in ids {
            if let Some(f) = self.flows.get_mut(id as usize) {
                f.landing = true;
            }
        }
    }

    /// Post `ids` `delay` after they may go (see [`FlowSpec::delay`]).
    pub fn set_delay(&mut self, ids: &[u32], delay: roce::time::Duration) {
        for &id in ids {
            if let Some(f) = self.flows.get_mut(id as usize) {
                f.delay = delay;
            }
        }
    }

    /// Make flow `id`'s posting wait for `partner`'s messages (a
    /// ping-pong; see [`PostLoop::partner`]).
    pub fn set_partner(&mut self, id: u32, partner: u32) {
        if let Some(p) = self
            .flows
            .get_mut(id as usize)
            .and_then(|f| f.post.as_mut())
        {
            p.partner = Some(partner);
        }
    }

    /// Add already built flows (from an import); their ids and `after`
    /// lists are shifted past the flows already here. Their `group` is kept
    /// as given (register it with [`new_group`](Self::new_group)).
    pub fn extend(&mut self, flows: Vec<FlowSpec>) {
        let base = self.flows.len() as u32;
        let mut flows = flows;
        let min = flows.iter().map(|f| f.id).min().unwrap_or(0);
        for f in &mut flows {
            f.id = f.id - min + base;
            for a in &mut f.after {
                *a = a.wrapping_sub(min).wrapping_add(base);
            }
            if let Some(p) = f.post.as_mut().and_then(|p| p.partner.as_mut()) {
                *p = p.wrapping_sub(min).wrapping_add(base);
            }
        }
        self.flows.extend(flows);
    }

    /// Flows added so far.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// True before any flow was added.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Mark the flows added since the first `from` as made by workload
    /// `index`.
    pub fn set_workload(&mut self, from: usize, index: u32) {
        for f in self.flows.iter_mut().skip(from) {
            f.workload = index;
        }
    }

    /// The final list: sorted, ids dense (see [`super::finish`]).
    pub fn finish(self) -> Result<Vec<FlowSpec>, DependencyError> {
        finish(self.flows)
    }
}
