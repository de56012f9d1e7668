//! Faults as data: what scenario files write under `[[faults]]`, checked
//! against the topology and turned into [`FaultPlan`]s the fabric applies.
//!
//! A fault is a wrapper or a state change applied to one element, never an
//! `if` inside the models (ARCHITECTURE.md, "Composition over flags"):
//!
//! | kind            | target                 | what changes                                  |
//! |-----------------|------------------------|-----------------------------------------------|
//! | `loss`          | link direction         | a wrapper loses frames (random or every n-th) |
//! | `corruption`    | link direction         | a wrapper gives frames a bad FCS; the receiving port drops and counts them (`rx_crc_errors_phy`) |
//! | `mtu`           | port or host NIC       | a wrapper on the link into it drops frames larger than its MTU, counted there (`rx_oversize_pkts_phy`) |
//! | `link-down`     | link (both directions) | queued and in-flight frames are lost (`tx_discards_phy`), nothing passes, routes are recomputed after `convergence` |
//! | `link-flap`     | link                   | `link-down` every `period`, for `down_for`, between `start` and `end` |
//! | `slow-receiver` | host NIC               | the NIC drains received frames at `rate`, filling its buffer and pausing its ToR |
//! | `pause-storm`   | host NIC               | the receive pipeline stalls: nothing drains and the NIC keeps its PAUSE (XOFF) asserted |
//! | `static-route`  | switch's route to a host | frames for host `dest` leave switch `node` towards neighbour `via`, whatever the computed routes say (a stale or misconfigured static route; it outlives reroutes) |
//!
//! Every fault takes an optional `start` (default: time zero) and `end`
//! (default: never); outside that window the element behaves as healthy.
//! Units: times are durations from the start of the run (ps inside),
//! rates bits per second, MTUs bytes of IP packet (Ethernet header and FCS
//! not counted, as `ip link` shows them).

use roce::time::{Duration, Rate, Size};
use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// One `[[faults]]` entry. Which keys apply depends on `kind`; a key the
/// kind does not use is an error (see [`FaultConfig::plan`]). Entries
/// without `kind` are `loss` faults, as they were before kinds existed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// What goes wrong (default `loss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FaultType>,
    /// Link faults: node name of the transmitting end (for `link-down` and
    /// `link-flap`, either end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Link faults: node name of the receiving end (the other end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Element faults: the host (`slow-receiver`, `pause-storm`, `mtu`) or
    /// switch (`mtu` with `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `mtu` on a switch: its port number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `loss`: each RoCE frame is lost independently with this probability
    /// (PFC frames are never lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// `loss`: every `drop_every`-th RoCE frame is lost, counting from the
    /// first (a deterministic counter, like the IP-ID trick of AN-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_every: Option<u64>,
    /// `corruption`: probability that a frame arrives with a bad FCS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// `corruption`: every n-th frame arrives with a bad FCS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    /// `mtu`: the element's MTU in bytes of IP packet (1500, 4200, 9000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<Size>,
    /// `slow-receiver`: the rate the host takes received frames at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// When the fault begins (default: at time zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// When it ends (default: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Duration>,
    /// `link-down` / `link-flap`: time from a change of the link's state
    /// to the switches using new routes (default 50 us); until then
    /// frames routed over a down link are lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convergence: Option<Duration>,
    /// `link-flap`: time from one going down to the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// `link-flap`: how long the link stays down each period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_for: Option<Duration>,
    /// `static-route`: the destination host whose route is fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<String>,
    /// `static-route`: the neighbour of `node` the frames go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// The kinds of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultType {
    /// Frames lost on one link direction.
    Loss,
    /// Frames with a bad FCS on one link direction.
    Corruption,
    /// A port or NIC with a smaller MTU than the frames it gets.
    Mtu,
    /// A link down (both directions) from `start` to `end`.
    LinkDown,
    /// A link going down and up periodically.
    LinkFlap,
    /// A host that drains received frames below its link rate.
    SlowReceiver,
    /// A host whose receive pipeline stalls and keeps sending PAUSE.
    PauseStorm,
    /// A switch's route to one host fixed to one neighbour.
    StaticRoute,
}

impl FaultType {
    /// The optional keys a fault of this kind uses (besides `start`,
    /// `end`).
    fn keys(self) -> &'static [&'static str] {
        match self {
            FaultType::Loss => &["from", "to", "loss", "drop_every"],
            FaultType::Corruption => &["from", "to", "probability", "every"],
            FaultType::Mtu => &["node", "port", "mtu"],
            FaultType::LinkDown => &["from", "to", "convergence"],
            FaultType::LinkFlap => &["from", "to", "convergence", "period", "down_for"],
            FaultType::SlowReceiver => &["node", "rate"],
            FaultType::PauseStorm => &["node"],
            FaultType::StaticRoute => &["node", "dest", "via"],
        }
    }

    /// The name files use.
    pub fn name(self) -> &'static str {
        match self {
            FaultType::Loss => "loss",
            FaultType::Corruption => "corruption",
            FaultType::Mtu => "mtu",
            FaultType::LinkDown => "link-down",
            FaultType::LinkFlap => "link-flap",
            FaultType::SlowReceiver => "slow-receiver",
            FaultType::PauseStorm => "pause-storm",
            FaultType::StaticRoute => "static-route",
        }
    }
}

/// Default routing convergence after a link changes state.
pub const DEFAULT_CONVERGENCE: Duration = Duration::from_us(50);
/// Most down/up cycles one `link-flap` may expand to.
pub const MAX_FLAPS: u64 = 100_000;

/// What a fault does, checked and with its target still named.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultPlan {
    /// A wrapper on the link direction `from` -> `to`.
    Wire {
        /// Transmitting node.
        from: String,
        /// Receiving node.
        to: String,
        /// The wrapper.
        wrapper: WireFault,
    },
    /// A wrapper on the link direction into `node`'s `port`: frames over
    /// `mtu` bytes of IP packet are dropped there.
    Mtu {
        /// The node with the small MTU.
        node: String,
        /// Its port (0 for a host).
        port: u16,
        /// IP MTU in bytes.
        mtu: u64,
    },
    /// The link between `a` and `b` is down during each `(down, up)`
    /// window (`up` `None`: stays down).
    LinkDown {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// Down intervals, in time order, disjoint.
        windows: Vec<(Duration, Option<Duration>)>,
        /// Routing convergence delay.
        convergence: Duration,
    },
    /// Host `node` drains received frames at `rate` (`None`: stalled, and
    /// its PAUSE stays asserted).
    Receiver {
        /// The host.
        node: String,
        /// Drain rate; `None` for a stalled pipeline (pause storm).
        rate: Option<Rate>,
    },
    /// Switch `node` sends frames for host `dest` to its neighbour `via`.
    StaticRoute {
        /// The switch.
        node: String,
        /// The destination host.
        dest: String,
        /// The next hop.
        via: String,
    },
}

/// A wrapper's decision rule for one link direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WireFault {
    /// Lose each RoCE frame with this probability.
    Loss(f64),
    /// Lose every n-th RoCE frame.
    DropEvery(u64),
    /// Corrupt each frame with this probability.
    Corrupt(f64),
    /// Corrupt every n-th frame.
    CorruptEvery(u64),
}

impl FaultConfig {
    /// A `loss` fault on `from` -> `to` (the shape imports produce).
    pub fn loss(from: &str, to: &str, p: f64) -> FaultConfig {
        FaultConfig {
            from: Some(from.to_string()),
            to: Some(to.to_string()),
            loss: Some(p),
            ..FaultConfig::default()
        }
    }

    /// The kind, `loss` when not given.
    pub fn kind(&self) -> FaultType {
        self.kind.unwrap_or(FaultType::Loss)
    }

    /// Check the keys against the kind and build the plan; errors name the
    /// key under `faults[i]`, as `key` gives it. The first mistake is the
    /// error: a key the kind does not use, the window, then the kind's own
    /// keys.
    pub fn plan(&self, key: &str) -> Result<(FaultPlan, Window), ConfigError> {
        let kind = self.kind();
        self.check_keys(kind, key)?;
        let window = self.window(key)?;
        let required = |v: &Option<String>, k: &str| need(v, kind, key, k);
        let plan = match kind {
            FaultType::Loss | FaultType::Corruption => self.wire_plan(kind, key)?,
            FaultType::Mtu => self.mtu_plan(key)?,
            FaultType::LinkDown | FaultType::LinkFlap => self.link_plan(kind, window.start, key)?,
            FaultType::SlowReceiver => self.slow_receiver_plan(key)?,
            FaultType::PauseStorm => FaultPlan::Receiver {
                node: required(&self.node, "node")?,
                rate: None,
            },
            FaultType::StaticRoute => FaultPlan::StaticRoute {
                node: required(&self.node, "node")?,
                dest: required(&self.dest, "dest")?,
                via: required(&self.via, "via")?,
            },
        };
        Ok((plan, window))
    }

    /// Refuse the first key given that a `kind` fault does not use.
    fn check_keys(&self, kind: FaultType, key: &str) -> Result<(), ConfigError> {
        let used = kind.keys();
        let given: [(&str, bool); 15] = [
            ("from", self.from.is_some()),
            ("to", self.to.is_some()),
            ("node", self.node.is_some()),
            ("port", self.port.is_some()),
            ("loss", self.loss.is_some()),
            ("drop_every", self.drop_every.is_some()),
            ("probability", self.probability.is_some()),
            ("every", self.every.is_some()),
            ("mtu", self.mtu.is_some()),
            ("rate", self.rate.is_some()),
            ("convergence", self.convergence.is_some()),
            ("period", self.period.is_some()),
            ("down_for", self.down_for.is_some()),
            ("dest", self.dest.is_some()),
            ("via", self.via.is_some()),
        ];
        for (k, is) in given {
            if is && !used.contains(&k) {
                return Err(key_error(
                    key,
                    k,
                    format!(
                        "not a key of a `{}` fault: expected only {}, start, end",
                        kind.name(),
                        used.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// When the fault is in force: `start` (default zero) before `end`.
    fn window(&self, key: &str) -> Result<Window, ConfigError> {
        let start = self.start.unwrap_or(Duration::ZERO);
        if let Some(end) = self.end {
            if end <= start {
                return Err(key_error(
                    key,
                    "end",
                    format!("{end} is not after start {start}: expected end > start"),
                ));
            }
        }
        Ok(Window {
            start,
            end: self.end,
        })
    }

    /// The wrapper of a `loss` or `corruption` fault (`kind`): exactly one
    /// of a probability and a period.
    fn wire_plan(&self, kind: FaultType, key: &str) -> Result<FaultPlan, ConfigError> {
        let err = |k: &str, m: String| key_error(key, k, m);
        let required = |v: &Option<String>, k: &str| need(v, kind, key, k);
        let prob = |k: &str, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(p)
            } else {
                Err(err(k, format!("{p}: expected a probability in [0, 1]")))
            }
        };
        let count = |k: &str, n: u64| {
            if n == 0 {
                Err(err(k, "0: expected at least 1".into()))
            } else {
                Ok(n)
            }
        };
        let (from, to) = (required(&self.from, "from")?, required(&self.to, "to")?);
        let (pk, nk, p, n) = if kind == FaultType::Loss {
            ("loss", "drop_every", self.loss, self.drop_every)
        } else {
            ("probability", "every", self.probability, self.every)
        };
        let wrapper = match (p, n) {
            (Some(p), None) => {
                let p = prob(pk, p)?;
                if kind == FaultType::Loss {
                    WireFault::Loss(p)
                } else {
                    WireFault::Corrupt(p)
                }
            }
            (None, Some(n)) => {
                let n = count(nk, n)?;
                if kind == FaultType::Loss {
                    WireFault::DropEvery(n)
                } else {
                    WireFault::CorruptEvery(n)
                }
            }
            _ => {
                return Err(err(
                    "",
                    format!("fault {from} -> {to}: expected exactly one of `{pk}` and `{nk}`"),
                ))
            }
        };
        Ok(FaultPlan::Wire { from, to, wrapper })
    }

    /// The plan of an `mtu` fault: an IP MTU in 68-65535 bytes.
    fn mtu_plan(&self, key: &str) -> Result<FaultPlan, ConfigError> {
        let err = |k: &str, m: String| key_error(key, k, m);
        let node = need(&self.node, FaultType::Mtu, key, "node")?;
        let mtu = self
            .mtu
            .ok_or_else(|| err("mtu", "missing: an `mtu` fault needs `mtu`".into()))?
            .bytes();
        if !(68..=65_535).contains(&mtu) {
            return Err(err(
                "mtu",
                format!("{mtu}: expected an IP MTU in 68-65535 bytes"),
            ));
        }
        Ok(FaultPlan::Mtu {
            node,
            port: self.port.unwrap_or(0),
            mtu,
        })
    }

    /// The down windows of a `link-down` or `link-flap` fault (`kind`)
    /// whose window starts at `start`.
    fn link_plan(
        &self,
        kind: FaultType,
        start: Duration,
        key: &str,
    ) -> Result<FaultPlan, ConfigError> {
        let required = |v: &Option<String>, k: &str| need(v, kind, key, k);
        let (a, b) = (required(&self.from, "from")?, required(&self.to, "to")?);
        let convergence = self.convergence.unwrap_or(DEFAULT_CONVERGENCE);
        let windows = if kind == FaultType::LinkDown {
            vec![(start, self.end)]
        } else {
            self.flap_windows(start, key)?
        };
        Ok(FaultPlan::LinkDown {
            a,
            b,
            windows,
            convergence,
        })
    }

    /// A `link-flap`'s down windows from `start`: one every `period`, for
    /// `down_for`, until `end`.
    fn flap_windows(
        &self,
        start: Duration,
        key: &str,
    ) -> Result<Vec<(Duration, Option<Duration>)>, ConfigError> {
        let err = |k: &str, m: String| key_error(key, k, m);
        let end = self
            .end
            .ok_or_else(|| err("end", "missing: a `link-flap` needs `end`".into()))?;
        let period = self
            .period
            .ok_or_else(|| err("period", "missing: a `link-flap` needs `period`".into()))?;
        let down = self
            .down_for
            .ok_or_else(|| err("down_for", "missing: a `link-flap` needs `down_for`".into()))?;
        if down == Duration::ZERO || down >= period {
            return Err(err(
                "down_for",
                format!("{down}: expected more than 0 and less than period {period}"),
            ));
        }
        let cycles = (end - start).as_ps().div_ceil(period.as_ps());
        if cycles > MAX_FLAPS {
            return Err(err(
                "period",
                format!("{cycles} flaps: expected at most {MAX_FLAPS}"),
            ));
        }
        Ok((0..cycles)
            .map(|i| {
                let t = start + Duration::from_ps(i * period.as_ps());
                (t, Some((t + down).min(end)))
            })
            .collect())
    }

    /// The plan of a `slow-receiver` fault: a positive drain rate.
    fn slow_receiver_plan(&self, key: &str) -> Result<FaultPlan, ConfigError> {
        let err = |k: &str, m: String| key_error(key, k, m);
        let node = need(&self.node, FaultType::SlowReceiver, key, "node")?;
        let rate = self
            .rate
            .ok_or_else(|| err("rate", "missing: a `slow-receiver` needs `rate`".into()))?;
        if rate.bps() == 0 {
            return Err(err(
                "rate",
                "0: expected a positive rate (a stalled host is a `pause-storm`)".into(),
            ));
        }
        Ok(FaultPlan::Receiver {
            node,
            rate: Some(rate),
        })
    }
}

/// A mistake in the fault under `key` (`faults[i]`), at its key `k`
/// (empty: the fault as a whole).
fn key_error(key: &str, k: &str, message: String) -> ConfigError {
    ConfigError {
        key: if k.is_empty() {
            key.to_string()
        } else {
            format!("{key}.{k}")
        },
        message,
    }
}

/// The value of the required key `k` of a `kind` fault under `key`.
fn need(v: &Option<String>, kind: FaultType, key: &str, k: &str) -> Result<String, ConfigError> {
    v.clone().ok_or_else(|| {
        key_error(
            key,
            k,
            format!("missing: a `{}` fault needs `{k}`", kind.name()),
        )
    })
}

/// When a fault or override is in force: from `start` until `end`
/// (`None`: the end of the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// Start, from time zero.
    pub start: Duration,
    /// End, if any.
    pub end: Option<Duration>,
}

impl Window {
    /// In force for the whole run.
    pub fn always(&self) -> bool {
        self.start == Duration::ZERO && self.end.is_none()
    }

    /// Whether two windows share a moment.
    pub fn overlaps(&self, o: &Window) -> bool {
        let a_end = self.end.unwrap_or(Duration::MAX);
        let b_end = o.end.unwrap_or(Duration::MAX);
        self.start < b_end && o.start < a_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> FaultConfig {
        toml::from_str(s).unwrap()
    }

    #[test]
    fn entries_without_kind_are_loss_faults() {
        let f = parse("from = \"a\"\nto = \"b\"\nloss = 0.5\n");
        let (p, w) = f.plan("faults[0]").unwrap();
        assert!(w.always());
        assert_eq!(
            p,
            FaultPlan::Wire {
                from: "a".into(),
                to: "b".into(),
                wrapper: WireFault::Loss(0.5)
            }
        );
        let e = parse("from = \"a\"\nto = \"b\"\n").plan("faults[0]");
        assert_eq!(e.unwrap_err().key, "faults[0]");
        let e = parse("from = \"a\"\nto = \"b\"\ndrop_every = 0").plan("faults[1]");
        assert_eq!(e.unwrap_err().key, "faults[1].drop_every");
    }

    #[test]
    fn keys_of_another_kind_are_refused_by_name() {
        let f = parse("kind = \"pause-storm\"\nnode = \"h1\"\nrate = \"1Gbps\"\n");
        let e = f.plan("faults[2]").unwrap_err();
        assert_eq!(e.key, "faults[2].rate");
        assert!(e.message.contains("pause-storm"), "{}", e.message);
        let f = parse("kind = \"slow-receiver\"\nnode = \"h1\"\n");
        assert_eq!(f.plan("faults[0]").unwrap_err().key, "faults[0].rate");
        let f =
            parse("kind = \"link-down\"\nfrom = \"a\"\nto = \"b\"\nstart = \"2us\"\nend = \"1us\"");
        assert_eq!(f.plan("faults[0]").unwrap_err().key, "faults[0].end");
    }

    #[test]
    fn a_flap_expands_to_periodic_windows_ending_at_end() {
        let f = parse(
            "kind = \"link-flap\"\nfrom = \"a\"\nto = \"b\"\nstart = \"10us\"\nend = \"35us\"\nperiod = \"10us\"\ndown_for = \"4us\"",
        );
        let (FaultPlan::LinkDown { windows, .. }, _) = f.plan("f").unwrap() else {
            panic!("a flap is link-down windows");
        };
        let us = Duration::from_us;
        assert_eq!(
            windows,
            vec![
                (us(10), Some(us(14))),
                (us(20), Some(us(24))),
                (us(30), Some(us(34)))
            ]
        );
        let f = parse(
            "kind = \"link-flap\"\nfrom = \"a\"\nto = \"b\"\nend = \"35us\"\nperiod = \"10us\"\ndown_for = \"10us\"",
        );
        assert_eq!(f.plan("f").unwrap_err().key, "f.down_for");
    }

    #[test]
    fn windows_overlap_when_they_share_time() {
        let us = Duration::from_us;
        let w = |a, b: Option<u64>| Window {
            start: us(a),
            end: b.map(us),
        };
        assert!(w(0, Some(10)).overlaps(&w(5, None)));
        assert!(!w(0, Some(10)).overlaps(&w(10, Some(20))));
        assert!(w(0, None).overlaps(&w(100, Some(200))));
    }
}
