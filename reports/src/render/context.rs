//! What a report is read in: the scenario file's own narrative (its
//! header comment), the thresholds each variant was configured with, and
//! the key numbers computed from the results that the narrative is about.
//!
//! The narrative is taken verbatim from the leading `#` lines of the
//! scenario file (the lesson files of `scenarios/lessons/` open with
//! `# Lesson N: <title>` and `# Question: <question>`); the key numbers
//! are computed, never copied from the text, so the report shows what
//! this run did. Each variant's ground truth ([`Diagnosis`]: the cause the
//! scenario injects, whether the variant is the healthy baseline, a fault
//! or its fix, and which workload is the victim) comes from the scenario's
//! `[diagnosis]` tables; the explanation uses it to pick the baseline, to
//! judge a fix by what it saves, and to name the victim, and states only
//! causes the numbers or the scenario itself give.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sim::results::{FlowRecord, RunResult};
use sim::scenario::Diagnosis;

use super::format::fmt_time;
use super::load::LoadError;

/// A named queue threshold of one variant, drawn on its queue plots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Threshold {
    /// `XOFF`, `XON`, `Kmin` or `Kmax`.
    pub name: String,
    /// Bytes.
    pub bytes: u64,
    /// The priority it applies to; `None`: every priority.
    pub priority: Option<u8>,
}

/// The context of a report; [`Context::default`] is none (the report
/// then opens with the summary). `rocelab run` writes it beside
/// `results.json` as [`CONTEXT_FILE`] so that `rocelab report` renders
/// the same page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// The scenario file's header comment, one entry per line, without
    /// the leading `#` and one space; empty lines separate paragraphs.
    pub narrative: Vec<String>,
    /// Per variant, in the order of the results: its thresholds.
    pub thresholds: Vec<Vec<Threshold>>,
    /// Per variant, in the order of the results: its ground truth, when
    /// the scenario states one. Absent in contexts written before it
    /// existed (read back as empty: no variant has one).
    #[serde(default)]
    pub diagnoses: Vec<Option<Diagnosis>>,
}

/// The context's file name in a run's output folder.
pub const CONTEXT_FILE: &str = "report-context.json";

/// The context saved in `dir` ([`CONTEXT_FILE`]), or none when the file
/// is absent (results from elsewhere); a file that is there but unreadable
/// is an error naming it.
pub fn load_context(dir: &Path) -> Result<Context, LoadError> {
    let path = dir.join(CONTEXT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Context::default()),
        Err(e) => {
            return Err(LoadError {
                path,
                message: format!("cannot read: {e}"),
            })
        }
    };
    serde_json::from_str(&text).map_err(|e| LoadError {
        path,
        message: format!(
            "not a rocelab report context (expected {{\"narrative\": [lines], \
             \"thresholds\": [[{{\"name\", \"bytes\", \"priority\"}}]], \
             \"diagnoses\": [{{\"cause\", ...}} or null]}}): {e}"
        ),
    })
}

/// The header comment of a scenario file: its leading lines that start
/// with `#` (blank lines before it are skipped), without `#` and one space.
pub fn narrative_of(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with('#'))
        .map(|l| {
            let l = &l[1..];
            l.strip_prefix(' ').unwrap_or(l).trim_end().to_string()
        })
        .collect()
}

impl Context {
    /// The text after `<label>: ` on the first narrative line that has it.
    pub fn header(&self, label: &str) -> Option<&str> {
        self.narrative
            .iter()
            .find_map(|l| l.strip_prefix(label)?.strip_prefix(": ").map(str::trim))
    }

    /// The title: the first sentence of the narrative's first paragraph
    /// (its lines up to an empty one or the `Question: ` line), without a
    /// closing full stop: `Lesson N: <title>`, or `Fault: corruption` of
    /// `Fault: corruption. Every 100th frame ...`. Never a sentence cut in
    /// the middle: `None` (the report then names the scenario) when there
    /// is no narrative or its first sentence is longer than
    /// [`MAX_TITLE_CHARS`].
    pub fn title(&self) -> Option<String> {
        let para: Vec<&str> = self
            .narrative
            .iter()
            .map(|l| l.trim())
            .take_while(|l| !l.is_empty() && !l.starts_with("Question: "))
            .collect();
        let text = para.join(" ");
        let sentence = first_sentence(&text);
        let sentence = sentence.strip_suffix('.').unwrap_or(sentence).trim();
        (!sentence.is_empty() && sentence.chars().count() <= MAX_TITLE_CHARS)
            .then(|| sentence.to_string())
    }

    /// The narrative after the title and question lines, as paragraphs
    /// (runs of non-empty lines joined by spaces); a paragraph opening
    /// with `* ` is a list item. Indented command lines keep their own
    /// paragraph.
    pub fn paragraphs(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        // A first paragraph that is the title and nothing else, and the
        // question, are shown above the narrative; a title cut from a
        // longer first paragraph leaves that paragraph whole.
        let head: Vec<&str> = self
            .narrative
            .iter()
            .map(|l| l.trim())
            .take_while(|l| !l.is_empty() && !l.starts_with("Question: "))
            .collect();
        let joined = head.join(" ");
        let whole = joined.strip_suffix('.').unwrap_or(&joined);
        let skip = if self.title().as_deref() == Some(whole) {
            head.len()
        } else {
            0
        };
        let body = self
            .narrative
            .iter()
            .skip(skip)
            .skip_while(|l| l.starts_with("Question: "));
        for l in body {
            let t = l.trim();
            let indented = l.starts_with("  ");
            // An indented line continues a list item or stands alone (a
            // command to type).
            let alone = indented && !cur.starts_with("* ");
            if (t.is_empty() || t.starts_with("* ") || alone) && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if t.is_empty() {
                continue;
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(t);
            if alone {
                out.push(std::mem::take(&mut cur));
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }
}

/// Longest title taken from a narrative, in characters.
pub const MAX_TITLE_CHARS: usize = 140;

/// The first sentence of `text`: up to the first `.`, `?` or `!` that is
/// followed by a space and a word (a node name such as `sw0` may start a
/// sentence in lower case) and that closes no abbreviation (so `0.66 ms`,
/// `e.g. 4 KB` and `vs. TCP` do not end it), or all of it.
fn first_sentence(text: &str) -> &str {
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if !matches!(c, b'.' | b'?' | b'!') {
            continue;
        }
        // `c` is ASCII, so `i` is a character boundary.
        let word = text[..i].rsplit(' ').next().unwrap_or("");
        let abbreviation = word.contains('.') || matches!(word, "vs" | "etc" | "cf" | "approx");
        if !(c == b'.' && abbreviation)
            && b.get(i + 1) == Some(&b' ')
            && b.get(i + 2)
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'(' || *n == b'`')
        {
            return &text[..=i];
        }
    }
    text
}

/// The flow that suffered most in `r`: the largest slowdown (FCT over its
/// stand-alone FCT), ties to the lowest id.
pub fn slowest_flow(r: &RunResult) -> Option<&FlowRecord> {
    slowest(r.flows.iter())
}

/// The flow of `flows` with the largest finite slowdown, ties to the
/// first.
fn slowest<'a>(flows: impl Iterator<Item = &'a FlowRecord>) -> Option<&'a FlowRecord> {
    flows
        .filter(|f| f.slowdown.is_some_and(f64::is_finite))
        .fold(None, |best: Option<&FlowRecord>, f| match best {
            Some(b) if b.slowdown >= f.slowdown => Some(b),
            _ => Some(f),
        })
}

/// `, the victim` after workload `w`'s name when it is the victim and its
/// name does not say so already.
fn victim_note(w: &str, victim: Option<&str>) -> &'static str {
    if Some(w) == victim && !w.contains("victim") {
        ", the victim"
    } else {
        ""
    }
}

/// The key numbers, one sentence per variant: the slowest flow against
/// its ideal (which flow, how long, how much too long), the slowest flow
/// of each other workload (the victim's named as such when `truth`, one
/// entry per variant, names a victim workload), flows that never
/// finished, and what held or dropped its frames.
pub fn key_numbers(rs: &[RunResult], truth: &[Option<Diagnosis>]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, r) in rs.iter().enumerate() {
        let s = &r.summary;
        let v = &s.variant;
        let victim = truth
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|d| d.victim.as_deref());
        let top = slowest_flow(r);
        let mut line = match top {
            Some(f) => {
                let fct = f.fct_ps.unwrap_or(0);
                let sd = f.slowdown.unwrap_or(1.0);
                let ideal = (fct as f64 / sd).round() as u64;
                format!(
                    "{v}: the slowest flow is flow {} {} -> {} ({}{}, {} bytes): {} against {} alone, {:.1} times its ideal",
                    f.id,
                    f.src,
                    f.dst,
                    f.workload,
                    victim_note(&f.workload, victim),
                    f.size,
                    fmt_time(fct),
                    fmt_time(ideal),
                    sd
                )
            }
            None => format!(
                "{v}: no flow finished; {} bytes delivered in {}",
                s.bytes_delivered,
                fmt_time(s.sim_time_ps)
            ),
        };
        // With several workloads, the slowest flow of each other one too
        // (a victim flow is often not the slowest of all).
        let mut workloads: Vec<&str> = Vec::new();
        for f in &r.flows {
            if !workloads.contains(&f.workload.as_str()) {
                workloads.push(&f.workload);
            }
        }
        let top = top.map(|f| f.workload.as_str());
        for w in workloads.iter().filter(|w| Some(**w) != top) {
            if let Some(f) = slowest(r.flows.iter().filter(|f| f.workload == *w)) {
                let what = if Some(*w) == victim {
                    format!("the victim ({w})")
                } else {
                    format!("slowest of {w}")
                };
                line.push_str(&format!(
                    "; {what}: flow {} {} -> {}, {} ({:.1} times its ideal)",
                    f.id,
                    f.src,
                    f.dst,
                    fmt_time(f.fct_ps.unwrap_or(0)),
                    f.slowdown.unwrap_or(1.0)
                ));
            }
        }
        let unfinished = s.flows_total.saturating_sub(s.flows_completed);
        if unfinished > 0 && s.flows_completed > 0 {
            line.push_str(&format!(
                "; {unfinished} of {} flows never finished",
                s.flows_total
            ));
        }
        let mut why = Vec::new();
        if s.pause_frames_sent > 0 {
            why.push(format!(
                "{} PAUSE frames held transmitters for {} in all",
                s.pause_frames_sent,
                fmt_time(s.pause_time_ps)
            ));
        }
        if s.drops > 0 {
            why.push(format!(
                "{} frames dropped, {} packets resent",
                s.drops, s.retransmitted_packets
            ));
        }
        if s.cnps_sent > 0 {
            why.push(format!("{} CNPs slowed the senders", s.cnps_sent));
        }
        if !why.is_empty() {
            line.push_str(" (");
            line.push_str(&why.join("; "));
            line.push(')');
        }
        line.push('.');
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_comment_is_the_narrative() {
        let text = "\n# Lesson 2: Victims\n# Question: why slow?\n#\n# First\n# para.\n#\n# * lossless: held\n#   long.\n# * lossy: dropped.\n#\n#   rocelab lesson 2\n[scenario]\n# not narrative\n";
        let c = Context {
            narrative: narrative_of(text),
            thresholds: Vec::new(),
            diagnoses: Vec::new(),
        };
        assert_eq!(c.title().as_deref(), Some("Lesson 2: Victims"));
        assert_eq!(c.header("Question"), Some("why slow?"));
        assert_eq!(
            c.paragraphs(),
            vec![
                "First para.",
                "* lossless: held long.",
                "* lossy: dropped.",
                "rocelab lesson 2"
            ]
        );
    }

    #[test]
    fn the_title_is_a_whole_first_sentence_or_none() {
        let ctx = |text: &str| Context {
            narrative: narrative_of(text),
            ..Context::default()
        };
        let c = ctx("# Fault: corruption. Every 100th frame sw0 sends to h0 arrives with a bad\n# FCS (a dirty fibre).\n#\n# More.\n");
        assert_eq!(c.title().as_deref(), Some("Fault: corruption"));
        // The first paragraph stays whole in the narrative.
        assert_eq!(
            c.paragraphs()[0],
            "Fault: corruption. Every 100th frame sw0 sends to h0 arrives with a bad FCS (a dirty fibre)."
        );
        let c = ctx("# Benchmark: incast on a fat tree (1024 hosts): every other host\n# writes 2 MB to host 0, e.g. 0.66 ms alone.\n#\n# Body.\n");
        assert_eq!(
            c.title().as_deref(),
            Some("Benchmark: incast on a fat tree (1024 hosts): every other host writes 2 MB to host 0, e.g. 0.66 ms alone")
        );
        assert_eq!(c.paragraphs(), vec!["Body."]);
        let long = format!("# {}\n", "word ".repeat(40));
        assert_eq!(ctx(&long).title(), None);
        assert_eq!(ctx("").title(), None);
    }
}
