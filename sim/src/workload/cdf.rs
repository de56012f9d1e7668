//! Flow-size distributions given as CDF points.
//!
//! File format (the HPCC artifact's `traffic_gen` files): one point per
//! line, `size_bytes cdf_percent`; `#` starts a comment. Sizes and
//! percentages never decrease and the last percentage is 100.
//!
//! Sampling follows the artifact's `custom_rand.py`: draw `x` uniform in
//! `[0, 100)`, find the first point whose percentage is at least `x`, and
//! interpolate the size linearly between it and the point before; the
//! result is truncated to whole bytes, at least 1. The mean ([`mean`]) is
//! the artifact's trapezoid rule (`getAvg`), which is also the expected
//! value of the sampler.
//!
//! [`mean`]: FlowSizeCdf::mean

use rand::Rng;

/// The built-in distributions: (name, file text). Copies of the HPCC
/// artifact's files, embedded so the binary runs without the repository.
pub const BUILTIN: [(&str, &str); 4] = [
    (
        "websearch",
        include_str!("../../../workloads/websearch.cdf"),
    ),
    (
        "fb_hadoop",
        include_str!("../../../workloads/fb_hadoop.cdf"),
    ),
    (
        "alistorage2019",
        include_str!("../../../workloads/alistorage2019.cdf"),
    ),
    (
        "googlerpc2008",
        include_str!("../../../workloads/googlerpc2008.cdf"),
    ),
];

/// A flow-size distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSizeCdf {
    /// (size in bytes, cumulative percent), sizes and percents ascending.
    points: Vec<(f64, f64)>,
}

/// A CDF file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct CdfError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

impl FlowSizeCdf {
    /// Parse the text of a CDF file.
    pub fn parse(text: &str) -> Result<FlowSizeCdf, CdfError> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            last_line = i + 1;
            let err = |message: String| CdfError {
                line: i + 1,
                message,
            };
            let w: Vec<&str> = line.split_whitespace().collect();
            let [size, pct] = w[..] else {
                return Err(err(format!("{line:?}: expected `size_bytes cdf_percent`")));
            };
            let size: f64 = size
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| err(format!("size {size:?}: expected a non-negative number")))?;
            let pct: f64 = pct
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=100.0).contains(p))
                .ok_or_else(|| err(format!("percent {pct:?}: expected a number in 0-100")))?;
            if let Some(&(ps, pp)) = points.last() {
                if size < ps || pct < pp {
                    return Err(err(format!(
                        "point ({size}, {pct}) after ({ps}, {pp}): expected sizes and percents that never decrease"
                    )));
                }
            }
            points.push((size, pct));
        }
        match points.last() {
            None => Err(CdfError {
                line: 1,
                message: "no points: expected lines `size_bytes cdf_percent`".into(),
            }),
            Some(&(_, p)) if p != 100.0 => Err(CdfError {
                line: last_line,
                message: format!("last percent is {p}: expected 100"),
            }),
            Some(_) => Ok(FlowSizeCdf { points }),
        }
    }

    /// A built-in distribution by name (`websearch`, `fb_hadoop`,
    /// `alistorage2019`, `googlerpc2008`).
    pub fn builtin(name: &str) -> Option<FlowSizeCdf> {
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, text)| FlowSizeCdf::parse(text).ok())
    }

    /// The points, (size in bytes, cumulative percent).
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// Mean size in bytes by the trapezoid rule.
    pub fn mean(&self) -> f64 {
        let mut s = 0.0;
        let mut prev = (0.0, 0.0);
        for &(v, c) in &self.points {
            s += (v + prev.0) / 2.0 * (c - prev.1);
            prev = (v, c);
        }
        s / 100.0
    }

    /// Draw one flow size (bytes, at least 1).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let x: f64 = rng.gen::<f64>() * 100.0;
        let i = self.points.partition_point(|&(_, c)| c < x);
        let size = if i == 0 {
            self.points[0].0
        } else if i >= self.points.len() {
            self.points[self.points.len() - 1].0
        } else {
            let (v0, c0) = self.points[i - 1];
            let (v1, c1) = self.points[i];
            if c1 > c0 {
                v0 + (x - c0) / (c1 - c0) * (v1 - v0)
            } else {
                v1
            }
        };
        (size as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_bad_files_name_the_line() {
        for (name, _) in BUILTIN {
            assert!(FlowSizeCdf::builtin(name).is_some(), "{name}");
        }
        let e = FlowSizeCdf::parse("0 0\n10 50\n5 60\n20 100\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = FlowSizeCdf::parse("0 0\n10 50\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(FlowSizeCdf::parse("0 0\n10 x\n").is_err());
    }
}
