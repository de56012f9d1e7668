//! The hardware backend's ABI and loading, proven without RDMA hardware.
//!
//! `struct_layouts_match_verbs_h` writes a C program that includes the
//! installed `<infiniband/verbs.h>` and prints the size, alignment and every
//! field offset of each struct the backend mirrors (plus the values of the
//! enum constants it uses and `ibv_wc_status_str`'s texts), compiles it with
//! `cc` (or `$CC`), runs it, and compares each number with Rust's
//! `size_of`/`align_of`/`offset_of!`. Where no compiler or header exists the
//! test skips with a message, except under CI (`CI` set), where it fails.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::ibverbs::{IbverbsError, Library, LIBRARY_NAME};
use verbs_emu::verbs::WcStatus;

/// One number to compare: a label, Rust's value and the C expression for it.
struct Check {
    label: String,
    rust: i128,
    c_expr: String,
}

/// Size, alignment and field offsets of a named C type (`struct x`/`union x`)
/// or of an anonymous member reached by `parent` and `path`.
macro_rules! layout {
    // A named C type.
    ($checks:ident, $c_type:literal, $rust:ident { $($field:ident $(= $c_field:literal)?),* $(,)? }) => {{
        $checks.push(Check {
            label: format!("sizeof({})", $c_type),
            rust: size_of::<$rust>() as i128,
            c_expr: format!("sizeof({})", $c_type),
        });
        $checks.push(Check {
            label: format!("alignof({})", $c_type),
            rust: align_of::<$rust>() as i128,
            c_expr: format!("__alignof__({})", $c_type),
        });
        $(
            let c_field: &str = layout!(@name $field $(= $c_field)?);
            $checks.push(Check {
                label: format!("offsetof({}, {})", $c_type, c_field),
                rust: offset_of!($rust, $field) as i128,
                c_expr: format!("offsetof({}, {})", $c_type, c_field),
            });
        )*
    }};
    // An anonymous struct or union member `path` inside the C type `parent`.
    ($checks:ident, member $parent:literal . $path:literal, $rust:ident { $($field:ident $(= $c_field:literal)?),* $(,)? }) => {{
        let member = format!("((({} *)0)->{})", $parent, $path);
        $checks.push(Check {
            label: format!("sizeof({}.{})", $parent, $path),
            rust: size_of::<$rust>() as i128,
            c_expr: format!("sizeof{member}"),
        });
        $checks.push(Check {
            label: format!("alignof({}.{})", $parent, $path),
            rust: align_of::<$rust>() as i128,
            c_expr: format!("__alignof__{member}"),
        });
        $(
            let c_field: &str = layout!(@name $field $(= $c_field)?);
            $checks.push(Check {
                label: format!("offsetof({}.{}, {})", $parent, $path, c_field),
                rust: offset_of!($rust, $field) as i128,
                c_expr: format!(
                    "(offsetof({parent}, {path}.{c_field}) - offsetof({parent}, {path}))",
                    parent = $parent,
                    path = $path,
                ),
            });
        )*
    }};
    (@name $field:ident = $c_field:literal) => { $c_field };
    (@name $field:ident) => { stringify!($field) };
}

/// Values of enum constants, compared with C's.
macro_rules! constants {
    ($checks:ident, $($name:ident),* $(,)?) => {$(
        $checks.push(Check {
            label: stringify!($name).to_owned(),
            rust: $name as i128,
            c_expr: format!("(long long)({})", stringify!($name)),
        });
    )*};
}

fn checks() -> Vec<Check> {
    let mut checks = Vec::new();
    let c = &mut checks;
    layout!(c, "union ibv_gid", ibv_gid { raw, global });
    layout!(c, member "union ibv_gid" . "global", ibv_gid_global { subnet_prefix, interface_id });
    layout!(
        c,
        "struct _ibv_device_ops",
        _ibv_device_ops { _dummy1, _dummy2 }
    );
    layout!(
        c,
        "struct ibv_device",
        ibv_device {
            _ops,
            node_type,
            transport_type,
            name,
            dev_name,
            dev_path,
            ibdev_path,
        }
    );
    layout!(
        c,
        "struct ibv_context_ops",
        ibv_context_ops {
            _compat_query_device,
            _compat_query_port,
            _compat_alloc_pd,
            _compat_dealloc_pd,
            _compat_reg_mr,
            _compat_rereg_mr,
            _compat_dereg_mr,
            alloc_mw,
            bind_mw,
            dealloc_mw,
            _compat_create_cq,
            poll_cq,
            req_notify_cq,
            _compat_cq_event,
            _compat_resize_cq,
            _compat_destroy_cq,
            _compat_create_srq,
            _compat_modify_srq,
            _compat_query_srq,
            _compat_destroy_srq,
            post_srq_recv,
            _compat_create_qp,
            _compat_query_qp,
            _compat_modify_qp,
            _compat_destroy_qp,
            post_send,
            post_recv,
            _compat_create_ah,
            _compat_destroy_ah,
            _compat_attach_mcast,
            _compat_detach_mcast,
            _compat_async_event,
        }
    );
    layout!(
        c,
        "struct ibv_context",
        ibv_context {
            device,
            ops,
            cmd_fd,
            async_fd,
            num_comp_vectors,
            mutex,
            abi_compat,
        }
    );
    layout!(c, "struct verbs_context", verbs_context {
        query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
        create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm,
        modify_flow_action_esp, destroy_flow_action, create_flow_action_esp,
        modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
        post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
        create_wq, query_rt_values, create_cq_ex, priv_ = "priv", query_device_ex,
        ibv_destroy_flow, abi_placeholder2 = "ABI_placeholder2", ibv_create_flow,
        abi_placeholder1 = "ABI_placeholder1", open_qp, create_qp_ex, get_srq_num,
        create_srq_ex, open_xrcd, close_xrcd, _abi_placeholder3 = "_ABI_placeholder3", sz,
        context,
    });
    layout!(
        c,
        "struct ibv_alloc_dm_attr",
        ibv_alloc_dm_attr {
            length,
            log_align_req,
            comp_mask
        }
    );
    layout!(
        c,
        "struct ibv_dm",
        ibv_dm {
            context,
            memcpy_to_dm,
            memcpy_from_dm,
            comp_mask,
            handle
        }
    );
    layout!(c, "struct ibv_td_init_attr", ibv_td_init_attr { comp_mask });
    layout!(c, "struct ibv_td", ibv_td { context });
    layout!(
        c,
        "struct ibv_parent_domain_init_attr",
        ibv_parent_domain_init_attr {
            pd,
            td,
            comp_mask,
            alloc,
            free,
            pd_context,
        }
    );
    layout!(
        c,
        "struct ibv_device_attr",
        ibv_device_attr {
            fw_ver,
            node_guid,
            sys_image_guid,
            max_mr_size,
            page_size_cap,
            vendor_id,
            vendor_part_id,
            hw_ver,
            max_qp,
            max_qp_wr,
            device_cap_flags,
            max_sge,
            max_sge_rd,
            max_cq,
            max_cqe,
            max_mr,
            max_pd,
            max_qp_rd_atom,
            max_ee_rd_atom,
            max_res_rd_atom,
            max_qp_init_rd_atom,
            max_ee_init_rd_atom,
            atomic_cap,
            max_ee,
            max_rdd,
            max_mw,
            max_raw_ipv6_qp,
            max_raw_ethy_qp,
            max_mcast_grp,
            max_mcast_qp_attach,
            max_total_mcast_qp_attach,
            max_ah,
            max_fmr,
            max_map_per_fmr,
            max_srq,
            max_srq_wr,
            max_srq_sge,
            max_pkeys,
            local_ca_ack_delay,
            phys_port_cnt,
        }
    );
    layout!(
        c,
        "struct ibv_port_attr",
        ibv_port_attr {
            state,
            max_mtu,
            active_mtu,
            gid_tbl_len,
            port_cap_flags,
            max_msg_sz,
            bad_pkey_cntr,
            qkey_viol_cntr,
            pkey_tbl_len,
            lid,
            sm_lid,
            lmc,
            max_vl_num,
            sm_sl,
            subnet_timeout,
            init_type_reply,
            active_width,
            active_speed,
            phys_state,
            link_layer,
            flags,
            port_cap_flags2,
        }
    );
    layout!(c, "struct ibv_pd", ibv_pd { context, handle });
    layout!(
        c,
        "struct ibv_srq",
        ibv_srq {
            context,
            srq_context,
            pd,
            handle,
            mutex,
            cond,
            events_completed
        }
    );
    layout!(
        c,
        "struct ibv_srq_attr",
        ibv_srq_attr {
            max_wr,
            max_sge,
            srq_limit
        }
    );
    layout!(
        c,
        "struct ibv_srq_init_attr",
        ibv_srq_init_attr { srq_context, attr }
    );
    layout!(
        c,
        "struct ibv_ah",
        ibv_ah {
            context,
            pd,
            handle
        }
    );
    layout!(
        c,
        "struct ibv_gid_entry",
        ibv_gid_entry {
            gid,
            gid_index,
            port_num,
            gid_type,
            ndev_ifindex
        }
    );
    layout!(
        c,
        "struct ibv_async_event",
        ibv_async_event {
            element,
            event_type
        }
    );
    layout!(
        c,
        "struct ibv_comp_channel",
        ibv_comp_channel {
            context,
            fd,
            refcnt
        }
    );
    layout!(
        c,
        "struct ibv_comp_channel",
        ibv_comp_channel {
            context,
            fd,
            refcnt
        }
    );
    layout!(
        c,
        "struct ibv_mr",
        ibv_mr {
            context,
            pd,
            addr,
            length,
            handle,
            lkey,
            rkey
        }
    );
    layout!(
        c,
        "struct ibv_cq",
        ibv_cq {
            context,
            channel,
            cq_context,
            handle,
            cqe,
            mutex,
            cond,
            comp_events_completed,
            async_events_completed,
        }
    );
    layout!(
        c,
        "struct ibv_qp_cap",
        ibv_qp_cap {
            max_send_wr,
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data,
        }
    );
    layout!(
        c,
        "struct ibv_qp_init_attr",
        ibv_qp_init_attr {
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type,
            sq_sig_all,
        }
    );
    layout!(
        c,
        "struct ibv_qp",
        ibv_qp {
            context,
            qp_context,
            pd,
            send_cq,
            recv_cq,
            srq,
            handle,
            qp_num,
            state,
            qp_type,
            mutex,
            cond,
            events_completed,
        }
    );
    layout!(
        c,
        "struct ibv_global_route",
        ibv_global_route {
            dgid,
            flow_label,
            sgid_index,
            hop_limit,
            traffic_class,
        }
    );
    layout!(
        c,
        "struct ibv_ah_attr",
        ibv_ah_attr {
            grh,
            dlid,
            sl,
            src_path_bits,
            static_rate,
            is_global,
            port_num,
        }
    );
    layout!(
        c,
        "struct ibv_qp_attr",
        ibv_qp_attr {
            qp_state,
            cur_qp_state,
            path_mtu,
            path_mig_state,
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num,
            qp_access_flags,
            cap,
            ah_attr,
            alt_ah_attr,
            pkey_index,
            alt_pkey_index,
            en_sqd_async_notify,
            sq_draining,
            max_rd_atomic,
            max_dest_rd_atomic,
            min_rnr_timer,
            port_num,
            timeout,
            retry_cnt,
            rnr_retry,
            alt_port_num,
            alt_timeout,
            rate_limit,
        }
    );
    layout!(c, "struct ibv_sge", ibv_sge { addr, length, lkey });
    layout!(c, "struct ibv_send_wr", ibv_send_wr {
        wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type,
        ext = "bind_mw",
    });
    layout!(c, member "struct ibv_send_wr" . "wr", ibv_send_wr_wr { rdma, atomic, ud });
    layout!(c, member "struct ibv_send_wr" . "wr.rdma", ibv_send_wr_rdma { remote_addr, rkey });
    layout!(c, member "struct ibv_send_wr" . "wr.atomic", ibv_send_wr_atomic {
        remote_addr, compare_add, swap, rkey,
    });
    layout!(c, member "struct ibv_send_wr" . "wr.ud", ibv_send_wr_ud {
        ah, remote_qpn, remote_qkey,
    });
    layout!(c, member "struct ibv_send_wr" . "qp_type", ibv_send_wr_qp_type { xrc });
    layout!(c, member "struct ibv_send_wr" . "qp_type.xrc", ibv_send_wr_xrc { remote_srqn });
    layout!(c, member "struct ibv_send_wr" . "bind_mw", ibv_send_wr_bind_mw {
        mw, rkey, bind_info,
    });
    layout!(c, member "struct ibv_send_wr" . "tso", ibv_send_wr_tso { hdr, hdr_sz, mss });
    layout!(
        c,
        "struct ibv_mw_bind_info",
        ibv_mw_bind_info {
            mr,
            addr,
            length,
            mw_access_flags,
        }
    );
    layout!(
        c,
        "struct ibv_recv_wr",
        ibv_recv_wr {
            wr_id,
            next,
            sg_list,
            num_sge
        }
    );
    layout!(
        c,
        "struct ibv_wc",
        ibv_wc {
            wr_id,
            status,
            opcode,
            vendor_err,
            byte_len,
            imm_data,
            qp_num,
            src_qp,
            wc_flags,
            pkey_index,
            slid,
            sl,
            dlid_path_bits,
        }
    );
    // The whole last union of ibv_send_wr: its size is the tail of the struct.
    c.push(Check {
        label: "sizeof(ibv_send_wr anonymous bind_mw/tso union)".to_owned(),
        rust: size_of::<ibv_send_wr_ext>() as i128,
        c_expr: "(sizeof(struct ibv_send_wr) - offsetof(struct ibv_send_wr, bind_mw))".to_owned(),
    });
    constants!(
        c,
        IBV_SYSFS_NAME_MAX,
        IBV_SYSFS_PATH_MAX,
        IBV_NODE_CA,
        IBV_NODE_RNIC,
        IBV_TRANSPORT_IB,
        IBV_TRANSPORT_IWARP,
        IBV_PORT_ACTIVE,
        IBV_LINK_LAYER_INFINIBAND,
        IBV_LINK_LAYER_ETHERNET,
        IBV_MTU_256,
        IBV_MTU_512,
        IBV_MTU_1024,
        IBV_MTU_2048,
        IBV_MTU_4096,
        IBV_ACCESS_LOCAL_WRITE,
        IBV_ACCESS_REMOTE_WRITE,
        IBV_ACCESS_REMOTE_READ,
        IBV_ACCESS_REMOTE_ATOMIC,
        IBV_ACCESS_OPTIONAL_FIRST,
        IBV_ACCESS_OPTIONAL_RANGE,
        IBV_ACCESS_RELAXED_ORDERING,
        IBV_QPT_RC,
        IBV_QPT_UC,
        IBV_QPT_UD,
        IBV_SRQ_MAX_WR,
        IBV_SRQ_LIMIT,
        IBV_GID_TYPE_ROCE_V2,
        IBV_QPS_RESET,
        IBV_QPS_INIT,
        IBV_QPS_RTR,
        IBV_QPS_RTS,
        IBV_QPS_SQD,
        IBV_QPS_SQE,
        IBV_QPS_ERR,
        IBV_QPS_UNKNOWN,
        IBV_QP_STATE,
        IBV_QP_CUR_STATE,
        IBV_QP_ACCESS_FLAGS,
        IBV_QP_PKEY_INDEX,
        IBV_QP_PORT,
        IBV_QP_QKEY,
        IBV_QP_AV,
        IBV_QP_PATH_MTU,
        IBV_QP_TIMEOUT,
        IBV_QP_RETRY_CNT,
        IBV_QP_RNR_RETRY,
        IBV_QP_RQ_PSN,
        IBV_QP_MAX_QP_RD_ATOMIC,
        IBV_QP_MIN_RNR_TIMER,
        IBV_QP_SQ_PSN,
        IBV_QP_MAX_DEST_RD_ATOMIC,
        IBV_QP_CAP,
        IBV_QP_DEST_QPN,
        IBV_WR_RDMA_WRITE,
        IBV_WR_RDMA_WRITE_WITH_IMM,
        IBV_WR_SEND,
        IBV_WR_SEND_WITH_IMM,
        IBV_WR_RDMA_READ,
        IBV_WR_ATOMIC_CMP_AND_SWP,
        IBV_WR_ATOMIC_FETCH_AND_ADD,
        IBV_WR_SEND_WITH_INV,
        IBV_SEND_FENCE,
        IBV_SEND_SIGNALED,
        IBV_SEND_SOLICITED,
        IBV_SEND_INLINE,
        IBV_WC_SUCCESS,
        IBV_WC_LOC_LEN_ERR,
        IBV_WC_LOC_QP_OP_ERR,
        IBV_WC_LOC_PROT_ERR,
        IBV_WC_WR_FLUSH_ERR,
        IBV_WC_BAD_RESP_ERR,
        IBV_WC_LOC_ACCESS_ERR,
        IBV_WC_REM_INV_REQ_ERR,
        IBV_WC_REM_ACCESS_ERR,
        IBV_WC_REM_OP_ERR,
        IBV_WC_RETRY_EXC_ERR,
        IBV_WC_RNR_RETRY_EXC_ERR,
        IBV_WC_REM_ABORT_ERR,
        IBV_WC_FATAL_ERR,
        IBV_WC_RESP_TIMEOUT_ERR,
        IBV_WC_GENERAL_ERR,
        IBV_WC_SEND,
        IBV_WC_RDMA_WRITE,
        IBV_WC_RDMA_READ,
        IBV_WC_COMP_SWAP,
        IBV_WC_FETCH_ADD,
        IBV_WC_RECV,
        IBV_WC_RECV_RDMA_WITH_IMM,
        IBV_WC_GRH,
        IBV_WC_WITH_IMM,
        IBV_WC_WITH_INV,
        IBV_WC_BIND_MW,
        IBV_WC_LOCAL_INV,
    );
    c.push(Check {
        label: "__VERBS_ABI_IS_EXTENDED".to_owned(),
        rust: VERBS_ABI_IS_EXTENDED as isize as i128,
        c_expr: "(long long)(intptr_t)__VERBS_ABI_IS_EXTENDED".to_owned(),
    });
    checks
}

/// Whether a missing tool or header must fail (CI) rather than skip.
fn strict() -> bool {
    std::env::var_os("CI").is_some_and(|value| !value.is_empty() && value != "false")
}

/// Skips (prints why) outside CI; fails under CI.
pub(super) fn skip_or_fail(why: &str) {
    assert!(!strict(), "CI is set, so this cannot be skipped: {why}");
    eprintln!("skipping: {why}");
}

/// A fresh directory for one compile.
fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "rocelab-ibverbs-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Compiles `source` against the installed `<infiniband/verbs.h>` with `cc`
/// (or `$CC`) and `args` (after the source, so libraries link), into
/// `dir/name`. `None` after skipping when the
/// compiler or the header is missing; a compile error in `source` fails.
pub(super) fn compile_c(tag: &str, source: &str, name: &str, args: &[&str]) -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let dir = scratch_dir(tag);
    let probe = dir.join("probe.c");
    std::fs::write(
        &probe,
        "#include <infiniband/verbs.h>\nint main(void) { return 0; }\n",
    )
    .expect("write probe");
    match Command::new(&cc).arg("-fsyntax-only").arg(&probe).output() {
        Err(error) => {
            skip_or_fail(&format!("no C compiler ({cc}: {error})"));
            return None;
        }
        Ok(out) if !out.status.success() => {
            skip_or_fail(&format!(
                "<infiniband/verbs.h> does not compile (install libibverbs-dev): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return None;
        }
        Ok(_) => {}
    }
    let src = dir.join(format!("{name}.c"));
    let output = dir.join(name);
    std::fs::write(&src, source).expect("write C source");
    let out = Command::new(&cc)
        .arg("-std=gnu11")
        .arg("-o")
        .arg(&output)
        .arg(&src)
        .args(args)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "the C source does not compile:\n{}\n--- source ---\n{source}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(output)
}

/// Compiles and runs `source` linked with libibverbs, returning its stdout.
fn compile_and_run(source: &str) -> Option<String> {
    let exe = compile_c("abi", source, "abi", &["-libverbs"])?;
    let run = Command::new(&exe).output().expect("run the C program");
    assert!(run.status.success(), "the C program failed: {run:?}");
    if let Some(dir) = exe.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    Some(String::from_utf8(run.stdout).expect("C output is UTF-8"))
}

#[test]
fn struct_layouts_match_verbs_h() {
    let checks = checks();
    let mut source = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for (index, check) in checks.iter().enumerate() {
        source.push_str(&format!(
            "    printf(\"{index} %lld\\n\", (long long)({}));\n",
            check.c_expr
        ));
    }
    for status in 0..24 {
        source.push_str(&format!(
            "    printf(\"wc%d %s\\n\", {status}, ibv_wc_status_str((enum ibv_wc_status){status}));\n"
        ));
    }
    source.push_str("    return 0;\n}\n");
    let Some(output) = compile_and_run(&source) else {
        return;
    };

    let mut numbers = BTreeMap::new();
    let mut status_texts = BTreeMap::new();
    for line in output.lines() {
        let (key, value) = line.split_once(' ').expect("`key value` lines");
        if let Some(status) = key.strip_prefix("wc") {
            status_texts.insert(status.parse::<u32>().unwrap(), value.to_owned());
        } else {
            numbers.insert(
                key.parse::<usize>().unwrap(),
                value.parse::<i128>().unwrap(),
            );
        }
    }
    let mismatches: Vec<String> = checks
        .iter()
        .enumerate()
        .filter_map(|(index, check)| {
            let c = numbers[&index];
            (c != check.rust).then(|| format!("{}: C {c}, Rust {}", check.label, check.rust))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} layout checks differ from <infiniband/verbs.h>:\n{}",
        mismatches.len(),
        checks.len(),
        mismatches.join("\n")
    );
    assert_eq!(numbers.len(), checks.len());
    let count = |prefix: &str| {
        checks
            .iter()
            .filter(|check| check.label.starts_with(prefix))
            .count()
    };
    eprintln!(
        "ABI matches verbs.h: {} layouts (size and alignment), {} field offsets, {} constants",
        count("sizeof("),
        count("offsetof("),
        checks.len() - 2 * count("sizeof(") - count("offsetof(")
    );
    let mut named = 0;
    for (raw, text) in status_texts {
        // The verbs API names statuses 0..=21 (not tag matching's 22, 23).
        if let Some(status) = WcStatus::from_value(raw) {
            assert_eq!(status.as_str(), text, "ibv_wc_status_str({raw})");
            named += 1;
        }
    }
    assert_eq!(named, 22, "every named status was compared");
}

#[test]
fn installed_libibverbs_loads_and_reports_devices_or_none() {
    let library = match Library::load() {
        Ok(library) => library,
        Err(error @ IbverbsError::LibraryNotFound { .. }) => {
            assert!(
                error.to_string().contains("libibverbs.so.1 not found"),
                "{error}"
            );
            skip_or_fail(&format!("{LIBRARY_NAME} is not installed: {error}"));
            return;
        }
        Err(error) => panic!("{LIBRARY_NAME} loads but is unusable: {error}"),
    };
    assert!(
        library.has_reg_mr_iova2(),
        "rdma-core >= 20 exports ibv_reg_mr_iova2"
    );
    match library.devices() {
        Ok(devices) => {
            // A machine with RDMA devices: each has a name.
            assert!(!devices.is_empty());
            for device in &devices {
                assert!(!device.name.is_empty(), "{device:?}");
            }
        }
        Err(error @ IbverbsError::NoDevices { .. }) => {
            let text = error.to_string();
            assert!(text.starts_with("no RDMA devices"), "{text}");
            assert_eq!(error.verb(), Some("ibv_get_device_list"));
            // Opening is refused the same way, not with a crash.
            let open = library.open(None).unwrap_err();
            assert!(matches!(open, IbverbsError::NoDevices { .. }), "{open}");
            let named = library.open(Some("mlx5_0")).unwrap_err();
            assert!(matches!(named, IbverbsError::NoDevices { .. }), "{named}");
        }
        Err(error) => panic!("listing devices failed unexpectedly: {error}"),
    }
}

#[test]
fn bogus_library_name_is_not_found() {
    let error = Library::load_from("libibverbs-bogus.so.9").unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with("libibverbs-bogus.so.9 not found: "),
        "{text}"
    );
    assert!(matches!(error, IbverbsError::LibraryNotFound { .. }));
}

#[test]
fn a_library_without_the_verbs_names_the_missing_symbol() {
    // libc loads fine but exports no verbs.
    match Library::load_from("libc.so.6") {
        Err(IbverbsError::MissingSymbol { symbol, .. }) => {
            assert_eq!(symbol, "ibv_get_device_list");
        }
        Err(IbverbsError::LibraryNotFound { .. }) => {
            eprintln!("skipping: no libc.so.6 on this system");
        }
        other => panic!("expected a missing symbol, got {other:?}"),
    }
}
