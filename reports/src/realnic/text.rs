//! Line handling shared by every parser: quote prefixes, tabs, exact
//! decimal scaling and the one error type.
//!
//! Nothing here panics on any input. Numbers are scaled with integer
//! arithmetic so that `12.34` MiB/s becomes an exact number of bits per
//! second whenever the result is an integer (it is rounded to the nearest
//! unit otherwise).

use serde::Serialize;

/// Why a text did not parse: the 1-based line number, what was expected and
/// what was found there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("line {line}: expected {expected}, found {found:?}")]
pub struct ParseError {
    /// 1-based line number in the input (0 when the input is empty).
    pub line: usize,
    /// What the parser was looking for.
    pub expected: String,
    /// The offending text (cut to 80 characters).
    pub found: String,
}

impl ParseError {
    /// A new error at `line` (1-based).
    pub fn new(line: usize, expected: impl Into<String>, found: &str) -> ParseError {
        let found: String = found.chars().take(80).collect();
        ParseError {
            line,
            expected: expected.into(),
            found,
        }
    }
}

/// One input line after cleaning, with its 1-based number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based line number in the original text.
    pub number: usize,
    /// The line without quote prefixes (`> `), without `\r` and trailing
    /// whitespace. Leading whitespace is kept (some formats indent).
    pub text: &'a str,
}

/// Split `input` into cleaned lines: strips `\r`, e-mail/markdown quote
/// prefixes (`> `, `>> `, `>`), and trailing whitespace.
pub fn lines(input: &str) -> Vec<Line<'_>> {
    input
        .split('\n')
        .enumerate()
        .map(|(i, raw)| Line {
            number: i + 1,
            text: clean(raw),
        })
        .collect()
}

/// Clean one raw line (see [`lines`]).
pub fn clean(raw: &str) -> &str {
    let mut s = raw.trim_end_matches(['\r', '\n']);
    loop {
        let t = s.trim_start_matches([' ', '\t']);
        if let Some(rest) = t.strip_prefix('>') {
            // A quote marker eats one following space only, so that
            // indentation inside the quote survives.
            s = rest.strip_prefix(' ').unwrap_or(rest);
        } else {
            break;
        }
    }
    s.trim_end()
}

/// Parse a decimal like `"12.345"` and return `value * num / den`, rounded
/// to the nearest integer, using integer arithmetic only. Accepts an
/// optional leading `+`; rejects signs, exponents and anything else.
pub fn scaled_decimal(s: &str, num: u128, den: u128) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() || den == 0 {
        return None;
    }
    let (int_part, frac_part) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
        || frac_part.len() > 18
        || int_part.len() > 30
    {
        return None;
    }
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    let frac: u128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().ok()?
    };
    let frac_den = 10u128.checked_pow(frac_part.len() as u32)?;
    // value = (int * frac_den + frac) / frac_den
    let mantissa = int.checked_mul(frac_den)?.checked_add(frac)?;
    let numer = mantissa.checked_mul(num)?;
    let denom = frac_den.checked_mul(den)?;
    let q = numer / denom;
    let r = numer % denom;
    let rounded = if r.checked_mul(2)? >= denom { q + 1 } else { q };
    u64::try_from(rounded).ok()
}

/// Parse an unsigned integer in decimal, or in hex with a `0x` prefix.
pub fn uint(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Parse a hex number with or without `0x` (perftest prints `%#04x`, which
/// is `0000` for zero).
pub fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let h = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if h.is_empty() {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

/// Split a line into chunks separated by a TAB or by two or more spaces.
pub fn chunks(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let sep_len = if bytes[i] == b'\t' {
            1
        } else if bytes[i] == b' ' && i + 1 < bytes.len() && matches!(bytes[i + 1], b' ' | b'\t') {
            2
        } else {
            0
        };
        if sep_len > 0 {
            let piece = s[start..i].trim();
            if !piece.is_empty() {
                out.push(piece);
            }
            let mut j = i;
            while j < bytes.len() && matches!(bytes[j], b' ' | b'\t') {
                j += 1;
            }
            start = j;
            i = j;
        } else {
            i += 1;
        }
    }
    let piece = s[start..].trim();
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

/// `"name: value"` or `"name value"` counter line -> `(name, value)` when
/// the name is one identifier-like token and the value an unsigned
/// integer.
pub fn counter_pair(s: &str) -> Option<(&str, u64)> {
    let t = s.trim();
    let (name, value) = match t.split_once(':') {
        Some((n, v)) => (n.trim(), v.trim()),
        None => {
            let mut it = t.split_whitespace();
            let n = it.next()?;
            let v = it.next()?;
            if it.next().is_some() {
                return None;
            }
            (n, v)
        }
    };
    if !is_counter_name(name) {
        return None;
    }
    Some((name, value.parse().ok()?))
}

/// Counter names: letters, digits, `_`, `.`, `-`, `[`, `]`, starting with a
/// letter.
pub fn is_counter_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '[' | ']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_prefixes_and_cr_are_removed() {
        assert_eq!(clean("> >  Mtu : 4096[B]\r"), " Mtu : 4096[B]");
        assert_eq!(clean(">\tx"), "\tx");
    }

    #[test]
    fn decimals_scale_exactly() {
        // 11697.65 MiB/s in bit/s: 11697.65 * 8 * 2^20
        assert_eq!(
            scaled_decimal("11697.65", 8 * 1_048_576, 1),
            Some(98_127_000_371)
        );
        assert_eq!(
            scaled_decimal("97.82", 1_000_000_000, 1),
            Some(97_820_000_000)
        );
        assert_eq!(scaled_decimal("1.5", 1, 1), Some(2));
        assert_eq!(scaled_decimal("-1", 1, 1), None);
        assert_eq!(scaled_decimal(".", 1, 1), None);
    }

    #[test]
    fn chunks_split_on_tabs_and_double_spaces() {
        assert_eq!(
            chunks(" Dual-port       : OFF\t\tDevice         : mlx5_0"),
            vec!["Dual-port", ": OFF", "Device", ": mlx5_0"]
        );
    }
}
