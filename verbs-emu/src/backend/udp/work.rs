//! Translations between the verbs vocabulary ([`crate::verbs`]) and the
//! transport engine's ([`roce::transport`]): work completions, send
//! operations and post errors.
//!
//! Contract: exact, field for field; no state.

use crate::verbs::{VerbsError, WcFlags, WorkCompletion};
use roce::transport as tp;
use roce::wire::Qpn;

pub(super) fn convert_wc(c: &tp::Completion) -> WorkCompletion {
    let mut flags = WcFlags::EMPTY;
    if c.imm_data.is_some() {
        flags |= WcFlags::WITH_IMM;
    }
    if c.invalidated_rkey.is_some() {
        flags |= WcFlags::WITH_INV;
    }
    if c.grh {
        flags |= WcFlags::GRH;
    }
    WorkCompletion {
        wr_id: c.wr_id,
        status: c.status,
        opcode: c.opcode,
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: c.imm_data.unwrap_or(0),
        invalidated_rkey: c.invalidated_rkey.map_or(0, |k| k.value()),
        qp_num: c.qp_num,
        src_qp: c.src_qp.unwrap_or(Qpn::new(0)),
        wc_flags: flags,
    }
}

pub(super) fn post_error(verb: &'static str, e: tp::PostError) -> VerbsError {
    match e {
        tp::PostError::BadState(s) => VerbsError::BadQpState { verb, state: s },
        tp::PostError::QueueFull(n) => VerbsError::QueueFull { verb, depth: n },
        tp::PostError::Unsupported(t) => {
            VerbsError::invalid(verb, format!("operation not supported on {t:?} QPs"))
        }
        tp::PostError::Invalid(why) => VerbsError::invalid(verb, why),
    }
}
