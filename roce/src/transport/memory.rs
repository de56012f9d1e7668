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
//! Nothing here panics on network input: every failure is a [`MemError`].

use crate::wire::{Lkey, Rkey};

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
/// 256 times, as on rxe), and key 0 is never valid.
#[derive(Debug, Clone)]
pub struct Regions<S> {
    regions: Vec<Region<S>>,
}

impl<S> Default for Regions<S> {
    fn default() -> Self {
        Regions {
            regions: Vec::new(),
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
        if slot.is_none() && self.regions.len() >= (1 << 24) - 1 {
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
        let idx = self.index(key.value())?;
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

    /// A peer's SEND with Invalidate: only memory windows and
    /// fast-registration MRs may be invalidated remotely (IBA 10.6.7,
    /// ROCEV2.md §5.4), and these tables hold plain MRs only, so a valid
    /// key (of `pd`, when given) is refused and stays registered.
    pub fn invalidate(&self, key: u32, pd: Option<u64>) -> Result<(), MemError> {
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

    /// Deregister: the key never matches again; the slot is returned for
    /// the caller to release what backs it.
    pub fn deregister(&mut self, key: u32) -> Result<&mut Region<S>, MemError> {
        let idx = self.index(key)?;
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
