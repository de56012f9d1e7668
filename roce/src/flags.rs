//! `flags!`: a bit-set newtype with rdma-core's values (the `ibv_*_flags`
//! and masks), with the set operations and names for messages. One macro
//! for every flag type of the core and of the verbs API (which invokes it
//! as `roce::flags!`), so they all behave alike.

/// Defines a bit-set newtype over an integer with named flag constants,
/// set operations and the names of set bits (see the module docs).
#[macro_export]
macro_rules! flags {
    ($(#[$m:meta])* $name:ident: $repr:ty { $( $(#[$fm:meta])* $flag:ident = $val:expr, )* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, ::serde::Serialize, ::serde::Deserialize)]
        pub struct $name(pub $repr);

        impl $name {
            $( $(#[$fm])* pub const $flag: $name = $name($val); )*
            /// No flag set.
            pub const EMPTY: $name = $name(0);

            /// The raw bits, as rdma-core defines them.
            pub const fn bits(self) -> $repr {
                self.0
            }
            /// True when every bit of `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }
            /// True when any bit of `other` is set in `self`.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }
            /// True when no bit is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            /// `self` without the bits of `other`.
            #[must_use]
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }
            /// Names of the set bits, for messages.
            pub fn names(self) -> Vec<&'static str> {
                let mut v = Vec::new();
                $( if $val != 0 && self.contains($name($val)) { v.push(stringify!($flag)); } )*
                v
            }
        }

        impl core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }

        impl core::ops::BitAnd for $name {
            type Output = $name;
            fn bitand(self, rhs: $name) -> $name {
                $name(self.0 & rhs.0)
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.names().join(" | "))
            }
        }
    };
}
