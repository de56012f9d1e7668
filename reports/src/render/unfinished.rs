//! Flows a run left unfinished, said before any number that hides them.
//!
//! A run that stops with flows still open (its duration ran out, its
//! event budget, a deadlock, nothing left to do while flows wait, or work
//! requests that ended in error) has FCT percentiles and a makespan over
//! its finished flows only: one quick flow out of fifteen gives a good
//! median. [`Unfinished`] counts what did not finish, by workload, and
//! why the run stopped, so that the report and `rocelab run`'s console
//! table say so first and label those numbers with the count they cover.
//!
//! Pure functions of a [`RunResult`]; times in the texts carry their unit.

use sim::results::RunResult;

use super::format::fmt_time;

/// What one variant left unfinished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// Flows that did not complete (`flows_total - flows_completed`).
    pub count: u64,
    /// Flows in the workload.
    pub total: u64,
    /// Of them, flows whose work request ended in error.
    pub failed: u64,
    /// Of them, flows never posted (they wait for flows that did not
    /// complete).
    pub never_posted: u64,
    /// Per workload in first-seen order: name, unfinished, flows (only
    /// workloads with unfinished flows; empty when flows were not recorded).
    pub by_workload: Vec<(String, u64, u64)>,
    /// `stop_reason` of the summary.
    pub stop_reason: String,
    /// Simulated time at the end of the run, ps.
    pub sim_time_ps: u64,
}

impl Unfinished {
    /// What `r` left unfinished, or `None` when every flow completed.
    pub fn of(r: &RunResult) -> Option<Unfinished> {
        let s = &r.summary;
        let count = s.flows_total.saturating_sub(s.flows_completed);
        if count == 0 {
            return None;
        }
        let mut by_workload: Vec<(String, u64, u64)> = Vec::new();
        for f in &r.flows {
            let open = u64::from(f.finish_ps.is_none());
            match by_workload.iter_mut().find(|w| w.0 == f.workload) {
                Some(w) => {
                    w.1 += open;
                    w.2 += 1;
                }
                None => by_workload.push((f.workload.clone(), open, 1)),
            }
        }
        by_workload.retain(|w| w.1 > 0);
        let open = || r.flows.iter().filter(|f| f.finish_ps.is_none());
        Some(Unfinished {
            count,
            total: s.flows_total,
            failed: open().filter(|f| f.failed).count() as u64,
            never_posted: open().filter(|f| f.posted_ps.is_none()).count() as u64,
            by_workload,
            stop_reason: s.stop_reason.clone(),
            sim_time_ps: s.sim_time_ps,
        })
    }

    /// Flows that finished.
    pub fn finished(&self) -> u64 {
        self.total - self.count
    }

    /// `14 of 15 flows did not finish (incast: 14 of 14)`.
    pub fn headline(&self) -> String {
        let mut t = format!(
            "{} of {} flow{} did not finish",
            self.count,
            self.total,
            if self.total == 1 { "" } else { "s" }
        );
        if !self.by_workload.is_empty() {
            let parts: Vec<String> = self
                .by_workload
                .iter()
                .map(|(w, n, of)| {
                    let w = if w.is_empty() { "unnamed" } else { w };
                    format!("{w}: {n} of {of}")
                })
                .collect();
            t.push_str(&format!(" ({})", parts.join(", ")));
        }
        t
    }

    /// Why the run stopped with flows open, as a clause.
    pub fn why(&self) -> String {
        let at = fmt_time(self.sim_time_ps);
        let mut t = match self.stop_reason.as_str() {
            "duration" => format!("the run stopped when its duration ran out, at {at}"),
            "event_budget" => {
                format!("the run stopped when its event budget (max_events) ran out, at {at}")
            }
            "deadlock" => format!("the run stopped at {at} on a PFC deadlock"),
            "idle" => format!(
                "the run stopped at {at} with nothing left to do: the open flows were stuck"
            ),
            "flows_done" => {
                format!("the run stopped at {at} when every flow had completed or failed")
            }
            other => format!("the run stopped ({other}) at {at}"),
        };
        if self.failed > 0 {
            t.push_str(&format!(
                "; {} ended in error (retries exhausted)",
                self.failed
            ));
        }
        if self.never_posted > 0 {
            t.push_str(&format!(
                "; {} never started (they wait for flows that did not finish)",
                self.never_posted
            ));
        }
        t
    }

    /// The whole statement for variant `v`: headline, why, and what the
    /// FCT and makespan numbers cover.
    pub fn sentence(&self, v: &str) -> String {
        format!(
            "{v}: {}; {}. FCT percentiles and makespan cover the {} finished flow{} only.",
            self.headline(),
            self.why(),
            self.finished(),
            if self.finished() == 1 { "" } else { "s" }
        )
    }

    /// The note beside an FCT percentile or the makespan:
    /// `over 1 of 15 flows`.
    pub fn over(&self) -> String {
        format!("over {} of {} flows", self.finished(), self.total)
    }
}

/// The note for a summed PAUSE time longer than the run: it adds up the
/// held time of every port and priority, so it can exceed the simulated
/// time. `None` when it does not.
pub fn pause_sum_note(r: &RunResult) -> Option<&'static str> {
    (r.summary.pause_time_ps > r.summary.sim_time_ps)
        .then_some("summed over ports and priorities, so longer than the run")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_finishes_one_of_three_says_which_and_why() {
        let json = r#"{"summary":{"variant":"lossy","sim_time_ps":100000000000,"events":1,
            "flows_completed":1,"flows_total":3,"goodput_bps":1.0,"drops":5,
            "pause_frames_sent":0,"pause_time_ps":0,"ecn_marked":0,"cnps_sent":0,
            "retransmitted_packets":0,"fct_p50_ps":658000000,"fct_p99_ps":658000000,
            "max_fct_ps":658000000,"makespan_ps":3658000000,"bytes_delivered":1,
            "frames_sent":1,"stop_reason":"duration"},
            "flows":[
            {"id":0,"src":"h1","dst":"h0","workload":"incast","size":1,"start_ps":0,"posted_ps":0,"finish_ps":null,"fct_ps":null,"slowdown":null,"bytes_acked":0,"failed":false},
            {"id":1,"src":"h2","dst":"h0","workload":"incast","size":1,"start_ps":0,"posted_ps":0,"finish_ps":null,"fct_ps":null,"slowdown":null,"bytes_acked":0,"failed":true},
            {"id":2,"src":"h3","dst":"h4","workload":"victim","size":1,"start_ps":0,"posted_ps":0,"finish_ps":658000000,"fct_ps":658000000,"slowdown":1.0,"bytes_acked":1,"failed":false}],
            "groups":[],"ports":[],"nics":[],"queues":[],"pauses":[]}"#;
        let r: RunResult = serde_json::from_str(json).unwrap();
        let u = Unfinished::of(&r).unwrap();
        assert_eq!(
            u.sentence("lossy"),
            "lossy: 2 of 3 flows did not finish (incast: 2 of 2); the run stopped when its \
             duration ran out, at 100.0 ms; 1 ended in error (retries exhausted). FCT \
             percentiles and makespan cover the 1 finished flow only."
        );
        assert_eq!(u.over(), "over 1 of 3 flows");
        assert_eq!(pause_sum_note(&r), None);
    }
}
