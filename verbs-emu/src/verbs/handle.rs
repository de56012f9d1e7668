//! Handles: the opaque names a backend gives its objects.
//!
//! A handle is a plain `u64` chosen by the backend that made the object
//! ([`crate::backend::Backend`]); the verbs types carry them (an address
//! handle in a UD work request, the CQs of a QP's creation attributes) and
//! the backend trait takes and returns them. Contract: a handle means
//! something only to the backend that issued it; a destroyed or foreign
//! handle is an `UnknownHandle` error, never undefined behaviour. This file
//! depends on nothing else in the crate, so both the verbs vocabulary and
//! the backend interface can sit on it.

macro_rules! handle {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);
    )*};
}

handle! {
    /// A protection domain of one backend.
    PdHandle;
    /// A memory region of one backend.
    MrHandle;
    /// A completion queue of one backend.
    CqHandle;
    /// A queue pair of one backend.
    QpHandle;
    /// An address handle of one backend.
    AhHandle;
    /// An allocation of one backend's device memory (`ibv_alloc_dm`).
    DmHandle;
}
