//! `value_enum!`: an enum of rdma-core values with their numbers and
//! strings (`value`, `from_value`, `as_str`, `Display`), shared by the
//! verbs API and the transport engine so that both speak one type.

macro_rules! value_enum {
    ($(#[$m:meta])* $name:ident { $( $(#[$vm:meta])* $var:ident = $val:expr, $text:expr; )* }) => {
        $(#[$m])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        #[repr(u32)]
        pub enum $name {
            $( $(#[$vm])* $var = $val, )*
        }

        impl $name {
            /// The rdma-core value.
            pub const fn value(self) -> u32 {
                self as u32
            }
            /// From the rdma-core value.
            pub const fn from_value(v: u32) -> Option<$name> {
                match v {
                    $( $val => Some($name::$var), )*
                    _ => None,
                }
            }
            /// rdma-core's string for it.
            pub const fn as_str(self) -> &'static str {
                match self { $( $name::$var => $text, )* }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
