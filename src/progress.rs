//! The progress bar of `rocelab run`: the simulator reports how far a run
//! has got ([`sim::run::Progress`]); this draws it on stderr once the run
//! has taken two wall seconds, and only when stderr is a terminal. And
//! Ctrl-C ([`interrupt`]): the first ends the run in progress, whose
//! results are written as they stand; a second quits at once.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use indicatif::{ProgressBar, ProgressStyle};
use sim::run::{Progress, ProgressFn};

/// The flag Ctrl-C sets, with its handler installed on first use; `None`
/// when no handler could be installed (Ctrl-C then ends the process as
/// usual).
pub(crate) fn interrupt() -> Option<Arc<AtomicBool>> {
    static FLAG: OnceLock<Option<Arc<AtomicBool>>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        ctrlc::set_handler(move || {
            if f.swap(true, Ordering::SeqCst) {
                // The second Ctrl-C: quit now (the shell's 128 + SIGINT).
                std::process::exit(130);
            }
            eprintln!(
                "\ninterrupted: ending the run and writing what it measured so far (Ctrl-C again to quit at once)"
            );
        })
        .ok()
        .map(|()| flag)
    })
    .clone()
}

/// True once Ctrl-C was pressed.
pub(crate) fn interrupted() -> bool {
    interrupt().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// The bar of one run; cleared when dropped.
pub(crate) struct RunBar {
    bar: Arc<Mutex<Option<ProgressBar>>>,
}

impl RunBar {
    /// A bar for a run, or `None` when stderr is not a terminal (or the
    /// caller wants quiet).
    pub(crate) fn new(wanted: bool) -> Option<RunBar> {
        (wanted && std::io::stderr().is_terminal()).then(|| RunBar {
            bar: Arc::new(Mutex::new(None)),
        })
    }

    /// The observer to hand the simulator.
    pub(crate) fn observer(&self) -> ProgressFn {
        let bar = Arc::clone(&self.bar);
        Arc::new(move |p: &Progress<'_>| {
            if let Ok(mut bar) = bar.lock() {
                draw(&mut bar, p);
            }
        })
    }
}

impl Drop for RunBar {
    fn drop(&mut self) {
        if let Ok(mut bar) = self.bar.lock() {
            if let Some(b) = bar.take() {
                b.finish_and_clear();
            }
        }
    }
}

/// Start the bar once the run has taken two wall seconds, then move it.
/// It counts what the run will actually do: flows finished of all flows
/// when there are flows (a duration is only a cap), else simulated time up
/// to the duration; it names the variant, the events processed per wall
/// second so far and an ETA.
fn draw(bar: &mut Option<ProgressBar>, p: &Progress<'_>) {
    if bar.is_none() && p.wall.as_secs_f64() > 2.0 {
        let (b, unit) = match (p.flows_total, p.end) {
            (1.., _) => (ProgressBar::new(p.flows_total as u64), "flows finished"),
            (0, Some(e)) => (ProgressBar::new(e.as_ps() / 1_000_000), "simulated us"),
            (0, None) => (ProgressBar::new_spinner(), "simulated us"),
        };
        let style = ProgressStyle::with_template(&format!(
            "{{msg}} [{{bar:30}}] {{pos}}/{{len}} {unit}, ETA {{eta}}"
        ));
        if let Ok(style) = style {
            b.set_style(style);
        }
        *bar = Some(b);
    }
    if let Some(b) = bar {
        b.set_message(bar_message(p));
        b.set_position(if p.flows_total > 0 {
            p.flows_done as u64
        } else {
            p.now.as_ps() / 1_000_000
        });
    }
}

/// The bar's message: the variant and the events processed per wall
/// second since the event loop started.
fn bar_message(p: &Progress<'_>) -> String {
    let rate = p.events as f64 / p.wall.as_secs_f64().max(1e-9) / 1e6;
    format!("variant {}, {rate:.2} M events/s", p.variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_variant_and_the_event_rate() {
        let p = Progress {
            variant: "lossy",
            wall: std::time::Duration::from_millis(2500),
            now: roce::time::Instant::ZERO,
            end: None,
            flows_done: 3,
            flows_total: 10,
            events: 4_000_000,
        };
        assert_eq!(bar_message(&p), "variant lossy, 1.60 M events/s");
    }
}
