//! Socket addresses in and out of C structs, and `rdma_getaddrinfo`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::raw::{c_char, c_int};
use std::ptr;

use verbs_emu::backend::ibverbs::ffi::IBV_QPT_RC;

use crate::ffi::*;

/// `AF_IB`: InfiniBand addresses, which the emulation has none of.
const AF_IB: c_int = 27;

/// Read a socket address the program passed, or the errno: `EINVAL` for
/// null, `EAFNOSUPPORT` for a family other than IPv4 and IPv6.
///
/// # Safety
///
/// `sa` is null or points at a socket address of its family's size.
pub(crate) unsafe fn read_sockaddr(sa: *const libc::sockaddr) -> Result<SocketAddr, c_int> {
    if sa.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's address; the family says which struct it is.
    unsafe {
        match c_int::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*sa.cast::<libc::sockaddr_in>();
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                    u16::from_be(s.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let s = &*sa.cast::<libc::sockaddr_in6>();
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                )))
            }
            AF_IB => Err(libc::EAFNOSUPPORT),
            _ => Err(libc::EINVAL),
        }
    }
}

/// Write `a` into a `sockaddr_storage`; returns the address's length.
pub(crate) fn write_sockaddr(dst: &mut libc::sockaddr_storage, a: SocketAddr) -> libc::socklen_t {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    *dst = unsafe { std::mem::zeroed() };
    let p = ptr::from_mut(dst);
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in.
            let s = unsafe { &mut *p.cast::<libc::sockaddr_in>() };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let s = unsafe { &mut *p.cast::<libc::sockaddr_in6>() };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_flowinfo = v6.flowinfo();
            s.sin6_scope_id = v6.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// A heap `sockaddr_storage` holding `a`, for `rdma_addrinfo`.
fn boxed_sockaddr(a: SocketAddr) -> (*mut libc::sockaddr, libc::socklen_t) {
    // SAFETY: plain data; all-zero is valid.
    let mut s: Box<libc::sockaddr_storage> = Box::new(unsafe { std::mem::zeroed() });
    let len = write_sockaddr(&mut s, a);
    (Box::into_raw(s).cast(), len)
}

/// `rdma_getaddrinfo`: `getaddrinfo` for a stream address (IPv4 preferred
/// unless the hints ask for IPv6), as one `rdma_addrinfo` whose source
/// (passive) or destination (active) address is the result. Returns 0 or
/// the `getaddrinfo` error code.
///
/// # Safety
///
/// `node` and `service` are null or C strings, `hints` is null or valid,
/// `res` is writable.
pub(crate) unsafe fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    if res.is_null() {
        crate::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: caller's hints.
    let h = unsafe { hints.as_ref() };
    let flags = h.map_or(0, |h| h.ai_flags);
    let family = h.map_or(libc::AF_UNSPEC, |h| h.ai_family);
    if family != libc::AF_UNSPEC && family != libc::AF_INET && family != libc::AF_INET6 {
        crate::set_errno(libc::EAFNOSUPPORT);
        return libc::EAI_FAMILY;
    }
    // SAFETY: addrinfo is plain data.
    let mut ai_hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    ai_hints.ai_family = family;
    ai_hints.ai_socktype = libc::SOCK_STREAM;
    if flags & RAI_PASSIVE != 0 {
        ai_hints.ai_flags |= libc::AI_PASSIVE;
    }
    if flags & RAI_NUMERICHOST != 0 {
        ai_hints.ai_flags |= libc::AI_NUMERICHOST;
    }
    let mut list: *mut libc::addrinfo = ptr::null_mut();
    // SAFETY: C strings or null, our hints, our output.
    let r = unsafe { libc::getaddrinfo(node, service, &ai_hints, &mut list) };
    if r != 0 {
        return r;
    }
    let mut pick: Option<SocketAddr> = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: a node of getaddrinfo's list.
        let ai = unsafe { &*cur };
        // SAFETY: getaddrinfo's address of that family.
        if let Ok(a) = unsafe { read_sockaddr(ai.ai_addr) } {
            if pick.is_none() || (a.is_ipv4() && !pick.is_some_and(|p| p.is_ipv4())) {
                pick = Some(a);
            }
        }
        cur = ai.ai_next;
    }
    // SAFETY: from getaddrinfo.
    unsafe { libc::freeaddrinfo(list) };
    let Some(addr) = pick else {
        return libc::EAI_NONAME;
    };
    let (sa, len) = boxed_sockaddr(addr);
    let mut rai = Box::new(rdma_addrinfo {
        ai_flags: flags,
        ai_family: if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        },
        ai_qp_type: h
            .map(|h| h.ai_qp_type)
            .filter(|&t| t != 0)
            .unwrap_or(IBV_QPT_RC as c_int),
        ai_port_space: h
            .map(|h| h.ai_port_space)
            .filter(|&p| p != 0)
            .unwrap_or(RDMA_PS_TCP),
        ai_src_len: 0,
        ai_dst_len: 0,
        ai_src_addr: ptr::null_mut(),
        ai_dst_addr: ptr::null_mut(),
        ai_src_canonname: ptr::null_mut(),
        ai_dst_canonname: ptr::null_mut(),
        ai_route_len: 0,
        ai_route: ptr::null_mut(),
        ai_connect_len: 0,
        ai_connect: ptr::null_mut(),
        ai_next: ptr::null_mut(),
    });
    if flags & RAI_PASSIVE != 0 {
        rai.ai_src_addr = sa;
        rai.ai_src_len = len;
    } else {
        rai.ai_dst_addr = sa;
        rai.ai_dst_len = len;
        // A source address the hints name is kept.
        if let Some(h) = h.filter(|h| !h.ai_src_addr.is_null()) {
            // SAFETY: the caller's hint address.
            if let Ok(src) = unsafe { read_sockaddr(h.ai_src_addr) } {
                let (s, l) = boxed_sockaddr(src);
                rai.ai_src_addr = s;
                rai.ai_src_len = l;
            }
        }
    }
    // SAFETY: checked non-null above.
    unsafe { *res = Box::into_raw(rai) };
    0
}

/// `rdma_freeaddrinfo`.
///
/// # Safety
///
/// `res` is null or a list from [`getaddrinfo`], freed once.
pub(crate) unsafe fn freeaddrinfo(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        // SAFETY: our own allocations (see getaddrinfo).
        let rai = unsafe { Box::from_raw(res) };
        for sa in [rai.ai_src_addr, rai.ai_dst_addr] {
            if !sa.is_null() {
                // SAFETY: boxed sockaddr_storage from boxed_sockaddr.
                drop(unsafe { Box::from_raw(sa.cast::<libc::sockaddr_storage>()) });
            }
        }
        res = rai.ai_next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip() {
        for a in ["127.0.0.1:7174", "[::1]:18515", "10.1.2.3:0"] {
            let a: SocketAddr = a.parse().unwrap();
            // SAFETY: plain data.
            let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            write_sockaddr(&mut s, a);
            // SAFETY: just written.
            let back = unsafe { read_sockaddr(ptr::from_ref(&s).cast()) }.unwrap();
            assert_eq!(back, a);
        }
        // SAFETY: null is refused before any read.
        assert_eq!(unsafe { read_sockaddr(ptr::null()) }, Err(libc::EINVAL));
    }

    #[test]
    fn getaddrinfo_gives_the_passive_source_or_the_active_destination() {
        let mut res = ptr::null_mut();
        // SAFETY: literal C strings, our outputs.
        unsafe {
            let hints = rdma_addrinfo {
                ai_flags: RAI_PASSIVE,
                ..std::mem::zeroed()
            };
            assert_eq!(
                getaddrinfo(ptr::null(), c"7174".as_ptr(), &hints, &mut res),
                0
            );
            let r = &*res;
            assert!(r.ai_dst_addr.is_null());
            assert_eq!(
                read_sockaddr(r.ai_src_addr),
                Ok("0.0.0.0:7174".parse().unwrap())
            );
            assert_eq!(r.ai_port_space, RDMA_PS_TCP);
            freeaddrinfo(res);
            assert_eq!(
                getaddrinfo(
                    c"127.0.0.1".as_ptr(),
                    c"18515".as_ptr(),
                    ptr::null(),
                    &mut res
                ),
                0
            );
            let r = &*res;
            assert_eq!(
                read_sockaddr(r.ai_dst_addr),
                Ok("127.0.0.1:18515".parse().unwrap())
            );
            assert_eq!(r.ai_family, libc::AF_INET);
            freeaddrinfo(res);
        }
    }
}
