//! Integer time, rates and sizes.
//!
//! Time is `u64` picoseconds everywhere (architecture contract: no float
//! time). [`Instant`] is a point on a clock that starts at zero (virtual time
//! in the simulator, time since the backend started in the emulator);
//! [`Duration`] is a span. `u64` picoseconds reach about 213 days.
//!
//! Operators (`+`, `-`) panic on overflow like `std`'s; the `checked_*`
//! methods return `None` instead. Parsing accepts the forms users write in
//! files: `"1.5us"`, `"10ms"`, `"2s"`, `"250ns"`, `"100ps"`, `"1 ms"`.
//!
//! [`Rate`] is bits per second (`"100Gbps"`, `"25G"`, `"400Mbit/s"`): rate
//! prefixes are decimal (G = 10^9), as link rates are. [`Size`] is bytes:
//! `KiB`/`MiB`/`GiB` are binary (2^10...), `KB`/`MB`/`GB` (and `K`, `M`,
//! `G`) are decimal (10^3...), `B` or a bare number is bytes.
//!
//! In files, durations, rates and sizes are strings with their unit
//! (serde reads and writes [`Duration::exact`] and friends). A plain
//! integer is read as the base unit (picoseconds, bits per second, bytes)
//! by default, as machine-written files may hold one; in files people
//! write, a time or a rate without its unit is a mistake (`duration = 20`
//! would be 20 ps), so a loader of such files decodes inside
//! [`with_units_required`]: there a nonzero bare number (or, for a rate,
//! a string without a unit) for a [`Duration`] or [`Rate`] is an error
//! that names the units the value takes. Sizes keep bare numbers as bytes.

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::str::FromStr;

/// Picoseconds per nanosecond, microsecond, millisecond and second.
const PS_PER_NS: u64 = 1_000;
const PS_PER_US: u64 = 1_000_000;
const PS_PER_MS: u64 = 1_000_000_000;
const PS_PER_S: u64 = 1_000_000_000_000;

/// A span of time in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

/// A point in time: picoseconds since the clock's zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Duration {
    /// Zero.
    pub const ZERO: Duration = Duration(0);
    /// The largest span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// From picoseconds.
    pub const fn from_ps(ps: u64) -> Duration {
        Duration(ps)
    }
    /// From nanoseconds (saturating).
    pub const fn from_ns(ns: u64) -> Duration {
        Duration(ns.saturating_mul(PS_PER_NS))
    }
    /// From microseconds (saturating).
    pub const fn from_us(us: u64) -> Duration {
        Duration(us.saturating_mul(PS_PER_US))
    }
    /// From milliseconds (saturating).
    pub const fn from_ms(ms: u64) -> Duration {
        Duration(ms.saturating_mul(PS_PER_MS))
    }
    /// From seconds (saturating).
    pub const fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(PS_PER_S))
    }
    /// In picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// In whole nanoseconds (truncated).
    pub const fn as_ns(self) -> u64 {
        self.0 / PS_PER_NS
    }
    /// In whole microseconds (truncated).
    pub const fn as_us(self) -> u64 {
        self.0 / PS_PER_US
    }
    /// As float seconds, for display and reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }
    /// `self + rhs`, or `None` on overflow.
    pub const fn checked_add(self, rhs: Duration) -> Option<Duration> {
        match self.0.checked_add(rhs.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self - rhs`, or `None` when negative.
    pub const fn checked_sub(self, rhs: Duration) -> Option<Duration> {
        match self.0.checked_sub(rhs.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self * n`, or `None` on overflow.
    pub const fn checked_mul(self, n: u64) -> Option<Duration> {
        match self.0.checked_mul(n) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self - rhs`, or zero.
    pub const fn saturating_sub(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
    /// `self * n`, saturating.
    pub const fn saturating_mul(self, n: u64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
    /// Convert to `std::time::Duration` (for real-time backends).
    pub const fn to_std(self) -> std::time::Duration {
        std::time::Duration::new(self.0 / PS_PER_S, ((self.0 % PS_PER_S) / PS_PER_NS) as u32)
    }
    /// Convert from `std::time::Duration` (saturating).
    pub fn from_std(d: std::time::Duration) -> Duration {
        let ps = d.as_nanos().saturating_mul(PS_PER_NS as u128);
        Duration(u64::try_from(ps).unwrap_or(u64::MAX))
    }
}

impl Instant {
    /// The clock's zero.
    pub const ZERO: Instant = Instant(0);
    /// The end of time (a deadline that never comes).
    pub const MAX: Instant = Instant(u64::MAX);

    /// From picoseconds since zero.
    pub const fn from_ps(ps: u64) -> Instant {
        Instant(ps)
    }
    /// Picoseconds since zero.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// The span since zero.
    pub const fn since_zero(self) -> Duration {
        Duration(self.0)
    }
    /// `self + d`, or `None` on overflow.
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        match self.0.checked_add(d.0) {
            Some(v) => Some(Instant(v)),
            None => None,
        }
    }
    /// `self - d`, or `None` before zero.
    pub const fn checked_sub(self, d: Duration) -> Option<Instant> {
        match self.0.checked_sub(d.0) {
            Some(v) => Some(Instant(v)),
            None => None,
        }
    }
    /// `self + d`, saturating at [`Instant::MAX`].
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
    /// The span from `earlier` to `self`, or `None` if `earlier` is later.
    pub const fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// The span from `earlier` to `self`, or zero.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        self.checked_add(rhs)
            .expect("overflow when adding durations")
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        self.checked_sub(rhs)
            .expect("overflow when subtracting durations")
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}
impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.checked_add(rhs)
            .expect("overflow when adding duration to instant")
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        self.checked_sub(rhs)
            .expect("overflow when subtracting duration from instant")
    }
}
impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.checked_duration_since(rhs)
            .expect("instant is earlier than the one subtracted")
    }
}

/// Write `v` (an amount of `unit`-sized parts) with up to three decimals,
/// trailing zeros removed.
fn write_scaled(f: &mut fmt::Formatter<'_>, v: u64, unit: u64, suffix: &str) -> fmt::Result {
    let whole = v / unit;
    let frac = v % unit;
    if frac == 0 {
        return write!(f, "{whole}{suffix}");
    }
    // Three decimals, rounded down: display only.
    let milli = (frac as u128 * 1000 / unit as u128) as u64;
    let mut s = format!("{whole}.{milli:03}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    write!(f, "{s}{suffix}")
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        if ps >= PS_PER_S {
            write_scaled(f, ps, PS_PER_S, "s")
        } else if ps >= PS_PER_MS {
            write_scaled(f, ps, PS_PER_MS, "ms")
        } else if ps >= PS_PER_US {
            write_scaled(f, ps, PS_PER_US, "us")
        } else if ps >= PS_PER_NS {
            write_scaled(f, ps, PS_PER_NS, "ns")
        } else {
            write!(f, "{ps}ps")
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}", Duration(self.0))
    }
}

/// Why a time, rate or size string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {input:?}: expected {expected}")]
pub struct ParseError {
    kind: &'static str,
    input: String,
    expected: &'static str,
}

impl ParseError {
    fn new(kind: &'static str, input: &str, expected: &'static str) -> ParseError {
        ParseError {
            kind,
            input: input.to_string(),
            expected,
        }
    }
}

/// Split `"1.5us"` into the decimal number and the unit, and return the
/// number times `scale(unit)` exactly (integer arithmetic, at most 12
/// decimals). `None` on any malformed input or overflow.
fn parse_scaled(s: &str, scale: impl Fn(&str) -> Option<u64>) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    let mult = scale(unit)?;
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return None;
    }
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    if frac_part.contains('.')
        || frac_part.len() > 12
        || (int_part.is_empty() && frac_part.is_empty())
    {
        return None;
    }
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    let mut total = int.checked_mul(mult as u128)?;
    if !frac_part.is_empty() {
        let frac: u128 = frac_part.parse().ok()?;
        let denom = 10u128.pow(frac_part.len() as u32);
        let scaled = frac.checked_mul(mult as u128)?;
        if scaled % denom != 0 {
            // Finer than the base unit: not representable exactly.
            return None;
        }
        total = total.checked_add(scaled / denom)?;
    }
    u64::try_from(total).ok()
}

impl FromStr for Duration {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Duration, ParseError> {
        parse_scaled(s, |unit| match unit {
            "ps" => Some(1),
            "ns" => Some(PS_PER_NS),
            "us" | "µs" => Some(PS_PER_US),
            "ms" => Some(PS_PER_MS),
            "s" => Some(PS_PER_S),
            _ => None,
        })
        .map(Duration)
        .ok_or_else(|| {
            ParseError::new(
                "duration",
                s,
                "a number with a unit ps, ns, us, ms or s, e.g. \"1.5us\"",
            )
        })
    }
}

/// A data rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

impl Rate {
    /// From bits per second.
    pub const fn from_bps(bps: u64) -> Rate {
        Rate(bps)
    }
    /// From gigabits per second.
    pub const fn from_gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Time to serialise `bytes` at this rate, rounded up to a whole
    /// picosecond. A zero rate gives [`Duration::MAX`].
    pub const fn serialization_time(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        let bits = bytes as u128 * 8 * PS_PER_S as u128;
        let ps = bits.div_ceil(self.0 as u128);
        if ps > u64::MAX as u128 {
            Duration::MAX
        } else {
            Duration(ps as u64)
        }
    }
    /// Bytes that pass in `d` at this rate (rounded down).
    pub const fn bytes_in(self, d: Duration) -> u64 {
        let b = self.0 as u128 * d.0 as u128 / (8 * PS_PER_S as u128);
        if b > u64::MAX as u128 {
            u64::MAX
        } else {
            b as u64
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v >= 1_000_000_000 {
            write_scaled(f, v, 1_000_000_000, "Gbps")
        } else if v >= 1_000_000 {
            write_scaled(f, v, 1_000_000, "Mbps")
        } else if v >= 1_000 {
            write_scaled(f, v, 1_000, "Kbps")
        } else {
            write!(f, "{v}bps")
        }
    }
}

impl FromStr for Rate {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Rate, ParseError> {
        parse_scaled(s, |unit| {
            let lower = unit.to_ascii_lowercase();
            let prefix = lower
                .strip_suffix("bps")
                .or_else(|| lower.strip_suffix("bit/s"))
                .or_else(|| lower.strip_suffix("b/s"))
                .or_else(|| lower.strip_suffix("bit"))
                .unwrap_or(&lower);
            match prefix {
                "" => Some(1),
                "k" => Some(1_000),
                "m" => Some(1_000_000),
                "g" => Some(1_000_000_000),
                "t" => Some(1_000_000_000_000),
                _ => None,
            }
        })
        .map(Rate)
        .ok_or_else(|| {
            ParseError::new(
                "rate",
                s,
                "bits per second with a decimal prefix, e.g. \"100Gbps\" or \"25G\"",
            )
        })
    }
}

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(u64);

impl Size {
    /// From bytes.
    pub const fn from_bytes(b: u64) -> Size {
        Size(b)
    }
    /// Bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v >= 1 << 30 && v % (1 << 20) == 0 {
            write_scaled(f, v, 1 << 30, "GiB")
        } else if v >= 1 << 20 && v % (1 << 10) == 0 {
            write_scaled(f, v, 1 << 20, "MiB")
        } else if v >= 1 << 10 && v % (1 << 10) == 0 {
            write_scaled(f, v, 1 << 10, "KiB")
        } else {
            write!(f, "{v}B")
        }
    }
}

impl FromStr for Size {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Size, ParseError> {
        parse_scaled(s, |unit| match unit {
            "" | "B" => Some(1),
            "KiB" => Some(1 << 10),
            "MiB" => Some(1 << 20),
            "GiB" => Some(1 << 30),
            "TiB" => Some(1 << 40),
            "K" | "KB" | "kB" => Some(1_000),
            "M" | "MB" => Some(1_000_000),
            "G" | "GB" => Some(1_000_000_000),
            "T" | "TB" => Some(1_000_000_000_000),
            _ => None,
        })
        .map(Size)
        .ok_or_else(|| ParseError::new("size", s, "bytes with a unit B, KiB, MiB, GiB (binary) or KB, MB, GB (decimal), e.g. \"4KiB\""))
    }
}

/// The value in the largest of `units` that divides it exactly, e.g.
/// `"1500ns"` rather than the rounded display form: what files get, so that
/// a value written out reads back identical.
fn exact_string(v: u64, units: &[(u64, &str)], base: &str) -> String {
    for &(scale, suffix) in units {
        if v != 0 && v % scale == 0 {
            return format!("{}{suffix}", v / scale);
        }
    }
    format!("{v}{base}")
}

impl Duration {
    /// Exact text form (`"1500ns"`, `"10ms"`), parsed back without loss.
    pub fn exact(self) -> String {
        exact_string(
            self.0,
            &[
                (PS_PER_S, "s"),
                (PS_PER_MS, "ms"),
                (PS_PER_US, "us"),
                (PS_PER_NS, "ns"),
            ],
            "ps",
        )
    }
}

impl Rate {
    /// Exact text form (`"100Gbps"`, `"2500Mbps"`), parsed back without loss.
    pub fn exact(self) -> String {
        exact_string(
            self.0,
            &[
                (1_000_000_000_000, "Tbps"),
                (1_000_000_000, "Gbps"),
                (1_000_000, "Mbps"),
                (1_000, "Kbps"),
            ],
            "bps",
        )
    }
}

impl Size {
    /// Exact text form (`"4KiB"`, `"1000001B"`), parsed back without loss.
    pub fn exact(self) -> String {
        exact_string(
            self.0,
            &[(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")],
            "B",
        )
    }
}

/// The units a duration takes, as errors name them.
const DURATION_UNITS: &str = "ps, ns, us, ms or s";
/// The units a rate takes, as errors name them.
const RATE_UNITS: &str = "bps, Kbps, Mbps, Gbps or Tbps (or K, M, G, T)";

thread_local! {
    /// Whether serde reads on this thread refuse bare numbers for
    /// durations and rates (see [`with_units_required`]).
    static UNITS_REQUIRED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Run `f` (a decoding of a file people write: scenarios, topologies,
/// command-line settings) with bare numbers refused for durations and
/// rates: a nonzero integer, a float, or a rate string without a unit
/// (`"25"`) is an error naming the units the value takes, instead of
/// being read as picoseconds or bits per second. A bare `0` is zero in
/// every unit and stays. Applies to the current thread for the duration
/// of `f`, nests, and is undone when `f` returns or unwinds.
pub fn with_units_required<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            UNITS_REQUIRED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(UNITS_REQUIRED.with(|c| c.replace(true)));
    f()
}

/// Whether bare numbers are refused on this thread now.
fn units_required() -> bool {
    UNITS_REQUIRED.with(|c| c.get())
}

/// The error for a number written without a unit.
fn no_unit(number: &str, what: &str, units: &str, example: &str) -> String {
    format!("{number} has no unit: expected a {what} with its unit, one of {units} (e.g. \"{example}\")")
}

/// serde support: durations, rates and sizes are strings in files
/// (`"1.5us"`), and plain integers are accepted as base units except
/// inside [`with_units_required`], where a nonzero one is refused for
/// durations and rates.
mod serde_impls {
    use super::*;
    use serde::de::{self, Deserializer, Visitor};
    use serde::{Deserialize, Serialize, Serializer};

    /// What a unit-bearing type needs to read numbers: its name, its
    /// units, an example with the number, and whether bare numbers may be
    /// refused (durations and rates; sizes are bytes).
    trait Units {
        const WHAT: &'static str;
        const UNITS: &'static str;
        const STRICT: bool;
        fn example(n: &str) -> String;
    }
    impl Units for Duration {
        const WHAT: &'static str = "duration";
        const UNITS: &'static str = DURATION_UNITS;
        const STRICT: bool = true;
        fn example(n: &str) -> String {
            format!("{n}us")
        }
    }
    impl Units for Rate {
        const WHAT: &'static str = "rate";
        const UNITS: &'static str = RATE_UNITS;
        const STRICT: bool = true;
        fn example(n: &str) -> String {
            format!("{n}Gbps")
        }
    }
    impl Units for Size {
        const WHAT: &'static str = "size";
        const UNITS: &'static str = "B, KiB, MiB, GiB, KB, MB or GB";
        const STRICT: bool = false;
        fn example(n: &str) -> String {
            format!("{n}KB")
        }
    }

    /// A bare number refused: `Some(error)` when `T` needs its unit here.
    fn refused<T: Units>(number: &str, zero: bool) -> Option<String> {
        (T::STRICT && !zero && units_required())
            .then(|| no_unit(number, T::WHAT, T::UNITS, &T::example(number)))
    }

    macro_rules! string_serde {
        ($ty:ident, $ctor:expr, $what:expr) => {
            impl Serialize for $ty {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.serialize_str(&self.exact())
                }
            }
            impl<'de> Deserialize<'de> for $ty {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                    struct V;
                    impl Visitor<'_> for V {
                        type Value = $ty;
                        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                            f.write_str($what)
                        }
                        fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                            let t = v.trim();
                            if !t.is_empty()
                                && t.chars()
                                    .all(|c| c.is_ascii_digit() || c == '.' || c == '_')
                            {
                                let zero = t.chars().all(|c| !c.is_ascii_digit() || c == '0');
                                if let Some(e) = refused::<$ty>(t, zero) {
                                    return Err(E::custom(e));
                                }
                            }
                            v.parse().map_err(E::custom)
                        }
                        fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                            if let Some(e) = refused::<$ty>(&v.to_string(), v == 0) {
                                return Err(E::custom(e));
                            }
                            Ok($ctor(v))
                        }
                        fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                            match u64::try_from(v) {
                                Ok(v) => self.visit_u64(v),
                                Err(_) => Err(E::custom(concat!("negative ", $what))),
                            }
                        }
                        fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                            Err(E::custom(no_unit(
                                &v.to_string(),
                                <$ty as Units>::WHAT,
                                <$ty as Units>::UNITS,
                                &<$ty as Units>::example(&v.to_string()),
                            )))
                        }
                    }
                    d.deserialize_any(V)
                }
            }
        };
    }

    string_serde!(Duration, Duration::from_ps, "a duration such as \"1.5us\"");
    string_serde!(Rate, Rate::from_bps, "a rate such as \"100Gbps\"");
    string_serde!(Size, Size::from_bytes, "a size such as \"4KiB\"");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(
            "1.5us".parse::<Duration>().unwrap(),
            Duration::from_ns(1500)
        );
        assert_eq!("10ms".parse::<Duration>().unwrap(), Duration::from_ms(10));
        assert_eq!("2s".parse::<Duration>().unwrap(), Duration::from_secs(2));
        assert_eq!(
            "250 ns".parse::<Duration>().unwrap(),
            Duration::from_ns(250)
        );
        assert_eq!("7ps".parse::<Duration>().unwrap(), Duration::from_ps(7));
        assert!("1.0005ns".parse::<Duration>().is_err());
        assert!("10".parse::<Duration>().is_err());
        assert!("ms".parse::<Duration>().is_err());
        assert!("1..2us".parse::<Duration>().is_err());
        assert!("99999999999s".parse::<Duration>().is_err());
    }

    #[test]
    fn durations_display_in_human_units() {
        assert_eq!(Duration::from_ns(1500).to_string(), "1.5us");
        assert_eq!(Duration::from_ms(10).to_string(), "10ms");
        assert_eq!(Duration::from_ps(999).to_string(), "999ps");
        assert_eq!(Duration::from_ps(4_096_000).to_string(), "4.096us");
    }

    #[test]
    fn checked_arithmetic_reports_overflow() {
        assert_eq!(Duration::MAX.checked_add(Duration::from_ps(1)), None);
        assert_eq!(Instant::ZERO.checked_sub(Duration::from_ps(1)), None);
        assert_eq!(
            Instant::from_ps(5) - Instant::from_ps(2),
            Duration::from_ps(3)
        );
    }

    #[test]
    fn rates_are_decimal() {
        assert_eq!("100Gbps".parse::<Rate>().unwrap(), Rate::from_gbps(100));
        assert_eq!("25G".parse::<Rate>().unwrap(), Rate::from_gbps(25));
        assert_eq!(
            "400Mbit/s".parse::<Rate>().unwrap(),
            Rate::from_bps(400_000_000)
        );
        assert!("fast".parse::<Rate>().is_err());
        // 1000 bytes at 100 Gbit/s: 80 ns.
        assert_eq!(
            Rate::from_gbps(100).serialization_time(1000),
            Duration::from_ns(80)
        );
        assert_eq!(Rate::from_gbps(100).bytes_in(Duration::from_ns(80)), 1000);
    }

    #[test]
    fn exact_forms_read_back_without_loss() {
        for ps in [
            0,
            1,
            999,
            1_500_000,
            4_096_000,
            10_000_000_000,
            123_456_789_012_345,
        ] {
            let d = Duration::from_ps(ps);
            assert_eq!(d.exact().parse::<Duration>().unwrap(), d, "{}", d.exact());
        }
        for b in [0, 1, 4096, 32_000_000, 1 << 30, 1_048_577] {
            let s = Size::from_bytes(b);
            assert_eq!(s.exact().parse::<Size>().unwrap(), s, "{}", s.exact());
        }
        for bps in [0, 25_000_000_000, 2_500_000_000, 1_234_567] {
            let r = Rate::from_bps(bps);
            assert_eq!(r.exact().parse::<Rate>().unwrap(), r, "{}", r.exact());
        }
        assert_eq!(Size::from_bytes(32_000_000).exact(), "31250KiB");
        assert_eq!(Duration::from_ns(1500).exact(), "1500ns");
        let json = serde_json::to_string(&Size::from_bytes(32_000_000)).unwrap();
        assert_eq!(
            serde_json::from_str::<Size>(&json).unwrap(),
            Size::from_bytes(32_000_000)
        );
    }

    #[test]
    fn bare_numbers_are_refused_only_where_units_are_required() {
        // Machine files: a plain integer is the base unit.
        assert_eq!(
            serde_json::from_str::<Duration>("20").unwrap(),
            Duration::from_ps(20)
        );
        assert_eq!(
            serde_json::from_str::<Rate>("\"25\"").unwrap(),
            Rate::from_bps(25)
        );
        with_units_required(|| {
            let e = serde_json::from_str::<Duration>("20")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("20 has no unit") && e.contains("ps, ns, us, ms or s"),
                "{e}"
            );
            let e = serde_json::from_str::<Rate>("100").unwrap_err().to_string();
            assert!(e.contains("Gbps"), "{e}");
            let e = serde_json::from_str::<Rate>("\"25\"")
                .unwrap_err()
                .to_string();
            assert!(e.contains("25 has no unit"), "{e}");
            let e = serde_json::from_str::<Duration>("2.5")
                .unwrap_err()
                .to_string();
            assert!(e.contains("2.5 has no unit"), "{e}");
            // Zero is zero in every unit; sizes keep bytes; units parse.
            assert_eq!(
                serde_json::from_str::<Duration>("0").unwrap(),
                Duration::ZERO
            );
            assert_eq!(
                serde_json::from_str::<Rate>("\"0\"").unwrap(),
                Rate::from_bps(0)
            );
            assert_eq!(
                serde_json::from_str::<Size>("64").unwrap(),
                Size::from_bytes(64)
            );
            assert_eq!(
                serde_json::from_str::<Rate>("\"25G\"").unwrap(),
                Rate::from_gbps(25)
            );
            // Nested scopes keep it on; leaving the outer one turns it off.
            with_units_required(|| assert!(serde_json::from_str::<Duration>("1").is_err()));
            assert!(serde_json::from_str::<Duration>("1").is_err());
        });
        assert!(serde_json::from_str::<Duration>("1").is_ok());
        // Unwinding out of the scope restores it too.
        let _ = std::panic::catch_unwind(|| with_units_required(|| panic!("mid-decode")));
        assert!(serde_json::from_str::<Duration>("1").is_ok());
    }

    #[test]
    fn sizes_distinguish_binary_and_decimal_prefixes() {
        assert_eq!("4KiB".parse::<Size>().unwrap(), Size::from_bytes(4096));
        assert_eq!("1MB".parse::<Size>().unwrap(), Size::from_bytes(1_000_000));
        assert_eq!("1.5KiB".parse::<Size>().unwrap(), Size::from_bytes(1536));
        assert_eq!("64".parse::<Size>().unwrap(), Size::from_bytes(64));
        assert_eq!(Size::from_bytes(4096).to_string(), "4KiB");
        assert!("4 parsecs".parse::<Size>().is_err());
    }
}
