//! PFC watchdogs: the switches' storm watchdog (SONiC `pfcwd`) and the
//! NICs' PAUSE storm prevention (ConnectX device stall watermarks).
//!
//! # Switch watchdog
//!
//! Semantics of SONiC's detection and restoration scripts, per egress
//! (port, lossless priority) of every switch. Polls fall on a grid of
//! `poll_interval` from time zero. Each poll samples the queue: held off
//! by PAUSE or not, PFC frames received, PAUSE episodes ended.
//!
//! * **Detection** (queue `operational`): when the queue was held off at
//!   the previous poll and at this one, PFC frames arrived in between and
//!   no episode ended, `poll_interval` is charged against a countdown of
//!   `detection_time`; the poll that finds the countdown at or below one
//!   interval declares the storm. Any other poll resets the countdown.
//!   A storm that starts at `t` is declared `ceil(detection_time /
//!   poll_interval)` intervals after the first poll after `t`: for a
//!   detection time that is a multiple of the interval (SONiC's defaults
//!   are equal), more than `detection_time` and at most `detection_time +
//!   poll_interval` after `t`.
//! * **Action** (queue `stormed`): `forward` makes the transmitter ignore
//!   PAUSE on the priority; `drop` does that, drops what the queue holds
//!   and every frame that arrives for it (TX drop), and every frame of the
//!   priority arriving on the port (RX drop); `alert` only records.
//! * **Restoration**: a stormed queue is charged `poll_interval` for every
//!   poll interval without a PFC frame received; at `restoration_time` it
//!   is restored (`alert`: as soon as the storm condition no longer holds).
//!
//! The condition is about the queue, not its cause: a NIC that stalls, a
//! slow receiver or a deadlock cycle all keep the queue held off with PFC
//! frames arriving (the peer refreshes its XOFF). The poll interval must
//! be longer than the peer's refresh period (at 100 Gbit/s and 65535
//! quanta, 168 us), as it is on real switches (hundreds of ms).
//!
//! Cost: nothing until a switch port receives an XOFF; then polls run only
//! while some watched queue is held off or stormed.
//!
//! # NIC storm prevention
//!
//! A NIC that holds XOFF on a priority without a break counts
//! `tx_pause_storm_warning_events` at the minor watermark and
//! `tx_pause_storm_error_events` at the critical one, where it also stops
//! sending PAUSE (the peer's pause then expires) until its receive buffer
//! has drained to XON. One event per NIC XOFF episode checks each
//! watermark.

use roce::time::{Duration, Instant};

use super::event::{Ev, NONE};
use super::monitors::{Watchdog, WdQueue};
use super::switch::PfcChange;
use super::world::World;
use crate::config::PfcWatchdogAction;
use crate::results::{PfcwdEvent, PfcwdStats};

fn action_name(a: PfcWatchdogAction) -> &'static str {
    match a {
        PfcWatchdogAction::Drop => "drop",
        PfcWatchdogAction::Forward => "forward",
        PfcWatchdogAction::Alert => "alert",
    }
}

impl World<'_> {
    /// Switch port `p` was just told to stop priority `prio`: watch that
    /// queue from the next poll on.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn wd_arm(&mut self, p: u32, prio: u8, now: Instant) {
        if self.ports[p as usize].pfc_mask & (1 << prio) == 0
            || self.switch_of_node[self.ports[p as usize].node as usize] == NONE
        {
            return;
        }
        let Some(wd) = self.wd.as_deref_mut() else {
            return;
        };
        let key = p as usize * 8 + usize::from(prio);
        if wd.slot[key] == NONE {
            wd.slot[key] = wd.queues.len() as u32;
            wd.queues.push(WdQueue {
                port: p,
                prio,
                detect_left: wd.detection,
                ..WdQueue::default()
            });
        }
        let qi = wd.slot[key];
        let q = &mut wd.queues[qi as usize];
        if !q.active {
            // Not polled since a poll found it idle: that poll's sample.
            let c = &self.ports[p as usize].prio[usize::from(prio)];
            q.active = true;
            q.last_paused = false;
            q.last_rx_pause = c.rx_pause;
            q.last_transitions = c.rx_pause_transition;
            q.detect_left = wd.detection;
            wd.active.push(qi);
        }
        if !wd.poll_pending {
            wd.poll_pending = true;
            let next = (now.as_ps() / wd.poll + 1) * wd.poll;
            self.q.schedule(Instant::from_ps(next), Ev::WdPoll);
        }
    }

    /// A watchdog poll: sample every active queue.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn wd_poll(&mut self, now: Instant) {
        let Some(mut wd) = self.wd.take() else {
            return;
        };
        wd.poll_pending = false;
        let active = std::mem::take(&mut wd.active);
        let mut keep = Vec::with_capacity(active.len());
        for qi in active {
            let (p, prio) = {
                let q = &wd.queues[qi as usize];
                (q.port as usize, usize::from(q.prio))
            };
            self.ports[p].settle_pause(now, prio);
            let port = &self.ports[p];
            let paused = port.paused_until[prio] > now;
            let rx_pause = port.prio[prio].rx_pause;
            let transitions = port.prio[prio].rx_pause_transition;
            let q = &mut wd.queues[qi as usize];
            let storm_cond = q.last_paused
                && paused
                && rx_pause > q.last_rx_pause
                && transitions == q.last_transitions;
            let quiet = rx_pause == q.last_rx_pause;
            let mut change = None;
            if !q.stormed {
                if storm_cond {
                    if q.detect_left <= wd.poll {
                        change = Some(true);
                        q.detect_left = wd.detection;
                    } else {
                        q.detect_left -= wd.poll;
                    }
                } else {
                    q.detect_left = wd.detection;
                }
            } else if wd.action == PfcWatchdogAction::Alert {
                if !storm_cond {
                    change = Some(false);
                }
            } else if quiet {
                if q.restore_left <= wd.poll {
                    change = Some(false);
                } else {
                    q.restore_left -= wd.poll;
                }
            } else {
                q.restore_left = wd.restoration;
            }
            q.last_paused = paused;
            q.last_rx_pause = rx_pause;
            q.last_transitions = transitions;
            match change {
                Some(true) => self.wd_storm(&mut wd, qi, now),
                Some(false) => self.wd_restore(&mut wd, qi, now),
                None => {}
            }
            let q = &mut wd.queues[qi as usize];
            if q.stormed || paused || q.detect_left != wd.detection {
                keep.push(qi);
            } else {
                q.active = false;
            }
        }
        if !keep.is_empty() {
            wd.poll_pending = true;
            self.q
                .schedule(now + Duration::from_ps(wd.poll), Ev::WdPoll);
        }
        wd.active = keep;
        self.wd = Some(wd);
    }

    /// Queue `qi` is declared in a storm: record it and apply the action.
    fn wd_storm(&mut self, wd: &mut Watchdog, qi: u32, now: Instant) {
        let action = wd.action;
        let q = &mut wd.queues[qi as usize];
        let (p, prio) = (q.port, q.prio);
        let bit = 1u8 << prio;
        let c = &self.ports[p as usize].prio[usize::from(prio)];
        q.stormed = true;
        q.detected += 1;
        q.restore_left = wd.restoration;
        q.storm_tx0 = c.tx_packets;
        q.storm_rx0 = c.rx_packets;
        q.cur_tx_drop = 0;
        q.cur_rx_drop = 0;
        wd.events
            .push(self.wd_event(p, prio, now, "storm_detected", action));
        match action {
            PfcWatchdogAction::Alert => {}
            PfcWatchdogAction::Forward => {
                self.ports[p as usize].wd_ignore |= bit;
                self.kick(p, now);
            }
            PfcWatchdogAction::Drop => {
                self.ports[p as usize].wd_ignore |= bit;
                self.ports[p as usize].wd_drop |= bit;
                let mut dropped = 0;
                while let Some(h) = self
                    .pkts
                    .pop_front(&mut self.ports[p as usize].queues[usize::from(prio)])
                {
                    let pkt = self.pkts.take(h);
                    self.pkts.free_int(pkt.int);
                    self.ports[p as usize].qbytes[usize::from(prio)] -= u64::from(pkt.wire);
                    depart_and_signal(self, p, pkt.ingress, prio, pkt.wire, now);
                    dropped += 1;
                }
                self.drops += dropped;
                let q = &mut wd.queues[qi as usize];
                q.cur_tx_drop += dropped;
                self.kick(p, now);
            }
        }
    }

    /// Queue `qi` is restored: undo the action, fold the storm's counters.
    fn wd_restore(&mut self, wd: &mut Watchdog, qi: u32, now: Instant) {
        let (p, prio) = {
            let q = &wd.queues[qi as usize];
            (q.port, q.prio)
        };
        let last = self.wd_current(&wd.queues[qi as usize]);
        let q = &mut wd.queues[qi as usize];
        q.stormed = false;
        q.restored += 1;
        q.detect_left = wd.detection;
        q.tx_ok += last[0];
        q.tx_drop += last[1];
        q.rx_ok += last[2];
        q.rx_drop += last[3];
        q.last = last;
        let bit = 1u8 << prio;
        let port = &mut self.ports[p as usize];
        port.wd_ignore &= !bit;
        port.wd_drop &= !bit;
        wd.events
            .push(self.wd_event(p, prio, now, "storm_restored", wd.action));
        self.kick(p, now);
    }

    /// TX ok/drop and RX ok/drop of the storm in progress on `q`.
    fn wd_current(&self, q: &WdQueue) -> [u64; 4] {
        let c = &self.ports[q.port as usize].prio[usize::from(q.prio)];
        let rx = c.rx_packets - q.storm_rx0;
        [
            c.tx_packets - q.storm_tx0,
            q.cur_tx_drop,
            rx.saturating_sub(q.cur_rx_drop),
            q.cur_rx_drop,
        ]
    }

    fn wd_event(
        &self,
        p: u32,
        prio: u8,
        now: Instant,
        event: &str,
        action: PfcWatchdogAction,
    ) -> PfcwdEvent {
        let port = &self.ports[p as usize];
        let name = |n: u32| self.topo.nodes[n as usize].name.clone();
        PfcwdEvent {
            time_ps: now.as_ps(),
            node: name(port.node),
            port: port.local,
            peer: name(self.ports[port.peer as usize].node),
            priority: prio,
            event: event.to_string(),
            action: action_name(action).to_string(),
        }
    }

    /// A frame of `prio` for stormed queue (`out`, `prio`) under `drop`
    /// (`tx`), or arriving on stormed port `out` (`!tx`), is dropped.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn wd_drop_frame(&mut self, out: u32, prio: u8, tx: bool) {
        self.drops += 1;
        let Some(wd) = self.wd.as_deref_mut() else {
            return;
        };
        let qi = wd.slot[out as usize * 8 + usize::from(prio)];
        if let Some(q) = wd.queues.get_mut(qi as usize) {
            if tx {
                q.cur_tx_drop += 1;
            } else {
                q.cur_rx_drop += 1;
            }
        }
    }

    /// The watchdog's events and the `pfcwd show stats` rows.
    pub(crate) fn wd_results(&self) -> (Vec<PfcwdEvent>, Vec<PfcwdStats>) {
        let Some(wd) = self.wd.as_deref() else {
            return (Vec::new(), Vec::new());
        };
        let mut order: Vec<&WdQueue> = wd.queues.iter().filter(|q| q.detected > 0).collect();
        order.sort_by_key(|q| (q.port, q.prio));
        let stats = order
            .into_iter()
            .map(|q| {
                let (mut tot, mut last) = ([q.tx_ok, q.tx_drop, q.rx_ok, q.rx_drop], q.last);
                if q.stormed {
                    last = self.wd_current(q);
                    for (t, l) in tot.iter_mut().zip(last) {
                        *t += l;
                    }
                }
                let port = &self.ports[q.port as usize];
                PfcwdStats {
                    node: self.topo.nodes[port.node as usize].name.clone(),
                    port: port.local,
                    priority: q.prio,
                    status: if q.stormed { "stormed" } else { "operational" }.to_string(),
                    storms_detected: q.detected,
                    storms_restored: q.restored,
                    tx_ok: tot[0],
                    tx_drop: tot[1],
                    rx_ok: tot[2],
                    rx_drop: tot[3],
                    tx_last_ok: last[0],
                    tx_last_drop: last[1],
                    rx_last_ok: last[2],
                    rx_last_drop: last[3],
                }
            })
            .collect();
        (wd.events.clone(), stats)
    }

    /// NIC port `p` started holding XOFF on `prio` (generation `gen`):
    /// check the stall watermarks later.
    pub(crate) fn nic_stall_arm(&mut self, p: u32, prio: u8, gen: u32, now: Instant) {
        let ps = &self.cfg.nic.pause_storm;
        if !ps.enabled {
            return;
        }
        self.q.schedule(
            now + ps.minor_watermark(),
            Ev::NicStall {
                port: p,
                prio,
                gen,
                critical: false,
            },
        );
    }

    /// A stall watermark of NIC port `p` is due; false when the XOFF
    /// episode it belongs to already ended.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn nic_stall(
        &mut self,
        p: u32,
        prio: u8,
        gen: u32,
        critical: bool,
        now: Instant,
    ) -> bool {
        let pr = usize::from(prio);
        let port = &mut self.ports[p as usize];
        let Some(since) = port.xoff_since[pr] else {
            return false;
        };
        if port.xoff_gen[pr] != gen {
            return false;
        }
        let host = self.host_of_node[port.node as usize];
        if host == NONE {
            return false;
        }
        if !critical {
            self.nics[host as usize].storm_warning += 1;
            let at = since + self.cfg.nic.pause_storm.critical;
            self.q.schedule(
                at.max(now),
                Ev::NicStall {
                    port: p,
                    prio,
                    gen,
                    critical: true,
                },
            );
            return true;
        }
        // Critical: stop sending PAUSE; the peer resumes when its pause
        // expires. The receive buffer's XON clears the block.
        port.xoff_since[pr] = None;
        port.prio[pr].tx_pause_duration_ps += (now - since).as_ps();
        port.xoff_gen[pr] = port.xoff_gen[pr].wrapping_add(1);
        let nic = &mut self.nics[host as usize];
        nic.storm_error += 1;
        nic.stall_block |= 1 << prio;
        true
    }
}

/// Give back the buffer of a frame of `len` bytes that entered switch
/// port `ingress` (local number) and leaves egress `p`; send XON upstream
/// when that ends a pause.
fn depart_and_signal(w: &mut World<'_>, p: u32, ingress: u16, prio: u8, len: u32, now: Instant) {
    let node = w.ports[p as usize].node as usize;
    let sw = w.switch_of_node[node] as usize;
    let s = &mut w.switches[sw];
    if s.mmu.depart(ingress, prio, u64::from(len)) == PfcChange::Resume {
        let ing = s.port_base + u32::from(ingress);
        w.send_pfc(ing, prio, false, now, false);
    }
}
