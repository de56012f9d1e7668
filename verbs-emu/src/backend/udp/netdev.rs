//! The host's IPv4 interfaces as the emulation sees them: which exist,
//! their MTU and speed (`/sys/class/net`), and the device name and node
//! GUID an emulated device bound to an address gets.
//!
//! Contract: read-only queries of the host (getifaddrs(3), sysfs); an
//! address no interface holds, or an attribute the host does not report,
//! is `None`, never an error.

use std::net::{Ipv4Addr, SocketAddrV4};

use roce::time::Rate;

/// The speed of the interface that has `ip`, from
/// `/sys/class/net/IF/speed` (Mbit/s); `None` for loopback, unknown
/// addresses and interfaces that report none (-1 or unreadable).
pub fn link_rate_of(ip: Ipv4Addr) -> Option<Rate> {
    if ip.is_loopback() {
        return None;
    }
    let mbps: i64 = interface_attr(ip, "speed")?.parse().ok()?;
    (mbps > 0).then(|| Rate::from_bps(mbps as u64 * 1_000_000))
}

/// The MTU of the interface that holds `ip` (`/sys/class/net/IF/mtu`),
/// if it is known.
pub fn link_mtu_of(ip: Ipv4Addr) -> Option<u32> {
    interface_attr(ip, "mtu")?
        .parse()
        .ok()
        .filter(|&m: &u32| m >= 68)
}

/// `/sys/class/net/IF/<attr>`, trimmed, of the interface that holds `ip`.
fn interface_attr(ip: Ipv4Addr, attr: &str) -> Option<String> {
    let (name, _) = interfaces().into_iter().find(|&(_, a)| a == ip)?;
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}")).ok()?;
    Some(text.trim().to_string())
}

/// The name of the loopback device (every 127/8 address): the name the
/// drop-in libibverbs gives its default device, so that `ibv_devices`
/// under `rocelab exec`, `rocelab devices` and `rocelab perftest -d` show
/// one name for it.
pub const LOOPBACK_DEVICE: &str = "rocelab0";

/// The loopback device's former name, still accepted where a device is
/// named (`rocelab perftest -d udp_lo`).
pub const LOOPBACK_DEVICE_ALIAS: &str = "udp_lo";

/// The device name of interface `ifname` holding `ip`: [`LOOPBACK_DEVICE`]
/// for loopback, `udp_<interface>` otherwise.
pub fn interface_device_name(ifname: &str, ip: Ipv4Addr) -> String {
    if ip.is_loopback() {
        LOOPBACK_DEVICE.into()
    } else {
        format!("udp_{ifname}")
    }
}

/// The device name for an address: [`LOOPBACK_DEVICE`] on loopback,
/// `udp_<interface>` when known, else `udp_<a>_<b>_<c>_<d>`.
pub fn device_name_for(ip: Ipv4Addr) -> String {
    if ip.is_loopback() {
        return LOOPBACK_DEVICE.into();
    }
    for (name, a) in interfaces() {
        if a == ip {
            return interface_device_name(&name, a);
        }
    }
    let o = ip.octets();
    format!("udp_{}_{}_{}_{}", o[0], o[1], o[2], o[3])
}

/// The node GUID of an emulated device: derived from its address and port
/// like an EUI-64 (`02:00` locally administered prefix).
pub fn node_guid_for(bind: SocketAddrV4) -> u64 {
    let o = bind.ip().octets();
    u64::from_be_bytes([
        0x02,
        0x00,
        o[0],
        o[1],
        o[2],
        o[3],
        (bind.port() >> 8) as u8,
        bind.port() as u8,
    ])
}

/// The host's IPv4 interfaces, `(name, address)`, in the OS's order.
pub fn interfaces() -> Vec<(String, Ipv4Addr)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned; each node is valid
        // until freeifaddrs.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr of at least its family's
            // size; we read sockaddr_in only for AF_INET.
            let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if fam == libc::AF_INET {
                // SAFETY: AF_INET means the address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                // SAFETY: ifa_name is a NUL-terminated string.
                let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned();
                out.push((name, ip));
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    out
}
