//! The kind of each variant and its colour, the same in every report.
//!
//! Whether a variant is faulty, a fix or healthy comes only from the
//! scenario's ground truth (its `[diagnosis]` role); a name never makes a
//! variant "faulty" (`default` contains "fault", `fixed-2KB` is the
//! broken one of lesson 6). The mechanism (lossless, lossy, congestion
//! control) comes from keywords of the name. Colours: faulty red, fixed
//! purple; a healthy variant or one without ground truth takes its
//! mechanism's colour (lossless blue, lossy orange, congestion control
//! green; healthy without a mechanism blue, neither grey); a second
//! variant of a colour already shown gets a spare one.

use std::fmt::Write as _;

use sim::results::RunResult;
use sim::scenario::{Diagnosis, Role};

use super::svg::{escape, PALETTE};

/// Mechanisms by name keyword: kind, colour, keywords (first match wins).
const MECHANISMS: [(&str, &str, &[&str]); 3] = [
    (
        "congestion control",
        "#2ca02c",
        &["dcqcn", "paper", "firmware", "hpcc", "cc"],
    ),
    ("lossy", "#ff7f0e", &["lossy", "go-back"]),
    ("lossless", "#1f77b4", &["lossless", "pfc", "no-loss"]),
];

/// Colour of a variant the ground truth calls faulty.
const FAULTY: &str = "#d62728";
/// Colour of a variant the ground truth calls a fix.
const FIXED: &str = "#9467bd";
/// Colour of a healthy variant without a mechanism keyword.
const HEALTHY: &str = "#1f77b4";
/// Colour of a variant of no known kind.
const OTHER: &str = "#7f7f7f";

/// Colours for a second variant of a colour already shown, in order.
pub(super) const SPARE: [&str; 5] = ["#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

/// The kind of a variant, as the colour key writes it, and its colour:
/// from its ground truth's role when it has one, its mechanism from its
/// name (`other` when neither says anything).
pub fn kind_of(name: &str, truth: Option<&Diagnosis>) -> (String, &'static str) {
    let n = name.to_ascii_lowercase();
    let mech = MECHANISMS
        .iter()
        .find(|(_, _, keys)| keys.iter().any(|k| n.contains(k)))
        .map(|(k, c, _)| (*k, *c));
    let with = |role: &str| mech.map_or(role.to_string(), |(m, _)| format!("{m}, {role}"));
    match truth.map(Diagnosis::role) {
        Some(Role::Fault) => (with("faulty"), FAULTY),
        Some(Role::Fix) => (with("fixed"), FIXED),
        Some(Role::Healthy) => (with("healthy"), mech.map_or(HEALTHY, |m| m.1)),
        None => mech.map_or(("other".to_string(), OTHER), |(m, c)| (m.to_string(), c)),
    }
}

/// One colour per variant (`truth`: per variant, its ground truth): its
/// kind's colour, or, for a second variant of a colour already shown in
/// this report, the next spare one (so the plots still tell them apart).
pub fn variant_colors(rs: &[RunResult], truth: &[Option<Diagnosis>]) -> Vec<&'static str> {
    let mut used: Vec<&'static str> = Vec::new();
    let mut spare = SPARE.iter().chain(PALETTE.iter()).cycle();
    for (i, r) in rs.iter().enumerate() {
        let mut c = kind_of(&r.summary.variant, truth_of(truth, i)).1;
        // One pass over the spare colours at most: with more variants
        // than distinct colours (the lists share some), colours repeat.
        let mut tries = SPARE.len() + PALETTE.len();
        while used.contains(&c) && tries > 0 {
            c = spare.next().copied().unwrap_or(c);
            tries -= 1;
        }
        used.push(c);
    }
    used
}

fn truth_of(truth: &[Option<Diagnosis>], i: usize) -> Option<&Diagnosis> {
    truth.get(i).and_then(Option::as_ref)
}

/// The colour key: which colour is which variant and kind.
pub fn legend_html(rs: &[RunResult], truth: &[Option<Diagnosis>]) -> String {
    let mut h = String::from(
        "<p class=\"key\" id=\"colour-key\">Colours (the same in every report: faulty red \
         and fixed purple, as the scenario's ground truth says; otherwise lossless blue, lossy \
         orange, congestion control green, by the variant's name):",
    );
    for (i, (r, c)) in rs.iter().zip(variant_colors(rs, truth)).enumerate() {
        let _ = write!(
            h,
            " <span class=\"sw\" style=\"background:{c}\"></span>{} ({})",
            escape(&r.summary.variant),
            escape(&kind_of(&r.summary.variant, truth_of(truth, i)).0)
        );
    }
    h.push_str("</p>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More variants than distinct colours: colours repeat, and the
    /// call returns (it once looped for ever past about ten variants).
    #[test]
    fn many_variants_get_a_colour_each() {
        let rs: Vec<RunResult> = (0..40)
            .map(|i| crate::render::evidence::empty_run(&format!("v{i}")))
            .collect();
        let c = variant_colors(&rs, &[]);
        assert_eq!(c.len(), 40);
        assert!(
            c[..8].iter().enumerate().all(|(i, x)| !c[..i].contains(x)),
            "{c:?}"
        );
    }

    fn truth(cause: &str, role: Option<Role>) -> Diagnosis {
        Diagnosis {
            cause: cause.into(),
            at: None,
            summary: None,
            feels: None,
            first: None,
            victim: None,
            role,
        }
    }

    #[test]
    fn only_ground_truth_makes_a_variant_faulty_or_fixed() {
        // The k=16 bench's only variant: no ground truth, no claim.
        assert_eq!(kind_of("default", None), ("other".to_string(), OTHER));
        assert_eq!(kind_of("fixed-2KB", None).0, "other");
        // The interview's broken variant: its ground truth says so.
        let fault = truth("buffer-too-small", None);
        assert_eq!(
            kind_of("600KB", Some(&fault)),
            ("faulty".to_string(), FAULTY)
        );
        assert_eq!(kind_of("lossy", Some(&fault)).0, "lossy, faulty");
        let fix = truth("pause-storm", Some(Role::Fix));
        assert_eq!(kind_of("storm-watchdog", Some(&fix)).1, FIXED);
        let ok = truth("healthy", None);
        assert_eq!(kind_of("fixed-42KB-3m", Some(&ok)).0, "healthy");
        assert_eq!(kind_of("lossless-dcqcn", Some(&ok)).1, "#2ca02c");
        assert_eq!(kind_of("lossy", None), ("lossy".to_string(), "#ff7f0e"));
    }
}
