//! The controller's command slots (`controller.command_slots`): how many commands it holds at once.
//!
//! An NVMe controller fetches commands from the host's submission queue into a finite set of internal slots
//! (its command buffers); a command that finds them all taken stays in the submission queue until one
//! completes, and the queue is fetched in order. So at a queue deeper than the slots, a command waits first for
//! the commands submitted before it to leave the submission queue, whatever it is: in a deep mix of reads and
//! buffered writes, a read waits its turn behind the writes queued before it, and only inside the controller
//! can it overtake them (read priority, program suspend). Without the limit the controller takes every command
//! at once and its reads overtake the whole queue ("SSD Performance Report", Tables 6, 8, 10 and 12: at QD 512
//! and 1024 the Kingston NV2's mixed reads wait tens of ms, as its throughput and the depth say by Little's law).
//!
//! A command's completion time is known when it is taken, so a slot frees at a known instant: the slots are
//! the completion times of the commands held, earliest first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::SimTime;

pub struct CommandSlots {
    slots: usize,
    /// When each command held completes (and gives its slot back), earliest first.
    held: BinaryHeap<Reverse<SimTime>>,
    /// When the last command was fetched: the submission queue is fetched in order.
    last_fetch: SimTime,
}

impl CommandSlots {
    /// None for 0 (unlimited: every command is taken when it is submitted, as before the key).
    pub fn new(slots: u32) -> Option<CommandSlots> {
        (slots > 0).then(|| CommandSlots {
            slots: slots as usize,
            held: BinaryHeap::with_capacity(slots as usize + 1),
            last_fetch: SimTime::ZERO,
        })
    }

    /// A command submitted at `now`: when the controller fetches it (not before the command submitted before
    /// it, and once a slot is free). Call [`Self::hold`] with its completion next.
    #[inline]
    pub fn fetch(&mut self, now: SimTime) -> SimTime {
        let mut at = now.max(self.last_fetch);
        while self.held.peek().is_some_and(|&Reverse(t)| t <= at) {
            self.held.pop();
        }
        if self.held.len() >= self.slots {
            // Every slot is taken: the earliest to complete gives its slot to this command.
            let Reverse(freed) = self.held.pop().expect("a slot is held");
            at = at.max(freed);
        }
        self.last_fetch = at;
        at
    }

    /// The command just fetched holds its slot until `done`.
    #[inline]
    pub fn hold(&mut self, done: SimTime) {
        self.held.push(Reverse(done));
    }

    /// When the last command was fetched (tests).
    #[cfg(test)]
    pub fn last_fetch(&self) -> SimTime {
        self.last_fetch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_slots_is_unlimited() {
        assert!(CommandSlots::new(0).is_none());
    }

    #[test]
    fn a_command_waits_for_the_earliest_slot_to_free() {
        let mut s = CommandSlots::new(2).expect("two slots");
        assert_eq!(s.fetch(SimTime(0)), SimTime(0));
        s.hold(SimTime(100));
        assert_eq!(s.fetch(SimTime(0)), SimTime(0));
        s.hold(SimTime(50));
        // Both slots taken: the third waits for the one done at 50.
        assert_eq!(s.fetch(SimTime(10)), SimTime(50));
        s.hold(SimTime(60));
        // The fourth: the slot freed at 60.
        assert_eq!(s.fetch(SimTime(20)), SimTime(60));
        s.hold(SimTime(70));
        // A command submitted after every slot is free again is taken at once.
        assert_eq!(s.fetch(SimTime(200)), SimTime(200));
    }

    #[test]
    fn the_submission_queue_is_fetched_in_order() {
        let mut s = CommandSlots::new(1).expect("one slot");
        assert_eq!(s.fetch(SimTime(0)), SimTime(0));
        s.hold(SimTime(1_000));
        assert_eq!(s.fetch(SimTime(5)), SimTime(1_000));
        s.hold(SimTime(1_010));
        // Submitted before the previous command was fetched: not fetched before it, whatever its slot.
        assert_eq!(s.fetch(SimTime(6)), SimTime(1_010));
        s.hold(SimTime(1_020));
    }
}
