//! The struct layouts and constants of `ffi` against the installed
//! `<rdma/rdma_cma.h>`: a C program prints each size, alignment, field
//! offset and constant; each must equal Rust's. Without a C compiler or the
//! header (Debian: `librdmacm-dev`) the test skips with a message, except
//! under CI (`CI` set and not `false`/`0`), where it fails.

use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

use crate::ffi::*;

/// Label, Rust's value, C expression.
type Check = (String, i128, String);

/// Size, alignment and the offsets of the listed fields (`rust = "c"` when
/// the names differ).
macro_rules! layout {
    ($out:ident, $c:literal, $t:ty { $($f:ident $(= $cf:literal)?),* $(,)? }) => {{
        $out.push((format!("sizeof({})", $c), size_of::<$t>() as i128, format!("sizeof({})", $c)));
        $out.push((format!("alignof({})", $c), align_of::<$t>() as i128, format!("__alignof__({})", $c)));
        $(
            let cf: &str = layout!(@n $f $(= $cf)?);
            $out.push((
                format!("offsetof({}, {})", $c, cf),
                offset_of!($t, $f) as i128,
                format!("offsetof({}, {})", $c, cf),
            ));
        )*
    }};
    (@n $f:ident = $cf:literal) => { $cf };
    (@n $f:ident) => { stringify!($f) };
}

macro_rules! constants {
    ($out:ident, $($n:ident),* $(,)?) => {$(
        $out.push((stringify!($n).to_owned(), $n as i128, format!("(long long)({})", stringify!($n))));
    )*};
}

fn checks() -> Vec<Check> {
    let mut c = Vec::new();
    layout!(c, "struct rdma_ib_addr", rdma_ib_addr { sgid, dgid, pkey });
    layout!(c, "struct rdma_addr", rdma_addr {
        src_storage, dst_storage, ibaddr = "addr.ibaddr",
    });
    layout!(
        c,
        "struct ibv_sa_path_rec",
        ibv_sa_path_rec {
            dgid,
            sgid,
            dlid,
            slid,
            raw_traffic,
            flow_label,
            hop_limit,
            traffic_class,
            reversible,
            numb_path,
            pkey,
            sl,
            mtu_selector,
            mtu,
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            preference,
        }
    );
    layout!(
        c,
        "struct rdma_route",
        rdma_route {
            addr,
            path_rec,
            num_paths
        }
    );
    layout!(c, "struct rdma_event_channel", rdma_event_channel { fd });
    layout!(
        c,
        "struct rdma_cm_id",
        rdma_cm_id {
            verbs,
            channel,
            context,
            qp,
            route,
            ps,
            port_num,
            event,
            send_cq_channel,
            send_cq,
            recv_cq_channel,
            recv_cq,
            srq,
            pd,
            qp_type,
        }
    );
    layout!(
        c,
        "struct rdma_conn_param",
        rdma_conn_param {
            private_data,
            private_data_len,
            responder_resources,
            initiator_depth,
            flow_control,
            retry_count,
            rnr_retry_count,
            srq,
            qp_num,
        }
    );
    layout!(
        c,
        "struct rdma_ud_param",
        rdma_ud_param {
            private_data,
            private_data_len,
            ah_attr,
            qp_num,
            qkey,
        }
    );
    layout!(
        c,
        "struct rdma_cm_event",
        rdma_cm_event {
            id,
            listen_id,
            event,
            status,
            param
        }
    );
    layout!(
        c,
        "struct rdma_addrinfo",
        rdma_addrinfo {
            ai_flags,
            ai_family,
            ai_qp_type,
            ai_port_space,
            ai_src_len,
            ai_dst_len,
            ai_src_addr,
            ai_dst_addr,
            ai_src_canonname,
            ai_dst_canonname,
            ai_route_len,
            ai_route,
            ai_connect_len,
            ai_connect,
            ai_next,
        }
    );
    // Only the head of ibv_qp_init_attr_ex (its offsets; the C struct is
    // longer).
    for (label, rust) in [
        (
            "qp_context",
            offset_of!(ibv_qp_init_attr_ex_head, qp_context),
        ),
        ("send_cq", offset_of!(ibv_qp_init_attr_ex_head, send_cq)),
        ("recv_cq", offset_of!(ibv_qp_init_attr_ex_head, recv_cq)),
        ("srq", offset_of!(ibv_qp_init_attr_ex_head, srq)),
        ("cap", offset_of!(ibv_qp_init_attr_ex_head, cap)),
        ("qp_type", offset_of!(ibv_qp_init_attr_ex_head, qp_type)),
        (
            "sq_sig_all",
            offset_of!(ibv_qp_init_attr_ex_head, sq_sig_all),
        ),
        ("comp_mask", offset_of!(ibv_qp_init_attr_ex_head, comp_mask)),
        ("pd", offset_of!(ibv_qp_init_attr_ex_head, pd)),
    ] {
        let e = format!("offsetof(struct ibv_qp_init_attr_ex, {label})");
        c.push((e.clone(), rust as i128, e));
    }
    constants!(
        c,
        RDMA_CM_EVENT_ADDR_RESOLVED,
        RDMA_CM_EVENT_ADDR_ERROR,
        RDMA_CM_EVENT_ROUTE_RESOLVED,
        RDMA_CM_EVENT_ROUTE_ERROR,
        RDMA_CM_EVENT_CONNECT_REQUEST,
        RDMA_CM_EVENT_CONNECT_RESPONSE,
        RDMA_CM_EVENT_CONNECT_ERROR,
        RDMA_CM_EVENT_UNREACHABLE,
        RDMA_CM_EVENT_REJECTED,
        RDMA_CM_EVENT_ESTABLISHED,
        RDMA_CM_EVENT_DISCONNECTED,
        RDMA_CM_EVENT_DEVICE_REMOVAL,
        RDMA_CM_EVENT_MULTICAST_JOIN,
        RDMA_CM_EVENT_MULTICAST_ERROR,
        RDMA_CM_EVENT_ADDR_CHANGE,
        RDMA_CM_EVENT_TIMEWAIT_EXIT,
        RDMA_PS_IPOIB,
        RDMA_PS_TCP,
        RDMA_PS_UDP,
        RDMA_PS_IB,
        RAI_PASSIVE,
        RAI_NUMERICHOST,
        RAI_NOROUTE,
        RAI_FAMILY,
        RDMA_OPTION_ID,
        RDMA_OPTION_IB,
        RDMA_OPTION_ID_TOS,
        RDMA_OPTION_ID_REUSEADDR,
        RDMA_OPTION_ID_AFONLY,
        RDMA_OPTION_ID_ACK_TIMEOUT,
        RDMA_OPTION_IB_PATH,
        RDMA_UDP_QKEY,
    );
    c
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn skip(why: &str) {
    assert!(
        !under_ci(),
        "{why} (required under CI: apt-get install librdmacm-dev)"
    );
    eprintln!("skipping: {why}");
}

#[test]
fn struct_layouts_match_rdma_cma_h() {
    let header = std::path::Path::new("/usr/include/rdma/rdma_cma.h");
    if !header.is_file() {
        return skip("<rdma/rdma_cma.h> is not installed");
    }
    let checks = checks();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for (i, (_, _, expr)) in checks.iter().enumerate() {
        src.push_str(&format!(
            "  printf(\"{i} %lld\\n\", (long long)({expr}));\n"
        ));
    }
    src.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("rdmacm-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (c_file, exe) = (dir.join("abi.c"), dir.join("abi"));
    std::fs::write(&c_file, src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc).arg(&c_file).arg("-o").arg(&exe).output();
    let built = match built {
        Ok(o) => o,
        Err(e) => return skip(&format!("no C compiler ({cc}: {e})")),
    };
    assert!(
        built.status.success(),
        "{cc} failed on the layout program: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut bad = Vec::new();
    let mut seen = 0;
    for line in text.lines() {
        let (i, v) = line.split_once(' ').unwrap();
        let (label, rust, _) = &checks[i.parse::<usize>().unwrap()];
        let c: i128 = v.parse().unwrap();
        if c != *rust {
            bad.push(format!("{label}: C {c}, Rust {rust}"));
        }
        seen += 1;
    }
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(seen, checks.len(), "the program printed every check");
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
}

#[test]
fn event_names_are_rdma_cores() {
    // SAFETY: static C strings.
    let name = |e| unsafe { std::ffi::CStr::from_ptr(crate::api::rdma_event_str(e)) };
    assert_eq!(
        name(RDMA_CM_EVENT_ESTABLISHED).to_str().unwrap(),
        "RDMA_CM_EVENT_ESTABLISHED"
    );
    assert_eq!(
        name(RDMA_CM_EVENT_TIMEWAIT_EXIT).to_str().unwrap(),
        "RDMA_CM_EVENT_TIMEWAIT_EXIT"
    );
    assert_eq!(name(99).to_str().unwrap(), "UNKNOWN EVENT");
    assert_eq!(name(-1).to_str().unwrap(), "UNKNOWN EVENT");
}
