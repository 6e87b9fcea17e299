//! What a turn's readers want done with an update that does not fit the queue: one state,
//! changed only through the named transitions below, read by the turn loop when the queue is
//! full.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The readers' side of a turn, as the turn loop sees it when its update queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum ReaderState {
    /// Nobody has asked for an update yet: wait for room.
    Unread,
    /// Someone reads the updates: wait for room, never drop one.
    Reading,
    /// Nobody will read them: the result was awaited, or the reader let go, before any read.
    /// Drop what does not fit.
    Unwanted,
    /// Reads were made and a discard was asked for too (the reader let go after reading, or
    /// started reading after the result was awaited): drop what does not fit once the turn is
    /// cancelled.
    Released,
    /// Every handle of the turn is gone: drop what does not fit.
    Abandoned,
}

impl ReaderState {
    const ALL: [ReaderState; 5] = [
        ReaderState::Unread,
        ReaderState::Reading,
        ReaderState::Unwanted,
        ReaderState::Released,
        ReaderState::Abandoned,
    ];

    /// Whether an update that does not fit the queue is dropped rather than waited for.
    pub(super) fn drops_overflow(self, cancelled: bool) -> bool {
        match self {
            ReaderState::Unread | ReaderState::Reading => false,
            ReaderState::Released => cancelled,
            ReaderState::Unwanted | ReaderState::Abandoned => true,
        }
    }

    /// A read was made.
    fn read(self) -> Self {
        match self {
            ReaderState::Unread => ReaderState::Reading,
            ReaderState::Unwanted => ReaderState::Released,
            other => other,
        }
    }

    /// The reader let go (`break` out of the iteration).
    fn release(self) -> Self {
        match self {
            ReaderState::Unread => ReaderState::Unwanted,
            ReaderState::Reading => ReaderState::Released,
            other => other,
        }
    }

    /// The result is awaited: unless someone reads, nobody will.
    fn result_awaited(self) -> Self {
        match self {
            ReaderState::Unread => ReaderState::Unwanted,
            other => other,
        }
    }
}

/// A [`ReaderState`] shared between a turn's handles and its loop.
pub(super) struct Readers {
    state: AtomicU8,
    /// Woken when a transition may let the loop drop what it waits to queue.
    may_drop: Notify,
}

impl Readers {
    pub(super) fn new() -> Self {
        Readers { state: AtomicU8::new(ReaderState::Unread as u8), may_drop: Notify::new() }
    }

    pub(super) fn state(&self) -> ReaderState {
        let value = self.state.load(Ordering::SeqCst);
        ReaderState::ALL[usize::from(value)]
    }

    /// Resolves at the next transition that may let the loop drop an update.
    pub(super) fn may_drop(&self) -> Notified<'_> {
        self.may_drop.notified()
    }

    pub(super) fn read(&self) {
        self.apply(ReaderState::read);
    }

    pub(super) fn release(&self) {
        self.apply(ReaderState::release);
        self.may_drop.notify_waiters();
    }

    pub(super) fn result_awaited(&self) {
        self.apply(ReaderState::result_awaited);
        self.may_drop.notify_waiters();
    }

    pub(super) fn abandon(&self) {
        self.apply(|_| ReaderState::Abandoned);
        self.may_drop.notify_waiters();
    }

    fn apply(&self, transition: impl Fn(ReaderState) -> ReaderState) {
        let _always_some = self.state.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |value| {
            Some(transition(ReaderState::ALL[usize::from(value)]) as u8)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::ReaderState::*;
    use super::*;

    #[test]
    fn the_state_is_what_the_handles_did() {
        type Steps = &'static [fn(&Readers)];
        let cases: [(Steps, ReaderState); 7] = [
            (&[], Unread),
            (&[Readers::read], Reading),
            (&[Readers::result_awaited], Unwanted),
            (&[Readers::release], Unwanted),
            (&[Readers::read, Readers::release], Released),
            (&[Readers::result_awaited, Readers::read], Released),
            (&[Readers::read, Readers::abandon], Abandoned),
        ];
        for (steps, expected) in cases {
            let readers = Readers::new();
            for step in steps {
                step(&readers);
            }
            assert_eq!(readers.state(), expected, "after {} steps", steps.len());
        }
        // Awaiting the result while reading changes nothing: the reader still wants every update.
        let readers = Readers::new();
        readers.read();
        readers.result_awaited();
        assert_eq!(readers.state(), Reading);
    }

    #[test]
    fn only_a_reader_keeps_every_update() {
        assert!(!Unread.drops_overflow(true) && !Reading.drops_overflow(true));
        assert!(!Released.drops_overflow(false) && Released.drops_overflow(true));
        assert!(Unwanted.drops_overflow(false) && Abandoned.drops_overflow(false));
    }
}
