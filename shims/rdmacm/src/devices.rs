//! The devices of the loaded libibverbs, opened once per process, and
//! which one an IP address maps to.

use std::net::{IpAddr, Ipv4Addr};
use std::os::raw::c_int;
use std::sync::OnceLock;

use verbs_emu::backend::ibverbs::ffi::{ibv_context, ibv_gid, ibv_pd, ibv_port_attr, IBV_MTU_1024};
use verbs_emu::backend::ibverbs::library::Verbs;

use crate::{warn, SendPtr};

/// The library programs link; the loader hands back the copy already
/// loaded (rocelab's, under `rocelab exec`).
const LIBIBVERBS: &str = "libibverbs.so.1";

/// One opened device.
pub(crate) struct Device {
    /// The context every id on this device shares (never closed).
    pub ctx: SendPtr<ibv_context>,
    /// The device's default protection domain, every id's `pd` until it
    /// creates a QP on another (as rdma-core's, allocated once).
    pub pd: SyncPd,
    /// GID 0 of port 1: `::ffff:` + the device's IPv4 address.
    pub gid: [u8; 16],
    /// The port's active MTU (`enum ibv_mtu`).
    pub mtu: u8,
}

impl Device {
    /// The device's IPv4 address (the low 4 bytes of its GID).
    pub fn ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.gid[12], self.gid[13], self.gid[14], self.gid[15])
    }
}

/// A device's default PD (null if it could not be allocated).
pub(crate) type SyncPd = SendPtr<ibv_pd>;

/// The verbs table and the opened devices.
pub(crate) struct Devices {
    /// libibverbs' exported functions.
    pub verbs: Verbs,
    /// Every device of the list, opened.
    pub list: Vec<Device>,
}

/// The process's devices, opened on first use; the errno to fail with
/// when there are none.
pub(crate) fn devices() -> Result<&'static Devices, c_int> {
    static DEVICES: OnceLock<Result<Devices, String>> = OnceLock::new();
    match DEVICES.get_or_init(open_all) {
        Ok(d) if !d.list.is_empty() => Ok(d),
        Ok(_) => Err(libc::ENODEV),
        Err(e) => {
            warn(e);
            Err(libc::ENODEV)
        }
    }
}

fn open_all() -> Result<Devices, String> {
    let verbs = Verbs::load(LIBIBVERBS).map_err(|e| e.to_string())?;
    let mut n: c_int = 0;
    // SAFETY: the exported ibv_get_device_list; freed below.
    let arr = unsafe { (verbs.get_device_list)(&mut n) };
    if arr.is_null() {
        return Err("ibv_get_device_list failed".into());
    }
    let mut list = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: i < n entries.
        let dev = unsafe { *arr.add(i) };
        // SAFETY: a device of the list.
        let ctx = unsafe { (verbs.open_device)(dev) };
        if ctx.is_null() {
            warn(&format!(
                "cannot open device {i}: {}",
                std::io::Error::last_os_error()
            ));
            continue;
        }
        let mut gid = ibv_gid::default();
        // SAFETY: an open context; gid is writable.
        if unsafe { (verbs.query_gid)(ctx, 1, 0, &mut gid) } != 0 {
            warn(&format!("device {i}: ibv_query_gid failed"));
            continue;
        }
        let mut port = ibv_port_attr::default();
        // SAFETY: the exported ibv_query_port writes the compat layout,
        // a prefix of ibv_port_attr.
        let mtu =
            if unsafe { (verbs.query_port_compat)(ctx, 1, std::ptr::addr_of_mut!(port).cast()) }
                == 0
            {
                port.active_mtu as u8
            } else {
                IBV_MTU_1024 as u8
            };
        // SAFETY: an open context.
        let pd = unsafe { (verbs.alloc_pd)(ctx) };
        list.push(Device {
            ctx: SendPtr(ctx),
            pd: SendPtr(pd),
            // SAFETY: every bit pattern is a valid [u8; 16].
            gid: unsafe { gid.raw },
            mtu,
        });
    }
    // SAFETY: from ibv_get_device_list; the opened contexts stay valid.
    unsafe { (verbs.free_device_list)(arr) };
    Ok(Devices { verbs, list })
}

/// The device an address maps to: the one with that address, otherwise the
/// first.
pub(crate) fn index_for(list: &[Device], ip: IpAddr) -> usize {
    let v4 = match ip {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(a) => a.to_ipv4_mapped(),
    };
    v4.and_then(|a| list.iter().position(|d| d.ip() == a))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(ip: [u8; 4]) -> Device {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&ip);
        Device {
            ctx: SendPtr(std::ptr::null_mut()),
            pd: SendPtr(std::ptr::null_mut()),
            gid,
            mtu: 3,
        }
    }

    #[test]
    fn an_address_maps_to_its_device_or_the_first() {
        let l = [dev([10, 0, 0, 1]), dev([10, 0, 0, 2])];
        assert_eq!(index_for(&l, "10.0.0.2".parse().unwrap()), 1);
        assert_eq!(index_for(&l, "::ffff:10.0.0.2".parse().unwrap()), 1);
        assert_eq!(index_for(&l, "127.0.0.1".parse().unwrap()), 0);
        assert_eq!(index_for(&l, "::1".parse().unwrap()), 0);
        assert_eq!(l[1].ip(), Ipv4Addr::new(10, 0, 0, 2));
    }
}
