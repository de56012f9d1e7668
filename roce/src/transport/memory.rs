//! Registered memory, seen by the engine only through the [`Memory`] trait.
//!
//! The engine never copies payload itself. Incoming payload reaches memory
//! as a [`Payload`] (real bytes or a bare length) that the engine hands to
//! [`Memory::write`]; outgoing payload leaves as a [`PayloadDesc`] (a list
//! of key/address/length pieces) that the caller resolves with
//! [`Memory::read`] when it serialises the packet.
//!
//! One region table (`Regions`, crate-internal) keeps the keys, bounds,
//! access rights, protection domains and ZERO_BASED rule for every
//! implementation: [`ByteMemory`] holds real bytes (tests with
//! checksums), [`LengthMemory`] holds none and moves lengths only (the
//! simulator), and the UDP backend's host memory points into the
//! application's buffers. Keys are rxe's `(index + 1) << 8 | generation`:
//! a freed slot comes back with the next generation, so a deregistered
//! key does not match again, and key 0 is never valid.
//!
//! Memory windows (IBA 10.6.7, ROCEV2.md §5.10) live in the same table:
//! a window is an R_Key only, with bit 31 set ([`WINDOW_KEY_BIT`]; region
//! keys never set it), naming a sub-range of one region with rights of
//! its own. A type 1 window is bound and rebound by `ibv_bind_mw`; a type
//! 2 window is bound by a send work request, belongs to the QP that bound
//! it (only that QP may use or remotely invalidate it) and must be
//! invalidated (locally or by a peer's SEND with Invalidate) before it is
//! bound again. A remote key that names a window is checked against the
//! window's state, key, protection domain, rights and range, then against
//! its region (which must still be the one bound, and still hold the
//! range); the lookup of a region's own key is unchanged (a window key
//! fails it first and only then takes the window path). Binds, local
//! invalidations and window lookups take `&self` (the requester binds
//! through a shared view of memory) and so go through a lock around the
//! window slots, which region keys never touch.
//!
//! Nothing here panics on network input: every failure is a [`MemError`].

use std::sync::{Mutex, MutexGuard};

use crate::wire::{Lkey, Qpn, Rkey};

/// Bit 31 of a key: set in memory window keys, never in region keys.
pub const WINDOW_KEY_BIT: u32 = 1 << 31;

/// Most memory windows of one table (and most regions): keys keep 23 bits
/// of slot index beside [`WINDOW_KEY_BIT`] and the 8-bit tag.
pub const MAX_SLOTS: usize = (1 << 23) - 1;

/// The type of a memory window (`enum ibv_mw_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MwType {
    /// `IBV_MW_TYPE_1`: bound by `ibv_bind_mw`, rebindable while bound,
    /// not tied to a QP, never invalidated (a zero-length bind unbinds).
    Type1,
    /// `IBV_MW_TYPE_2` (type 2B, IBA 10.6.7.2.2): bound by a send work
    /// request, used only through the QP that bound it, invalidated
    /// locally or remotely before it is bound again.
    Type2,
}

impl MwType {
    /// From `enum ibv_mw_type` (1 or 2); `None` for anything else.
    pub const fn from_raw(t: u32) -> Option<MwType> {
        match t {
            1 => Some(MwType::Type1),
            2 => Some(MwType::Type2),
            _ => None,
        }
    }

    /// The `enum ibv_mw_type` value.
    pub const fn raw(self) -> u32 {
        match self {
            MwType::Type1 => 1,
            MwType::Type2 => 2,
        }
    }
}

/// A memory window bind (`IBV_WR_BIND_MW`, `ibv_bind_mw`): the window
/// that the upper 24 bits of `rkey` name takes the key `rkey` and grants
/// `access` to `[addr, addr + len)` of the region `lkey` names. A zero
/// `len` leaves the window unbound under its new key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowBind {
    /// The key the window takes (its slot bits and a new 8-bit tag).
    pub rkey: Rkey,
    /// The region the window is bound to (0 with a zero `len`).
    pub lkey: Lkey,
    /// First address of the window, inside the region.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote rights (REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC), with
    /// ZERO_BASED when remote addresses are offsets into the window.
    /// LOCAL_WRITE is accepted and means nothing for a window.
    pub access: AccessFlags,
}

/// What a bound window grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Binding {
    /// The region's slot and its key at bind time.
    mr: usize,
    mr_key: u32,
    /// The window's first address and length.
    base: u64,
    len: u64,
    /// Offset of `base` into the region.
    mr_off: u64,
    access: AccessFlags,
    /// The QP a type 2 window belongs to.
    qpn: Option<Qpn>,
}

/// One memory window slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WindowSlot {
    live: bool,
    pd: u64,
    mw_type: MwType,
    key: u32,
    bound: Option<Binding>,
}

/// The slot a window key names (its index bits), if it is a window key.
fn window_slot(key: u32) -> Option<usize> {
    if key & WINDOW_KEY_BIT == 0 {
        return None;
    }
    ((key & !WINDOW_KEY_BIT) >> 8)
        .checked_sub(1)
        .map(|i| i as usize)
}

flags! {
    /// `ibv_access_flags` (ROCEV2.md §5.10): the one access flag type of
    /// the crate (regions, QP access, the verbs API, which re-exports it).
    AccessFlags: u32 {
        /// The HCA may write local memory (receives, READ results).
        LOCAL_WRITE = 1,
        /// Remote peers may RDMA WRITE.
        REMOTE_WRITE = 2,
        /// Remote peers may RDMA READ.
        REMOTE_READ = 4,
        /// Remote peers may run atomics.
        REMOTE_ATOMIC = 8,
        /// Memory windows may be bound.
        MW_BIND = 16,
        /// Remote addresses are offsets from the MR start.
        ZERO_BASED = 32,
        /// On-demand paging.
        ON_DEMAND = 64,
        /// Backed by huge pages.
        HUGETLB = 128,
    }
}

impl AccessFlags {
    /// Every remote right plus LOCAL_WRITE.
    pub const ALL: AccessFlags = AccessFlags(1 | 2 | 4 | 8);

    /// From the raw `ibv_access_flags` value.
    pub const fn from_bits(bits: u32) -> AccessFlags {
        AccessFlags(bits)
    }
}

/// Which key names a region: a local key (the owner's own SGEs) or a remote
/// key (an RDMA target named by the peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemKey {
    /// A local key, from an SGE.
    Local(Lkey),
    /// A remote key, from a RETH or AtomicETH.
    Remote(Rkey),
}

impl MemKey {
    /// The raw 32-bit key.
    pub const fn value(self) -> u32 {
        match self {
            MemKey::Local(k) => k.value(),
            MemKey::Remote(k) => k.value(),
        }
    }
}

/// Why a memory access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemError {
    /// The key names no registered region (never registered, deregistered,
    /// invalidated, or a stale generation).
    #[error("key {0:#x} names no valid memory region")]
    BadKey(u32),
    /// `[addr, addr + len)` is not inside the region.
    #[error("range {addr:#x}+{len} is outside the region")]
    OutOfBounds {
        /// Start address asked for.
        addr: u64,
        /// Length asked for.
        len: u64,
    },
    /// The region does not grant the right asked for.
    #[error("region lacks access {needed:#x} (has {granted:#x})")]
    AccessDenied {
        /// The bits needed.
        needed: u32,
        /// The bits the region has.
        granted: u32,
    },
    /// An atomic on an address that is not 8-byte aligned.
    #[error("atomic address {0:#x} is not 8-byte aligned")]
    Misaligned(u64),
    /// A remote invalidation of a key that names a plain MR (only memory
    /// windows and fast-registration MRs may be invalidated by a peer).
    #[error("key {0:#x} names a plain memory region, which a peer cannot invalidate")]
    NotInvalidatable(u32),
    /// A registration that verbs would refuse.
    #[error("invalid registration: {0}")]
    InvalidRegistration(&'static str),
    /// A memory window bind (or local invalidation) that a NIC refuses:
    /// the work request completes with `IBV_WC_MW_BIND_ERR`.
    #[error("memory window operation refused: {0}")]
    WindowRefused(&'static str),
    /// Deregistration of a region that memory windows are bound to.
    #[error("memory windows are bound to the region of key {0:#x}")]
    WindowsBound(u32),
    /// An access to an on-demand-paging region whose pages are not mapped
    /// (or not with the rights the access needs): the page fault a NIC
    /// cannot resolve.
    #[error("range {addr:#x}+{len} of an on-demand-paging region is not mapped")]
    Unmapped {
        /// Start address asked for.
        addr: u64,
        /// Length asked for.
        len: u64,
    },
}

/// Payload handed to the engine with a received packet, and by the engine
/// to [`Memory::write`]: the bytes themselves, or only their length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// Real bytes.
    Bytes(&'a [u8]),
    /// A length only (the simulator).
    Len(u32),
}

impl<'a> Payload<'a> {
    /// Length in bytes.
    pub fn len(&self) -> u32 {
        match self {
            Payload::Bytes(b) => b.len() as u32,
            Payload::Len(n) => *n,
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sub-range `[off, off + len)`, clamped to what exists.
    pub fn slice(&self, off: u32, len: u32) -> Payload<'a> {
        match *self {
            Payload::Bytes(b) => {
                let start = (off as usize).min(b.len());
                let end = start.saturating_add(len as usize).min(b.len());
                Payload::Bytes(&b[start..end])
            }
            Payload::Len(n) => Payload::Len(len.min(n.saturating_sub(off))),
        }
    }
}

/// An atomic operation on a host-order u64 in memory (ROCEV2.md §5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// `orig = *va; if orig == compare { *va = swap }`.
    CompareSwap {
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
    /// `orig = *va; *va = orig + add` (wrapping).
    FetchAdd {
        /// Add value.
        add: u64,
    },
}

/// One piece of outgoing payload: `len` bytes at `addr` in the region
/// `key` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Piece {
    /// Raw key; local or remote as [`PayloadDesc::remote`] says.
    pub key: u32,
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
}

/// Most pieces one packet's payload can span, and so the most SGEs a work
/// request may carry ([`crate::transport::MAX_SGE`]).
pub const MAX_PIECES: usize = 8;

/// Where the payload of an outgoing packet lives: up to [`MAX_PIECES`]
/// pieces of registered memory, in order. The caller gathers them with
/// [`Memory::read`] (or [`PayloadDesc::gather`]) when it needs the bytes;
/// the simulator only reads [`PayloadDesc::len`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PayloadDesc {
    pieces: [Piece; MAX_PIECES],
    count: u8,
    /// True when the keys are remote keys (a READ response reads the
    /// responder's memory by R_Key); false for local keys (SGEs).
    pub remote: bool,
    len: u32,
}

impl PayloadDesc {
    /// No payload.
    pub const EMPTY: PayloadDesc = PayloadDesc {
        pieces: [Piece {
            key: 0,
            addr: 0,
            len: 0,
        }; MAX_PIECES],
        count: 0,
        remote: false,
        len: 0,
    };

    /// Total length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Empty it for reuse (cheaper than assigning [`PayloadDesc::EMPTY`]).
    pub fn clear(&mut self) {
        self.count = 0;
        self.len = 0;
        self.remote = false;
    }

    /// True when there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces[..self.count as usize]
    }

    /// Append a piece. Returns false (and changes nothing) when full.
    pub fn push(&mut self, piece: Piece) -> bool {
        if self.count as usize >= MAX_PIECES {
            return false;
        }
        if piece.len == 0 {
            return true;
        }
        self.pieces[self.count as usize] = piece;
        self.count += 1;
        self.len += piece.len;
        true
    }

    /// The key of piece `p` as a [`MemKey`].
    pub fn key_of(&self, p: &Piece) -> MemKey {
        if self.remote {
            MemKey::Remote(Rkey::new(p.key))
        } else {
            MemKey::Local(Lkey::new(p.key))
        }
    }

    /// Gather the payload bytes into `out` (which must be at least
    /// [`len`](Self::len) long) through `mem`.
    pub fn gather<M: Memory + ?Sized>(&self, mem: &M, out: &mut [u8]) -> Result<(), MemError> {
        let mut off = 0usize;
        for p in self.pieces() {
            let end = off + p.len as usize;
            let dst = out.get_mut(off..end).ok_or(MemError::OutOfBounds {
                addr: p.addr,
                len: p.len as u64,
            })?;
            mem.read(self.key_of(p), p.addr, dst)?;
            off = end;
        }
        Ok(())
    }
}

/// Registered memory as the engine sees it.
///
/// Every method checks the key, the bounds and the rights before touching
/// anything; a refused call changes nothing.
pub trait Memory {
    /// Check that `key` names a valid region granting `access`, and that
    /// `[addr, addr + len)` lies inside it. A zero `len` still checks the key.
    fn check(&self, key: MemKey, addr: u64, len: u64, access: AccessFlags) -> Result<(), MemError>;

    /// Write incoming payload at `addr` (the caller has checked rights; the
    /// implementation checks bounds again). Real bytes are copied; a bare
    /// length is only bounds-checked.
    fn write(&mut self, key: MemKey, addr: u64, data: Payload<'_>) -> Result<(), MemError>;

    /// Read `out.len()` bytes at `addr` (to serialise outgoing payload).
    /// Memory without bytes fills nothing and returns `Ok` after the checks.
    fn read(&self, key: MemKey, addr: u64, out: &mut [u8]) -> Result<(), MemError>;

    /// Perform an atomic on the 8 bytes at `addr`, returning the original
    /// value. Memory without bytes keeps a value per address so that
    /// atomics still compute.
    fn atomic(&mut self, key: MemKey, addr: u64, op: AtomicOp) -> Result<u64, MemError>;

    /// Store a u64 (host order) at `addr`: the result of an atomic landing
    /// in the requester's local SGE.
    fn write_u64(&mut self, key: MemKey, addr: u64, value: u64) -> Result<(), MemError>;

    /// A peer's SEND_WITH_INVALIDATE of `rkey`. Only memory windows and
    /// fast-registration MRs may be invalidated remotely; a plain MR
    /// refuses with [`MemError::NotInvalidatable`] and stays registered
    /// (the responder then fails the SEND, IBA class J).
    fn invalidate(&mut self, rkey: Rkey) -> Result<(), MemError>;

    /// True when this memory holds real bytes, so that callers know whether
    /// to gather payload.
    fn carries_bytes(&self) -> bool;

    /// Execute a memory window bind posted on QP `qpn` (the rules of
    /// [`Regions::bind_window`]). Memory without windows refuses.
    fn bind_window(&self, bind: &WindowBind, qpn: Qpn) -> Result<(), MemError> {
        let _ = (bind, qpn);
        Err(MemError::WindowRefused("this memory has no memory windows"))
    }

    /// A local invalidation (`IBV_WR_LOCAL_INV`) of `rkey`: a bound type 2
    /// window becomes free; anything else is refused and stays as it was.
    fn invalidate_local(&self, rkey: Rkey) -> Result<(), MemError> {
        Err(MemError::NotInvalidatable(rkey.value()))
    }

    /// The QP a bound type 2 window named by `rkey` belongs to: only that
    /// QP may use it or invalidate it remotely. `None` for every other key.
    fn window_qp(&self, rkey: Rkey) -> Option<Qpn> {
        let _ = rkey;
        None
    }
}

/// One region of a [`Regions`] table: the range, rights and protection
/// domain every implementation checks the same way, and `store`, what
/// backs it (real bytes, atomic words only, or a host pointer).
#[derive(Debug, Clone)]
pub struct Region<S> {
    /// First address (the application's virtual address).
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights, with [`AccessFlags::ZERO_BASED`] when remote keys take offsets.
    pub access: AccessFlags,
    generation: u8,
    /// False once deregistered: the slot waits for reuse.
    pub valid: bool,
    /// The protection domain (0 for memories that have one).
    pub pd: u64,
    /// What backs the region.
    pub store: S,
}

/// A registered region handed back by `register`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// The local key.
    pub lkey: Lkey,
    /// The remote key (equal to the local key in this implementation).
    pub rkey: Rkey,
    /// First address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The one region table of the crate: keys, bounds, rights, protection
/// domains and ZERO_BASED, for [`ByteMemory`], [`LengthMemory`] and the
/// UDP backend's host memory alike. Keys are rxe's `(index + 1) << 8 |
/// generation`: a freed slot is reused with the next generation, so a
/// deregistered key does not match again (until its slot has been reused
/// 256 times, as on rxe), and key 0 is never valid. Memory windows are
/// kept beside the regions (see the module documentation).
#[derive(Debug)]
pub struct Regions<S> {
    regions: Vec<Region<S>>,
    windows: Mutex<Vec<WindowSlot>>,
}

impl<S> Default for Regions<S> {
    fn default() -> Self {
        Regions {
            regions: Vec::new(),
            windows: Mutex::new(Vec::new()),
        }
    }
}

impl<S: Clone> Clone for Regions<S> {
    fn clone(&self) -> Self {
        Regions {
            regions: self.regions.clone(),
            windows: Mutex::new(self.windows().clone()),
        }
    }
}

impl<S> Regions<S> {
    /// Register `[base, base + len)` with `access` in protection domain
    /// `pd`, backed by `store`. Refuses what verbs refuses.
    pub fn register(
        &mut self,
        base: u64,
        len: u64,
        access: AccessFlags,
        pd: u64,
        store: S,
    ) -> Result<Registration, MemError> {
        if (access.contains(AccessFlags::REMOTE_WRITE)
            || access.contains(AccessFlags::REMOTE_ATOMIC))
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(MemError::InvalidRegistration(
                "REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE",
            ));
        }
        if base.checked_add(len).is_none() {
            return Err(MemError::InvalidRegistration("address range wraps"));
        }
        let slot = self.regions.iter().position(|r| !r.valid);
        if slot.is_none() && self.regions.len() >= MAX_SLOTS {
            return Err(MemError::InvalidRegistration("too many regions"));
        }
        let idx = match slot {
            Some(i) => {
                let generation = self.regions[i].generation.wrapping_add(1);
                self.regions[i] = Region {
                    base,
                    len,
                    access,
                    generation,
                    valid: true,
                    pd,
                    store,
                };
                i
            }
            None => {
                self.regions.push(Region {
                    base,
                    len,
                    access,
                    generation: 1,
                    valid: true,
                    pd,
                    store,
                });
                self.regions.len() - 1
            }
        };
        let key = ((idx as u32 + 1) << 8) | u32::from(self.regions[idx].generation);
        Ok(Registration {
            lkey: Lkey::new(key),
            rkey: Rkey::new(key),
            addr: base,
            len,
        })
    }

    /// The index of the live region `key` names.
    pub fn index(&self, key: u32) -> Result<usize, MemError> {
        let idx = ((key >> 8) as usize)
            .checked_sub(1)
            .ok_or(MemError::BadKey(key))?;
        match self.regions.get(idx) {
            Some(r) if r.valid && u32::from(r.generation) == key & 0xFF => Ok(idx),
            _ => Err(MemError::BadKey(key)),
        }
    }

    /// The region at `idx` (from [`index`](Self::index) or
    /// [`locate`](Self::locate)).
    pub fn region(&self, idx: usize) -> &Region<S> {
        &self.regions[idx]
    }

    /// The region at `idx`, mutably.
    pub fn region_mut(&mut self, idx: usize) -> &mut Region<S> {
        &mut self.regions[idx]
    }

    /// Every slot, live or not.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Region<S>> {
        self.regions.iter_mut()
    }

    /// Check `key`, the rights `access`, and, with `pd`, that the region
    /// belongs to that protection domain (another PD's key names nothing:
    /// [`MemError::BadKey`]); return (region index, offset of `addr`
    /// into the region) when `[addr, addr + len)` lies inside it. A
    /// ZERO_BASED region takes offsets for remote keys only (local SGEs
    /// always carry addresses).
    pub fn locate(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
        pd: Option<u64>,
    ) -> Result<(usize, u64), MemError> {
        let idx = match self.index(key.value()) {
            Ok(idx) => idx,
            Err(e) => return self.locate_window(e, key, addr, len, access, pd),
        };
        let r = &self.regions[idx];
        if pd.is_some_and(|pd| pd != r.pd) {
            return Err(MemError::BadKey(key.value()));
        }
        if !r.access.contains(access) {
            return Err(MemError::AccessDenied {
                needed: access.bits(),
                granted: r.access.bits(),
            });
        }
        let zero_based =
            r.access.contains(AccessFlags::ZERO_BASED) && matches!(key, MemKey::Remote(_));
        let off = if zero_based {
            addr
        } else {
            addr.checked_sub(r.base)
                .ok_or(MemError::OutOfBounds { addr, len })?
        };
        match off.checked_add(len) {
            Some(end) if end <= r.len => Ok((idx, off)),
            _ => Err(MemError::OutOfBounds { addr, len }),
        }
    }

    /// A peer's SEND with Invalidate, or a local invalidation: only memory
    /// windows and fast-registration MRs may be invalidated (IBA 10.6.7,
    /// ROCEV2.md §5.4). A bound type 2 window of `pd` (when given) named
    /// by exactly `key` becomes free; a type 1 window or a plain MR is
    /// refused and stays as it was. (Whether the window belongs to the
    /// QP a remote invalidation arrived on is the responder's check,
    /// through [`window_qp`](Self::window_qp).)
    pub fn invalidate(&self, key: u32, pd: Option<u64>) -> Result<(), MemError> {
        if let Some(slot) = window_slot(key) {
            let mut ws = self.windows();
            let w = match ws.get_mut(slot) {
                Some(w) if w.live && w.key == key && w.bound.is_some() => w,
                _ => return Err(MemError::BadKey(key)),
            };
            if pd.is_some_and(|pd| pd != w.pd) {
                return Err(MemError::BadKey(key));
            }
            if w.mw_type != MwType::Type2 {
                return Err(MemError::NotInvalidatable(key));
            }
            w.bound = None;
            return Ok(());
        }
        let idx = self.index(key)?;
        if pd.is_some_and(|pd| pd != self.regions[idx].pd) {
            return Err(MemError::BadKey(key));
        }
        Err(MemError::NotInvalidatable(key))
    }

    /// Re-register the live region `key` names (`ibv_rereg_mr`), keeping
    /// its keys: with `range`, it now covers `[base, base + len)` backed
    /// by the given store; with `access`, it grants those rights; with
    /// `pd`, it belongs to that protection domain. The same rules as
    /// [`register`](Self::register) apply to the result; on a refusal
    /// nothing changes. Returns the store the region had when `range`
    /// replaced it, for the caller to release.
    pub fn reregister(
        &mut self,
        key: u32,
        range: Option<(u64, u64, S)>,
        access: Option<AccessFlags>,
        pd: Option<u64>,
    ) -> Result<Option<S>, MemError> {
        let idx = self.index(key)?;
        let r = &self.regions[idx];
        let new_access = access.unwrap_or(r.access);
        if (new_access.contains(AccessFlags::REMOTE_WRITE)
            || new_access.contains(AccessFlags::REMOTE_ATOMIC))
            && !new_access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(MemError::InvalidRegistration(
                "REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE",
            ));
        }
        if let Some((base, len, _)) = &range {
            if base.checked_add(*len).is_none() {
                return Err(MemError::InvalidRegistration("address range wraps"));
            }
        }
        let r = &mut self.regions[idx];
        r.access = new_access;
        if let Some(pd) = pd {
            r.pd = pd;
        }
        Ok(range.map(|(base, len, store)| {
            r.base = base;
            r.len = len;
            core::mem::replace(&mut r.store, store)
        }))
    }

    /// The window slots, locked (a poisoned lock is still consistent:
    /// every update is one assignment).
    fn windows(&self) -> MutexGuard<'_, Vec<WindowSlot>> {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Allocate an unbound memory window of `mw_type` in protection domain
    /// `pd` (`ibv_alloc_mw`); its first key. A freed slot comes back with
    /// the next tag.
    pub fn alloc_window(&mut self, pd: u64, mw_type: MwType) -> Result<Rkey, MemError> {
        let ws = self.windows.get_mut().unwrap_or_else(|p| p.into_inner());
        let idx = match ws.iter().position(|w| !w.live) {
            Some(i) => i,
            None if ws.len() >= MAX_SLOTS => {
                return Err(MemError::InvalidRegistration("too many memory windows"))
            }
            None => {
                ws.push(WindowSlot {
                    live: false,
                    pd,
                    mw_type,
                    key: 0,
                    bound: None,
                });
                ws.len() - 1
            }
        };
        let tag = ws[idx].key.wrapping_add(1) & 0xFF;
        let key = WINDOW_KEY_BIT | ((idx as u32 + 1) << 8) | tag;
        ws[idx] = WindowSlot {
            live: true,
            pd,
            mw_type,
            key,
            bound: None,
        };
        Ok(Rkey::new(key))
    }

    /// Free the window whose slot `key` names (any tag: a type 2 window's
    /// key changes with every bind), bound or not (`ibv_dealloc_mw`): no
    /// key of it matches again.
    pub fn dealloc_window(&mut self, key: u32) -> Result<(), MemError> {
        let ws = self.windows.get_mut().unwrap_or_else(|p| p.into_inner());
        match window_slot(key).and_then(|i| ws.get_mut(i)) {
            Some(w) if w.live => {
                w.live = false;
                w.bound = None;
                Ok(())
            }
            _ => Err(MemError::BadKey(key)),
        }
    }

    /// The type and protection domain of the live window whose slot `key`
    /// names.
    pub fn window_info(&self, key: u32) -> Option<(MwType, u64)> {
        let ws = self.windows();
        match window_slot(key).and_then(|i| ws.get(i)) {
            Some(w) if w.live => Some((w.mw_type, w.pd)),
            _ => None,
        }
    }

    /// Bind a window on QP `qpn` (IBA 10.6.7.2, rxe's `rxe_check_bind_mw`),
    /// with `pd` the QP's protection domain when known. Refused
    /// ([`MemError::WindowRefused`], the window unchanged): a key naming
    /// no live window of `pd`; rights other than remote read, write,
    /// atomic and ZERO_BASED (LOCAL_WRITE is ignored); a non-empty range
    /// not inside a region of the window's protection domain; a region
    /// without MW_BIND; remote write or atomic rights over a region
    /// without LOCAL_WRITE; a type 2 window that is still bound. A type 2
    /// window then belongs to `qpn`.
    pub fn bind_window(&self, b: &WindowBind, pd: Option<u64>, qpn: Qpn) -> Result<(), MemError> {
        let key = b.rkey.value();
        let refuse = MemError::WindowRefused;
        let slot = window_slot(key).ok_or(refuse("the key names no memory window"))?;
        let allowed = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::ZERO_BASED;
        if b.access.bits() & !allowed.bits() != 0 {
            return Err(refuse("rights a memory window cannot grant"));
        }
        let mut binding = None;
        if b.len > 0 {
            let (mr, mr_off) = self
                .locate(MemKey::Local(b.lkey), b.addr, b.len, AccessFlags::EMPTY, pd)
                .map_err(|_| refuse("the range is not inside a region of the QP's domain"))?;
            let r = &self.regions[mr];
            if !r.access.contains(AccessFlags::MW_BIND) {
                return Err(refuse("the region was registered without MW_BIND"));
            }
            if (b.access.contains(AccessFlags::REMOTE_WRITE)
                || b.access.contains(AccessFlags::REMOTE_ATOMIC))
                && !r.access.contains(AccessFlags::LOCAL_WRITE)
            {
                return Err(refuse(
                    "remote write or atomic rights need LOCAL_WRITE on the region",
                ));
            }
            binding = Some((
                r.pd,
                Binding {
                    mr,
                    mr_key: b.lkey.value(),
                    base: b.addr,
                    len: b.len,
                    mr_off,
                    access: AccessFlags(b.access.bits() & !AccessFlags::LOCAL_WRITE.bits()),
                    qpn: None,
                },
            ));
        }
        let mut ws = self.windows();
        let w = match ws.get_mut(slot) {
            Some(w) if w.live => w,
            _ => return Err(refuse("the key names no memory window")),
        };
        if pd.is_some_and(|pd| pd != w.pd) || binding.is_some_and(|(mr_pd, _)| mr_pd != w.pd) {
            return Err(refuse(
                "the window, region and QP are not of one protection domain",
            ));
        }
        let mut binding = binding.map(|(_, b)| b);
        if w.mw_type == MwType::Type2 {
            if w.bound.is_some() {
                return Err(refuse("a bound type 2 window must be invalidated first"));
            }
            if let Some(b) = &mut binding {
                b.qpn = Some(qpn);
            }
        }
        w.key = key;
        w.bound = binding;
        Ok(())
    }

    /// The QP the bound type 2 window named by exactly `key` belongs to.
    pub fn window_qp(&self, key: u32) -> Option<Qpn> {
        let ws = self.windows();
        match window_slot(key).and_then(|i| ws.get(i)) {
            Some(w) if w.live && w.key == key => w.bound.and_then(|b| b.qpn),
            _ => None,
        }
    }

    /// How many windows are bound to the live region `key` names.
    pub fn bound_windows(&self, key: u32) -> usize {
        let Ok(idx) = self.index(key) else {
            return 0;
        };
        self.windows()
            .iter()
            .filter(|w| w.live && w.bound.is_some_and(|b| b.mr == idx && b.mr_key == key))
            .count()
    }

    /// A remote key that failed the region lookup with `e`: the window it
    /// names, checked for state, exact key, `pd`, rights and range, then
    /// mapped into its region (which must still be the one bound and
    /// still hold the range). Out of the hot path of region keys.
    #[cold]
    #[inline(never)]
    fn locate_window(
        &self,
        e: MemError,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
        pd: Option<u64>,
    ) -> Result<(usize, u64), MemError> {
        let (MemKey::Remote(rkey), Some(slot)) = (key, window_slot(key.value())) else {
            return Err(e);
        };
        let k = rkey.value();
        let (b, w_pd) = {
            let ws = self.windows();
            match ws.get(slot) {
                Some(w) if w.live && w.key == k && pd.map_or(true, |pd| pd == w.pd) => {
                    (w.bound.ok_or(MemError::BadKey(k))?, w.pd)
                }
                _ => return Err(MemError::BadKey(k)),
            }
        };
        if !b.access.contains(access) {
            return Err(MemError::AccessDenied {
                needed: access.bits(),
                granted: b.access.bits(),
            });
        }
        let oob = MemError::OutOfBounds { addr, len };
        let off = if b.access.contains(AccessFlags::ZERO_BASED) {
            addr
        } else {
            addr.checked_sub(b.base).ok_or(oob)?
        };
        match off.checked_add(len) {
            Some(end) if end <= b.len => {}
            _ => return Err(oob),
        }
        // The region must still be the one bound, in the window's domain
        // (a re-registration may have moved it), and still hold the range.
        match self.index(b.mr_key) {
            Ok(mr) if mr == b.mr && self.regions[mr].pd == w_pd => {}
            _ => return Err(MemError::BadKey(k)),
        }
        let moff = b.mr_off.checked_add(off).ok_or(oob)?;
        match moff.checked_add(len) {
            Some(end) if end <= self.regions[b.mr].len => Ok((b.mr, moff)),
            _ => Err(oob),
        }
    }

    /// Deregister: the key never matches again; the slot is returned for
    /// the caller to release what backs it. Refused
    /// ([`MemError::WindowsBound`]) while memory windows are bound to the
    /// region, as rxe refuses.
    pub fn deregister(&mut self, key: u32) -> Result<&mut Region<S>, MemError> {
        let idx = self.index(key)?;
        if self.bound_windows(key) > 0 {
            return Err(MemError::WindowsBound(key));
        }
        let r = &mut self.regions[idx];
        r.valid = false;
        Ok(r)
    }
}

/// What backs a region of [`ByteMemory`] or [`LengthMemory`].
#[derive(Debug, Clone, Default)]
struct Store {
    bytes: Vec<u8>,
    /// Length-only memory keeps atomics' values here, ordered for
    /// determinism.
    words: std::collections::BTreeMap<u64, u64>,
}

/// Memory that holds real bytes: regions with keys, bounds and access
/// flags. Used by the UDP emulator and by tests that checksum payloads.
#[derive(Debug, Clone, Default)]
pub struct ByteMemory {
    regions: Regions<Store>,
}

impl ByteMemory {
    /// Empty memory.
    pub fn new() -> ByteMemory {
        ByteMemory::default()
    }

    /// Register `len` zeroed bytes at virtual address `addr`.
    pub fn register(
        &mut self,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Registration, MemError> {
        let store = Store {
            bytes: vec![
                0;
                usize::try_from(len).map_err(|_| {
                    MemError::InvalidRegistration("region larger than the address space")
                })?
            ],
            words: Default::default(),
        };
        self.regions.register(addr, len, access, 0, store)
    }

    /// Deregister: the key never matches again.
    pub fn deregister(&mut self, key: Lkey) -> Result<(), MemError> {
        self.regions.deregister(key.value())?.store = Store::default();
        Ok(())
    }

    /// Allocate an unbound memory window (`ibv_alloc_mw`); its key.
    pub fn alloc_window(&mut self, mw_type: MwType) -> Result<Rkey, MemError> {
        self.regions.alloc_window(0, mw_type)
    }

    /// Free a memory window, bound or not (`ibv_dealloc_mw`).
    pub fn dealloc_window(&mut self, key: Rkey) -> Result<(), MemError> {
        self.regions.dealloc_window(key.value())
    }

    /// The bytes at `[addr, addr + len)` of the region `key` names,
    /// without access checks (the owner's own view).
    pub fn bytes(&self, key: Lkey, addr: u64, len: u64) -> Result<&[u8], MemError> {
        let (idx, off) =
            self.regions
                .locate(MemKey::Local(key), addr, len, AccessFlags::EMPTY, None)?;
        Ok(&self.regions.region(idx).store.bytes[off as usize..(off + len) as usize])
    }

    /// Mutable bytes, without access checks (the owner filling a buffer).
    pub fn bytes_mut(&mut self, key: Lkey, addr: u64, len: u64) -> Result<&mut [u8], MemError> {
        let (idx, off) =
            self.regions
                .locate(MemKey::Local(key), addr, len, AccessFlags::EMPTY, None)?;
        Ok(&mut self.regions.region_mut(idx).store.bytes[off as usize..(off + len) as usize])
    }
}

impl Memory for ByteMemory {
    fn check(&self, key: MemKey, addr: u64, len: u64, access: AccessFlags) -> Result<(), MemError> {
        self.regions
            .locate(key, addr, len, access, None)
            .map(|_| ())
    }

    fn write(&mut self, key: MemKey, addr: u64, data: Payload<'_>) -> Result<(), MemError> {
        let n = data.len() as u64;
        let (idx, off) = self
            .regions
            .locate(key, addr, n, AccessFlags::EMPTY, None)?;
        if let Payload::Bytes(b) = data {
            self.regions.region_mut(idx).store.bytes[off as usize..(off + n) as usize]
                .copy_from_slice(b);
        }
        Ok(())
    }

    fn read(&self, key: MemKey, addr: u64, out: &mut [u8]) -> Result<(), MemError> {
        let n = out.len() as u64;
        let (idx, off) = self
            .regions
            .locate(key, addr, n, AccessFlags::EMPTY, None)?;
        out.copy_from_slice(
            &self.regions.region(idx).store.bytes[off as usize..(off + n) as usize],
        );
        Ok(())
    }

    fn atomic(&mut self, key: MemKey, addr: u64, op: AtomicOp) -> Result<u64, MemError> {
        if addr % 8 != 0 {
            return Err(MemError::Misaligned(addr));
        }
        let (idx, off) = self
            .regions
            .locate(key, addr, 8, AccessFlags::EMPTY, None)?;
        let cell = &mut self.regions.region_mut(idx).store.bytes[off as usize..off as usize + 8];
        let mut word = [0u8; 8];
        word.copy_from_slice(cell);
        let orig = u64::from_ne_bytes(word);
        let new = apply_atomic(orig, op);
        cell.copy_from_slice(&new.to_ne_bytes());
        Ok(orig)
    }

    fn write_u64(&mut self, key: MemKey, addr: u64, value: u64) -> Result<(), MemError> {
        self.write(key, addr, Payload::Bytes(&value.to_ne_bytes()))
    }

    fn invalidate(&mut self, rkey: Rkey) -> Result<(), MemError> {
        self.regions.invalidate(rkey.value(), None)
    }

    fn bind_window(&self, bind: &WindowBind, qpn: Qpn) -> Result<(), MemError> {
        self.regions.bind_window(bind, None, qpn)
    }

    fn invalidate_local(&self, rkey: Rkey) -> Result<(), MemError> {
        self.regions.invalidate(rkey.value(), None)
    }

    fn window_qp(&self, rkey: Rkey) -> Option<Qpn> {
        self.regions.window_qp(rkey.value())
    }

    fn carries_bytes(&self) -> bool {
        true
    }
}

/// Memory that moves lengths only: the same keys, bounds and access checks
/// as [`ByteMemory`], no bytes. Atomics keep their 8-byte values in a small
/// ordered map so that results stay meaningful. Used by the simulator.
#[derive(Debug, Clone, Default)]
pub struct LengthMemory {
    regions: Regions<Store>,
}

impl LengthMemory {
    /// Empty memory.
    pub fn new() -> LengthMemory {
        LengthMemory::default()
    }

    /// Register a region of `len` bytes at `addr` (no bytes are allocated).
    pub fn register(
        &mut self,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Registration, MemError> {
        self.regions
            .register(addr, len, access, 0, Store::default())
    }

    /// Deregister: the key never matches again.
    pub fn deregister(&mut self, key: Lkey) -> Result<(), MemError> {
        self.regions.deregister(key.value())?.store = Store::default();
        Ok(())
    }

    /// Allocate an unbound memory window (`ibv_alloc_mw`); its key.
    pub fn alloc_window(&mut self, mw_type: MwType) -> Result<Rkey, MemError> {
        self.regions.alloc_window(0, mw_type)
    }

    /// Free a memory window, bound or not (`ibv_dealloc_mw`).
    pub fn dealloc_window(&mut self, key: Rkey) -> Result<(), MemError> {
        self.regions.dealloc_window(key.value())
    }

    /// The u64 an atomic or an atomic result left at `addr` (0 if none).
    pub fn word(&self, key: Lkey, addr: u64) -> Result<u64, MemError> {
        let (idx, off) =
            self.regions
                .locate(MemKey::Local(key), addr, 8, AccessFlags::EMPTY, None)?;
        Ok(*self.regions.region(idx).store.words.get(&off).unwrap_or(&0))
    }
}

impl Memory for LengthMemory {
    fn check(&self, key: MemKey, addr: u64, len: u64, access: AccessFlags) -> Result<(), MemError> {
        self.regions
            .locate(key, addr, len, access, None)
            .map(|_| ())
    }

    fn write(&mut self, key: MemKey, addr: u64, data: Payload<'_>) -> Result<(), MemError> {
        self.regions
            .locate(key, addr, data.len() as u64, AccessFlags::EMPTY, None)
            .map(|_| ())
    }

    fn read(&self, key: MemKey, addr: u64, out: &mut [u8]) -> Result<(), MemError> {
        self.regions
            .locate(key, addr, out.len() as u64, AccessFlags::EMPTY, None)
            .map(|_| ())
    }

    fn atomic(&mut self, key: MemKey, addr: u64, op: AtomicOp) -> Result<u64, MemError> {
        if addr % 8 != 0 {
            return Err(MemError::Misaligned(addr));
        }
        let (idx, off) = self
            .regions
            .locate(key, addr, 8, AccessFlags::EMPTY, None)?;
        let words = &mut self.regions.region_mut(idx).store.words;
        let orig = *words.get(&off).unwrap_or(&0);
        words.insert(off, apply_atomic(orig, op));
        Ok(orig)
    }

    fn write_u64(&mut self, key: MemKey, addr: u64, value: u64) -> Result<(), MemError> {
        let (idx, off) = self
            .regions
            .locate(key, addr, 8, AccessFlags::EMPTY, None)?;
        self.regions.region_mut(idx).store.words.insert(off, value);
        Ok(())
    }

    fn invalidate(&mut self, rkey: Rkey) -> Result<(), MemError> {
        self.regions.invalidate(rkey.value(), None)
    }

    fn bind_window(&self, bind: &WindowBind, qpn: Qpn) -> Result<(), MemError> {
        self.regions.bind_window(bind, None, qpn)
    }

    fn invalidate_local(&self, rkey: Rkey) -> Result<(), MemError> {
        self.regions.invalidate(rkey.value(), None)
    }

    fn window_qp(&self, rkey: Rkey) -> Option<Qpn> {
        self.regions.window_qp(rkey.value())
    }

    fn carries_bytes(&self) -> bool {
        false
    }
}

fn apply_atomic(orig: u64, op: AtomicOp) -> u64 {
    match op {
        AtomicOp::CompareSwap { compare, swap } => {
            if orig == compare {
                swap
            } else {
                orig
            }
        }
        AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reregistration_keeps_keys_and_moves_range_rights_and_pd() {
        let mut t: Regions<u8> = Regions::default();
        let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let r = t.register(0x1000, 64, rw, 1, 7).unwrap();
        let k = MemKey::Remote(r.rkey);
        let key = r.lkey.value();
        // Rights: REMOTE_WRITE dropped, the same key now refuses a write.
        assert_eq!(
            t.reregister(key, None, Some(AccessFlags::LOCAL_WRITE), None),
            Ok(None)
        );
        assert!(matches!(
            t.locate(k, 0x1000, 8, AccessFlags::REMOTE_WRITE, Some(1)),
            Err(MemError::AccessDenied { .. })
        ));
        // A refused combination changes nothing.
        assert!(t
            .reregister(key, None, Some(AccessFlags::REMOTE_WRITE), None)
            .is_err());
        assert_eq!(
            t.region(t.index(key).unwrap()).access,
            AccessFlags::LOCAL_WRITE
        );
        // PD: the key names nothing in the old PD, its region in the new.
        t.reregister(key, None, Some(rw), Some(2)).unwrap();
        assert_eq!(
            t.locate(k, 0x1000, 8, AccessFlags::REMOTE_WRITE, Some(1)),
            Err(MemError::BadKey(key))
        );
        assert_eq!(
            t.locate(k, 0x1010, 8, AccessFlags::REMOTE_WRITE, Some(2)),
            Ok((0, 0x10))
        );
        // Translation: the old range is out of bounds, the new one in,
        // and the old store comes back for release.
        assert_eq!(
            t.reregister(key, Some((0x8000, 32, 9)), None, None),
            Ok(Some(7))
        );
        assert!(matches!(
            t.locate(k, 0x1000, 8, AccessFlags::REMOTE_WRITE, Some(2)),
            Err(MemError::OutOfBounds { .. })
        ));
        assert_eq!(
            t.locate(k, 0x8018, 8, AccessFlags::REMOTE_WRITE, Some(2)),
            Ok((0, 0x18))
        );
        assert_eq!(t.region(0).store, 9);
        // A dead key cannot be re-registered.
        t.deregister(key).unwrap();
        assert_eq!(
            t.reregister(key, None, None, None),
            Err(MemError::BadKey(key))
        );
    }

    #[test]
    fn keys_bounds_and_rights_are_checked_by_both_memories() {
        let mut b = ByteMemory::new();
        let mut l = LengthMemory::new();
        let rb = b
            .register(
                0x1000,
                64,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        let rl = l
            .register(
                0x1000,
                64,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        for (mem, r) in [
            (&mut b as &mut dyn Memory, rb),
            (&mut l as &mut dyn Memory, rl),
        ] {
            let k = MemKey::Remote(r.rkey);
            assert!(mem.check(k, 0x1000, 64, AccessFlags::REMOTE_WRITE).is_ok());
            assert!(matches!(
                mem.check(k, 0x1001, 64, AccessFlags::REMOTE_WRITE),
                Err(MemError::OutOfBounds { .. })
            ));
            assert!(matches!(
                mem.check(k, 0x1000, 8, AccessFlags::REMOTE_READ),
                Err(MemError::AccessDenied { .. })
            ));
            assert_eq!(
                mem.check(MemKey::Remote(Rkey::new(0)), 0x1000, 1, AccessFlags::EMPTY),
                Err(MemError::BadKey(0))
            );
            // A peer cannot invalidate a plain MR: it stays usable.
            assert_eq!(
                mem.invalidate(r.rkey),
                Err(MemError::NotInvalidatable(r.rkey.value()))
            );
            assert!(mem.check(k, 0x1000, 1, AccessFlags::EMPTY).is_ok());
            assert_eq!(mem.invalidate(Rkey::new(0)), Err(MemError::BadKey(0)));
        }
    }

    #[test]
    fn a_freed_slot_comes_back_under_a_new_key_and_the_old_key_is_dead() {
        let mut b = ByteMemory::new();
        let r1 = b.register(0x1000, 64, AccessFlags::ALL).unwrap();
        let keep = b.register(0x2000, 64, AccessFlags::ALL).unwrap();
        b.deregister(r1.lkey).unwrap();
        assert_eq!(
            b.check(MemKey::Remote(r1.rkey), 0x1000, 1, AccessFlags::EMPTY),
            Err(MemError::BadKey(r1.rkey.value()))
        );
        assert!(b.deregister(r1.lkey).is_err(), "twice");
        let r2 = b.register(0x3000, 64, AccessFlags::ALL).unwrap();
        // Same slot (index), next generation.
        assert_eq!(r2.lkey.value() >> 8, r1.lkey.value() >> 8);
        assert_ne!(r2.lkey, r1.lkey);
        assert!(b
            .check(MemKey::Local(r1.lkey), 0x3000, 1, AccessFlags::EMPTY)
            .is_err());
        assert!(b
            .check(MemKey::Local(r2.lkey), 0x3000, 64, AccessFlags::ALL)
            .is_ok());
        assert_eq!(b.bytes(r2.lkey, 0x3000, 4).unwrap(), &[0; 4], "fresh bytes");
        assert!(b
            .check(MemKey::Local(keep.lkey), 0x2000, 64, AccessFlags::ALL)
            .is_ok());
    }

    #[test]
    fn protection_domains_are_checked_by_the_table() {
        let mut t: Regions<()> = Regions::default();
        let r = t.register(0x1000, 64, AccessFlags::ALL, 7, ()).unwrap();
        let k = MemKey::Remote(r.rkey);
        assert!(t
            .locate(k, 0x1000, 8, AccessFlags::REMOTE_READ, Some(7))
            .is_ok());
        assert!(t
            .locate(k, 0x1000, 8, AccessFlags::REMOTE_READ, None)
            .is_ok());
        assert_eq!(
            t.locate(k, 0x1000, 8, AccessFlags::REMOTE_READ, Some(8)),
            Err(MemError::BadKey(r.rkey.value()))
        );
        assert_eq!(
            t.invalidate(r.rkey.value(), Some(8)),
            Err(MemError::BadKey(r.rkey.value()))
        );
        assert_eq!(
            t.invalidate(r.rkey.value(), Some(7)),
            Err(MemError::NotInvalidatable(r.rkey.value()))
        );
    }

    #[test]
    fn remote_write_without_local_write_is_refused() {
        let mut b = ByteMemory::new();
        assert!(b.register(0, 8, AccessFlags::REMOTE_WRITE).is_err());
    }

    #[test]
    fn the_whole_address_space_is_one_region_without_overflow() {
        // Implicit ODP: rdma-core registers address 0, length SIZE_MAX.
        let mut t: Regions<()> = Regions::default();
        let odp = AccessFlags::ALL | AccessFlags::ON_DEMAND;
        let r = t.register(0, u64::MAX, odp, 1, ()).unwrap();
        let k = MemKey::Remote(r.rkey);
        let need = AccessFlags::REMOTE_WRITE;
        assert_eq!(
            t.locate(k, 0x7fff_1234_5678, 64, need, Some(1)),
            Ok((0, 0x7fff_1234_5678))
        );
        assert_eq!(t.locate(k, 0, 0, need, Some(1)), Ok((0, 0)));
        assert_eq!(
            t.locate(k, u64::MAX - 8, 8, need, Some(1)),
            Ok((0, u64::MAX - 8))
        );
        // A range that would wrap past the end is out of bounds, not a
        // wrapped offset.
        for (addr, len) in [(u64::MAX - 8, 9), (u64::MAX, u64::MAX), (1, u64::MAX)] {
            assert_eq!(
                t.locate(k, addr, len, need, Some(1)),
                Err(MemError::OutOfBounds { addr, len })
            );
        }
        // One byte more than the address space wraps and is refused.
        assert!(t.register(1, u64::MAX, odp, 1, ()).is_err());
        // Re-registered in place (rights only), it still spans everything.
        assert_eq!(
            t.reregister(r.lkey.value(), None, Some(odp), None),
            Ok(None)
        );
        assert!(t.locate(k, u64::MAX - 1, 1, need, None).is_ok());
    }

    #[test]
    fn atomics_compute_in_both_memories() {
        let mut b = ByteMemory::new();
        let r = b.register(0, 16, AccessFlags::ALL).unwrap();
        let k = MemKey::Remote(r.rkey);
        assert_eq!(b.atomic(k, 8, AtomicOp::FetchAdd { add: 5 }), Ok(0));
        assert_eq!(
            b.atomic(
                k,
                8,
                AtomicOp::CompareSwap {
                    compare: 5,
                    swap: 9
                }
            ),
            Ok(5)
        );
        assert_eq!(b.bytes(r.lkey, 8, 8).unwrap(), &9u64.to_ne_bytes());
        assert_eq!(
            b.atomic(k, 4, AtomicOp::FetchAdd { add: 1 }),
            Err(MemError::Misaligned(4))
        );
        let mut l = LengthMemory::new();
        let r = l.register(0, 16, AccessFlags::ALL).unwrap();
        let k = MemKey::Remote(r.rkey);
        assert_eq!(l.atomic(k, 8, AtomicOp::FetchAdd { add: 5 }), Ok(0));
        assert_eq!(l.word(r.lkey, 8), Ok(5));
    }
}
