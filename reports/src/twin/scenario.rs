//! Writing a twin as ordinary files a user can read, edit and run: a
//! scenario ([`TwinSetup::scenario_toml`]) whose topology is the file
//! [`TOPOLOGY_FILE`] beside it ([`TwinSetup::topology_toml`]).
//!
//! Every line holding a value no input gave ends in `# assumed: WHY`. A
//! setting left at the simulator's default because no input gave it is
//! written commented out, with its assumption, so that the file shows what
//! is in force and where to change it.

use std::fmt::Write as _;

use sim::config::NicModel;

use super::qos::priority_list;
use super::types::{Assumption, TwinSetup};

/// The file name [`TwinSetup::scenario_toml`] gives as the topology,
/// relative to the scenario file.
pub const TOPOLOGY_FILE: &str = "topology.toml";

/// The simulator's default lossless priority.
const DEFAULT_PRIORITY: u8 = 3;

/// Column where trailing comments start.
const COMMENT_COLUMN: usize = 32;

impl TwinSetup {
    /// The twin as a scenario file named `name`: the NIC (`[nic]`,
    /// `[nic.host]`), PFC and ECN where the inputs say them, and one
    /// `perftest` workload from `client` to `server`. The topology is
    /// [`TOPOLOGY_FILE`], written by [`TwinSetup::topology_toml`].
    pub fn scenario_toml(&self, name: &str) -> String {
        let mut w = Writer::default();
        self.header(&mut w);
        w.line(&format!("name = {}", quoted(name)), None);
        w.line(
            &format!("description = {}", quoted(&self.description())),
            None,
        );
        w.line(&format!("topology = {}", quoted(TOPOLOGY_FILE)), None);
        self.fabric(&mut w);
        self.nic(&mut w);
        self.host(&mut w);
        self.workload(&mut w);
        w.out
    }

    /// The twin's topology: hosts `client` and `server` through one switch
    /// `sw0` (or cabled to each other when [`TwinSetup::back_to_back`]),
    /// links at the link rate on 1 m cables.
    pub fn topology_toml(&self) -> String {
        let mut w = Writer::default();
        w.comment("The twin's topology: the perftest client and server.");
        w.line("name = \"twin\"", None);
        w.line("hosts = [\"client\", \"server\"]", None);
        let path = self.assumption("back_to_back");
        if self.back_to_back {
            w.line("switches = []", None);
        } else {
            w.line("switches = [\"sw0\"]", path);
        }
        w.blank();
        w.line("[defaults]", None);
        w.line(
            &format!("rate = \"{}Gbps\"", self.link_gbps),
            self.assumption("link_gbps"),
        );
        w.line("cable_m = 1", self.assumption("cable"));
        let links: &[(&str, &str)] = if self.back_to_back {
            &[("client", "server")]
        } else {
            &[("client", "sw0"), ("server", "sw0")]
        };
        for (a, b) in links {
            w.blank();
            w.line("[[link]]", None);
            w.line(&format!("a = \"{a}\""), None);
            w.line(&format!("b = \"{b}\""), None);
        }
        w.out
    }

    fn description(&self) -> String {
        let sizes = if self.all {
            " -a".to_string()
        } else {
            self.sizes
                .first()
                .map_or(String::new(), |s| format!(" -s {s}"))
        };
        format!(
            "Twin of a real ib_{}{sizes}: {} QP(s), {} Gbit/s, MTU {}",
            self.test.name(),
            self.qps,
            self.link_gbps,
            self.mtu
        )
    }

    fn header(&self, w: &mut Writer) {
        w.comment(&format!(
            "Twin of a real ib_{} run, inferred from:",
            self.test.name()
        ));
        for u in &self.understood {
            w.comment(&format!("  {u}"));
        }
        w.comment("");
        w.comment("A line ending in `# assumed:` holds a value no input gave: check it");
        w.comment("against the real setup. A commented-out key shows the default in");
        w.comment("force. Assumed:");
        for a in &self.assumptions {
            w.comment(&format!("  {}: {}; {}", a.what, a.value, a.why));
        }
    }

    /// The PFC priorities to write, and the assumption behind them; `None`
    /// leaves the simulator's default (PFC on priority 3).
    fn pfc_mask(&self) -> Option<(u8, Option<&Assumption>)> {
        match (self.pfc_priorities, self.priority) {
            (Some(m), _) => Some((m, self.assumption("pfc_priorities"))),
            (None, Some(p)) if p != DEFAULT_PRIORITY => {
                Some((1 << p, self.assumption("pfc_priorities")))
            }
            _ => None,
        }
    }

    fn fabric(&self, w: &mut Writer) {
        w.blank();
        match self.pfc_mask() {
            Some((mask, why)) => {
                w.line("[fabric.pfc]", None);
                w.line(&format!("enabled = {}", mask != 0), why);
                if mask != 0 {
                    w.line(&format!("priorities = [{}]", priority_list(mask)), why);
                }
            }
            None => {
                w.comment("[fabric.pfc]");
                w.commented(
                    &format!("priorities = [{DEFAULT_PRIORITY}]"),
                    self.assumption("pfc_priorities"),
                );
            }
        }
        // ECN marks the RoCE priority: the default marks priority 3 only.
        let roce = self.priority.unwrap_or(DEFAULT_PRIORITY);
        if roce != DEFAULT_PRIORITY {
            let why = self.assumption("switch");
            w.blank();
            w.line("[[fabric.ecn]]", None);
            w.line(&format!("priority = {roce}"), self.assumption("priority"));
            w.line("kmin = \"400KB\"", why);
            w.line("kmax = \"1600KB\"", why);
            w.line("pmax = 0.2", why);
        }
    }

    fn nic(&self, w: &mut Writer) {
        w.blank();
        w.line("[nic]", None);
        w.line(&format!("mtu = {}", self.mtu), self.assumption("mtu"));
        let dcqcn = "cc = { algorithm = \"dcqcn\", preset = \"firmware\" }";
        match self.cnps {
            Some(n) if n > 0 => w.line(dcqcn, None),
            Some(_) => {}
            None => w.commented(dcqcn, self.assumption("cnps")),
        }
    }

    fn host(&self, w: &mut Writer) {
        let model = self.nic_model.unwrap_or(NicModel::ConnectX5);
        let defaults = model.defaults();
        w.blank();
        w.line("[nic.host]", None);
        w.line(
            &format!("model = \"{}\"", model.name()),
            self.assumption("nic_model"),
        );
        match self.pcie {
            Some((gen, width)) => {
                let why = self.assumption("pcie");
                w.line(&format!("pcie_gen = {gen}"), why);
                w.line(&format!("pcie_width = {width}"), why);
            }
            None => {
                let why = self.assumption("pcie");
                w.commented(&format!("pcie_gen = {}", defaults.pcie_gen), why);
                w.commented(&format!("pcie_width = {}", defaults.pcie_width), why);
            }
        }
        let sizes = [
            ("max_payload", self.max_payload, defaults.max_payload),
            (
                "max_read_request",
                self.max_read_request,
                defaults.max_read_request,
            ),
        ];
        for (key, value, default) in sizes {
            match value {
                Some(v) => w.line(&format!("{key} = \"{v}B\""), self.assumption(key)),
                None => w.commented(&format!("{key} = \"{default}B\""), self.assumption(key)),
            }
        }
    }

    fn workload(&self, w: &mut Writer) {
        let bw = self.test.is_bw();
        w.blank();
        w.line("[[workload]]", None);
        w.line("kind = \"perftest\"", None);
        w.line(
            &format!("test = \"{}\"", self.test.name()),
            self.assumption("test"),
        );
        w.line("src = \"client\"", None);
        w.line("dst = \"server\"", None);
        if self.all {
            w.line("all = true", None);
        } else if let Some(s) = self.sizes.first() {
            w.line(&format!("size = \"{s}B\""), self.assumption("sizes"));
        }
        match (self.duration_s, self.iters) {
            (Some(s), _) => w.line(
                &format!("duration = \"{}\"", duration(s)),
                self.assumption("duration_s"),
            ),
            (None, Some(n)) => w.line(&format!("iters = {n}"), self.assumption("iters")),
            (None, None) => {}
        }
        w.line(
            &format!("qps_per_pair = {}", self.qps),
            self.assumption("qps"),
        );
        if bw {
            w.line(
                &format!("tx_depth = {}", self.tx_depth),
                self.assumption("tx_depth"),
            );
            w.line(
                &format!("bidirectional = {}", self.bidirectional),
                self.assumption("bidirectional"),
            );
        }
        w.line(
            &format!("inline = \"{}B\"", self.inline),
            self.assumption("inline"),
        );
        if let Some(q) = self.cq_mod {
            w.line(&format!("cq_mod = {q}"), self.assumption("cq_mod"));
        }
        match self.priority {
            Some(p) => w.line(&format!("priority = {p}"), self.assumption("priority")),
            None => w.commented(
                &format!("priority = {DEFAULT_PRIORITY}"),
                self.assumption("priority"),
            ),
        }
    }
}

/// Seconds as a scenario duration: `10s`, `2500ms`.
fn duration(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{:.0}ms", s * 1000.0)
    }
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// TOML text, line by line, with aligned trailing comments.
#[derive(Default)]
struct Writer {
    out: String,
}

impl Writer {
    /// `text`, then `# assumed: WHY` when it is assumed.
    fn line(&mut self, text: &str, assumed: Option<&Assumption>) {
        self.out.push_str(text);
        if let Some(a) = assumed {
            let pad = COMMENT_COLUMN.saturating_sub(text.len()).max(1);
            self.out.push_str(&" ".repeat(pad));
            self.out.push_str("# assumed: ");
            self.out.push_str(&one_line(&a.why));
        }
        self.out.push('\n');
    }

    /// A key left at its default: `# text`, then its assumption.
    fn commented(&mut self, text: &str, assumed: Option<&Assumption>) {
        self.line(&format!("# {text}"), assumed);
    }

    /// A comment line.
    fn comment(&mut self, text: &str) {
        let text = one_line(text);
        if text.is_empty() {
            self.out.push_str("#\n");
        } else {
            self.out.push_str("# ");
            self.out.push_str(&text);
            self.out.push('\n');
        }
    }

    fn blank(&mut self) {
        self.out.push('\n');
    }
}

/// Text made fit for a comment: one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim_end()
        .to_string()
}
