//! A turn's queue of ACP updates, between the turn loop that queues them and the readers.
//!
//! A read takes the updates already queued, or else waits in line; the turn loop then hands the
//! next updates to the first waiting read, from its own thread, as it queues them. A waiting
//! read can be a callback rather than a task ([`Updates::read_with`]): the binding settles a
//! JavaScript promise from it directly. Spawned from the JS thread, a task per read waited in
//! tokio's global queue behind every other task spawned from there (a thousand turns' starts),
//! and the first updates of such a burst reached JavaScript after the same turns' exec requests
//! had (bench/README.md, many).
//!
//! Adjacent text chunks of one message are merged as they are read, and a batch never splits a
//! merge: what a reader gets does not depend on how it reads.
//!
//! Every update passes the session's card ledger (`session/cards.rs`) as it is handed to its
//! reader: that is the moment the client is told of it, so the ledger's rules (cards announced
//! before they are updated, nothing new after a cancel) hold on what the reader gets. The host's
//! own cards (opened and settled through the session) join the queue here too.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol_schema::v1 as acp;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::session::cards::{CardLedger, Reading, Wakes};

/// An update in the turn's queue. Boxed because tokio's channel stores its slots inline, 32 to a
/// block allocated up front: 32 × 496 bytes (16 KiB) for every turn, most of it never used, and
/// new memory to fault in for each of a thousand turns starting together.
pub(crate) type QueuedUpdate = Box<acp::SessionUpdate>;

/// Called once, with up to the read's `max` updates, or with none once the turn has delivered
/// everything. Called on whichever thread made them available, with the queue locked: it must
/// not read from the same turn.
pub type DeliverBatch = Box<dyn FnOnce(Vec<acp::SessionUpdate>) + Send>;

/// A read waiting in line.
enum Reader {
    Callback(DeliverBatch),
    /// An `async` read; its future may be dropped while it waits (see [`PendingBatch`]).
    Future(oneshot::Sender<Vec<acp::SessionUpdate>>),
}

struct Queue {
    rx: mpsc::Receiver<QueuedUpdate>,
    /// Taken from the channel and not delivered yet: the update after a merge.
    held: VecDeque<acp::SessionUpdate>,
    /// The host's card updates (`Session::open_card`, `settle_card`), in the order it made them.
    host: VecDeque<acp::SessionUpdate>,
    /// Past the ledger already (ids mapped), and not delivered: a batch whose reader was gone.
    admitted: VecDeque<acp::SessionUpdate>,
    /// The channel is closed and empty: the turn queues nothing more.
    closed: bool,
    /// The ledger has closed the turn's cards (after the last update was read).
    swept: bool,
    cards: CardGate,
    readers: VecDeque<(usize, Reader)>,
}

/// What the queue asks the ledger with: the session's ledger and the turn's cancel.
pub(crate) struct CardGate {
    ledger: Arc<Mutex<CardLedger>>,
    cancel: CancellationToken,
}

impl CardGate {
    pub(crate) fn new(ledger: Arc<Mutex<CardLedger>>, cancel: CancellationToken) -> Self {
        CardGate { ledger, cancel }
    }

    fn reading(&self) -> Reading {
        if self.cancel.is_cancelled() {
            Reading::Cancelled
        } else {
            Reading::Running
        }
    }

    fn ledger(&self) -> MutexGuard<'_, CardLedger> {
        // The ledger's state stays consistent between its calls: a panic elsewhere does not
        // make it unusable.
        self.ledger.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The readers' side of a turn's update queue.
pub(crate) struct Updates {
    queue: Mutex<Queue>,
}

impl Updates {
    pub(crate) fn new(rx: mpsc::Receiver<QueuedUpdate>, cards: CardGate) -> Self {
        Updates {
            queue: Mutex::new(Queue {
                rx,
                held: VecDeque::new(),
                host: VecDeque::new(),
                admitted: VecDeque::new(),
                closed: false,
                swept: false,
                cards,
                readers: VecDeque::new(),
            }),
        }
    }

    /// A card update of the host's own (a card it opens or settles), queued behind what the
    /// queue holds already; the ledger judges it when it is read, like any other.
    pub(crate) fn push_host(&self, update: acp::SessionUpdate) {
        let mut queue = self.lock();
        queue.host.push_back(update);
        queue.serve();
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic in a delivery callback poisons the lock; the queue itself is still consistent.
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads up to `max` updates into `deliver`: now, if some are queued (or the turn is over),
    /// else as soon as the turn queues one. Reads are served in the order they are made.
    pub(crate) fn read_with(&self, max: usize, deliver: DeliverBatch) {
        let mut queue = self.lock();
        queue.readers.push_back((max.max(1), Reader::Callback(deliver)));
        queue.serve();
    }

    /// Up to `max` updates; waits for the first. Empty once the turn has delivered everything.
    pub(crate) async fn next_batch(&self, max: usize) -> Vec<acp::SessionUpdate> {
        let (tx, rx) = oneshot::channel();
        {
            let mut queue = self.lock();
            // Reads whose futures were dropped while waiting would otherwise pile up until the
            // next update (a reader polling with a timeout, say).
            queue.readers.retain(|(_, reader)| !matches!(reader, Reader::Future(tx) if tx.is_closed()));
            queue.readers.push_back((max.max(1), Reader::Future(tx)));
            queue.serve();
        }
        let mut pending = PendingBatch { rx, updates: self };
        (&mut pending.rx).await.unwrap_or_default()
    }

    /// Hands waiting reads what has been queued since: the turn loop calls it after queueing an
    /// update, and once more after its end of the channel is dropped.
    pub(crate) fn serve(&self) {
        self.lock().serve();
    }
}

impl Queue {
    /// The next update, from what is held first, then the host's, then from the channel.
    fn pop(&mut self) -> Option<acp::SessionUpdate> {
        if let Some(update) = self.held.pop_front() {
            return Some(update);
        }
        if let Some(update) = self.host.pop_front() {
            return Some(update);
        }
        match self.rx.try_recv() {
            Ok(update) => Some(*update),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => {
                self.closed = true;
                None
            }
        }
    }

    /// The next update with the text chunks queued right after it merged in.
    fn next_merged(&mut self) -> Option<acp::SessionUpdate> {
        let mut first = self.pop()?;
        while let Some(next) = self.pop() {
            if mergeable(&first, &next) {
                append_text(&mut first, next);
            } else {
                self.held.push_front(next);
                break;
            }
        }
        Some(first)
    }

    /// Serves waiting reads in order for as long as there is something to give them; once the
    /// turn is over and everything is delivered, every waiting read gets an empty batch.
    fn serve(&mut self) {
        while let Some((max, _)) = self.readers.front() {
            let max = *max;
            let mut batch = Vec::new();
            let mut wakes = Wakes::default();
            while batch.len() < max {
                if let Some(update) = self.admitted.pop_front() {
                    batch.push(update);
                    continue;
                }
                let Some(update) = self.next_merged() else { break };
                let reading = self.cards.reading();
                if let Some(update) = self.cards.ledger().admit(update, reading, &mut wakes) {
                    batch.push(update);
                }
            }
            if batch.is_empty() && self.closed && !self.swept {
                // The turn's last update is read: the cards it left open end now.
                self.swept = true;
                let reading = self.cards.reading();
                let mut swept = self.cards.ledger().end_turn(reading, &mut wakes);
                if swept.len() > max {
                    self.admitted.extend(swept.split_off(max));
                }
                batch = swept;
            }
            if batch.is_empty() && !self.closed {
                wakes.send();
                return;
            }
            let Some((_, reader)) = self.readers.pop_front() else { return };
            match reader {
                Reader::Callback(deliver) => deliver(batch),
                Reader::Future(tx) => {
                    if let Err(batch) = tx.send(batch) {
                        // The read was dropped: its updates go back, first in line.
                        self.hand_back(batch);
                    }
                }
            }
            // After the batch is with its reader: a request about a card it announced goes
            // out behind the card.
            wakes.send();
        }
    }

    fn hand_back(&mut self, batch: Vec<acp::SessionUpdate>) {
        for update in batch.into_iter().rev() {
            self.admitted.push_front(update);
        }
    }
}

/// An `async` read in progress. Dropped before its batch was taken (a `select!` that went the
/// other way), it gives the batch back to the queue, so no update is lost.
struct PendingBatch<'a> {
    rx: oneshot::Receiver<Vec<acp::SessionUpdate>>,
    updates: &'a Updates,
}

impl Drop for PendingBatch<'_> {
    fn drop(&mut self) {
        // After `close`, the batch either arrived already or can no longer be sent.
        self.rx.close();
        if let Ok(batch) = self.rx.try_recv() {
            let mut queue = self.updates.lock();
            queue.hand_back(batch);
            queue.serve();
        }
    }
}

/// Whether `b` may be merged into `a`: text chunks of the same message (or thought).
fn mergeable(a: &acp::SessionUpdate, b: &acp::SessionUpdate) -> bool {
    use acp::SessionUpdate as S;
    match (a, b) {
        (S::AgentMessageChunk(x), S::AgentMessageChunk(y)) | (S::AgentThoughtChunk(x), S::AgentThoughtChunk(y)) => {
            x.message_id == y.message_id
                && matches!(x.content, acp::ContentBlock::Text(_))
                && matches!(y.content, acp::ContentBlock::Text(_))
        }
        _ => false,
    }
}

fn append_text(into: &mut acp::SessionUpdate, from: acp::SessionUpdate) {
    use acp::SessionUpdate as S;
    if let (S::AgentMessageChunk(x) | S::AgentThoughtChunk(x), S::AgentMessageChunk(y) | S::AgentThoughtChunk(y)) =
        (into, from)
    {
        if let (acp::ContentBlock::Text(a), acp::ContentBlock::Text(b)) = (&mut x.content, y.content) {
            a.text.push_str(&b.text);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A queue whose turn runs (not cancelled), with a ledger of its own.
    fn queue(rx: mpsc::Receiver<QueuedUpdate>) -> Updates {
        Updates::new(rx, CardGate::new(Arc::default(), CancellationToken::new()))
    }

    fn text(id: &str, text: &str) -> QueuedUpdate {
        let block = acp::ContentBlock::Text(acp::TextContent::new(text));
        Box::new(acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(block).message_id(acp::MessageId::new(id)),
        ))
    }

    /// `(message id, text)` of each update, to compare batches.
    fn texts(batch: &[acp::SessionUpdate]) -> Vec<(String, String)> {
        batch
            .iter()
            .map(|u| match u {
                acp::SessionUpdate::AgentMessageChunk(c) => match &c.content {
                    acp::ContentBlock::Text(t) => {
                        (c.message_id.as_ref().map(|m| m.to_string()).unwrap_or_default(), t.text.clone())
                    }
                    other => panic!("not text: {other:?}"),
                },
                other => panic!("not a message chunk: {other:?}"),
            })
            .collect()
    }

    fn pair(id: &str, text: &str) -> (String, String) {
        (id.to_string(), text.to_string())
    }

    type Got = Arc<Mutex<Vec<Vec<acp::SessionUpdate>>>>;

    /// A callback read that records its batch and the thread it was delivered on.
    fn recorder(got: &Got, threads: &Arc<Mutex<Vec<std::thread::ThreadId>>>) -> DeliverBatch {
        let (got, threads) = (got.clone(), threads.clone());
        Box::new(move |batch| {
            got.lock().unwrap().push(batch);
            threads.lock().unwrap().push(std::thread::current().id());
        })
    }

    #[test]
    fn a_read_takes_what_is_queued_at_once_merged_and_up_to_its_max() {
        let (tx, rx) = mpsc::channel(16);
        let updates = queue(rx);
        for (id, t) in [("m1", "a"), ("m1", "b"), ("m2", "c"), ("m3", "d")] {
            tx.try_send(text(id, t)).unwrap();
        }
        let (got, threads) = (Got::default(), Arc::default());
        updates.read_with(2, recorder(&got, &threads));
        // Merged m1, then m2; m3 stays for the next read.
        assert_eq!(texts(&got.lock().unwrap()[0]), [pair("m1", "ab"), pair("m2", "c")]);
        assert_eq!(threads.lock().unwrap()[0], std::thread::current().id(), "delivered on the reading thread");
        updates.read_with(8, recorder(&got, &threads));
        assert_eq!(texts(&got.lock().unwrap()[1]), [pair("m3", "d")]);
    }

    #[test]
    fn a_waiting_read_is_served_by_the_thread_that_queues_and_reads_keep_their_order() {
        let (tx, rx) = mpsc::channel(16);
        let updates = Arc::new(queue(rx));
        let (got, threads) = (Got::default(), Arc::default());
        updates.read_with(1, recorder(&got, &threads));
        updates.read_with(1, recorder(&got, &threads));
        updates.serve();
        assert!(got.lock().unwrap().is_empty(), "nothing queued, nothing delivered");
        let producer = {
            let updates = updates.clone();
            std::thread::spawn(move || {
                tx.try_send(text("m1", "first")).unwrap();
                tx.try_send(text("m2", "second")).unwrap();
                updates.serve();
                std::thread::current().id()
            })
        };
        let producer = producer.join().unwrap();
        let got = got.lock().unwrap();
        assert_eq!(got.iter().map(|b| texts(b)).collect::<Vec<_>>(), [[pair("m1", "first")], [pair("m2", "second")]]);
        assert!(threads.lock().unwrap().iter().all(|t| *t == producer), "delivered on the producer's thread");
    }

    #[test]
    fn once_the_turn_is_over_waiting_and_later_reads_get_the_rest_then_nothing() {
        let (tx, rx) = mpsc::channel(16);
        let updates = queue(rx);
        let (got, threads) = (Got::default(), Arc::default());
        updates.read_with(4, recorder(&got, &threads));
        tx.try_send(text("m1", "last")).unwrap();
        updates.read_with(4, recorder(&got, &threads));
        drop(tx);
        updates.serve();
        updates.read_with(4, recorder(&got, &threads));
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 3, "every read answered");
        assert_eq!(texts(&got[0]), [pair("m1", "last")]);
        assert!(got[1].is_empty() && got[2].is_empty());
    }

    #[tokio::test]
    async fn a_dropped_async_read_gives_its_updates_back() {
        let (tx, rx) = mpsc::channel(16);
        let updates = queue(rx);
        {
            let read = updates.next_batch(8);
            tokio::pin!(read);
            assert!(futures::poll!(&mut read).is_pending(), "nothing queued yet");
            tx.try_send(text("m1", "kept")).unwrap();
            updates.serve(); // delivered into the read, which is then dropped unread
        }
        let within = |read| tokio::time::timeout(std::time::Duration::from_secs(5), read);
        assert_eq!(texts(&within(updates.next_batch(8)).await.expect("not lost")), [pair("m1", "kept")]);
        {
            // Dropped before anything arrived: it must not take the next update either.
            let read = updates.next_batch(8);
            tokio::pin!(read);
            assert!(futures::poll!(&mut read).is_pending());
        }
        tx.try_send(text("m2", "next")).unwrap();
        updates.serve();
        assert_eq!(texts(&within(updates.next_batch(8)).await.expect("not taken")), [pair("m2", "next")]);
    }
}
