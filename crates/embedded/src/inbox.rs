//! The client messages of one run, as the script waits for them: in order, with what the
//! client still owes (execs not closed, queries not answered) and whether it cancelled the run.

use std::collections::{HashMap, VecDeque};

use tokio::sync::mpsc;

use cursor_acp_core::proto::agent::v1 as pb;

/// A client message as queued for a run: boxed, because a channel or map of them allocates room
/// for dozens at a time. (The message itself is small now that its large branches are boxed,
/// see build.rs; it was 3.6 KiB when this queue showed in the server's profiles.)
pub(crate) type Queued = Box<pb::AgentClientMessage>;

/// A request of the server's that the client has not settled yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owed {
    /// An exec request, until its `stream_close`.
    Exec(u32),
    /// An interaction query, until its response.
    Interaction(u32),
    /// A KV request, until its reply.
    Kv(u32),
}

impl Owed {
    /// Whether `msg` settles this request.
    fn settled_by(self, msg: &pb::AgentClientMessage) -> bool {
        use pb::agent_client_message::Message as M;
        match (self, &msg.message) {
            (
                Owed::Exec(id),
                Some(M::ExecClientControlMessage(pb::ExecClientControlMessage {
                    message: Some(pb::exec_client_control_message::Message::StreamClose(c)),
                })),
            ) => c.id == id,
            (Owed::Interaction(id), Some(M::InteractionResponse(r))) => r.id == id,
            (Owed::Kv(id), Some(M::KvClientMessage(k))) => k.id == id,
            _ => false,
        }
    }
}

/// How a wait for a client message ended.
pub(crate) enum Waited {
    Got(Queued),
    /// The client sent `cancel_action`, and the wait was for something else.
    Cancelled,
    /// The client is gone: its half of the run ended.
    Gone,
}

/// `conversation_action{cancel_action}`: the client cancels the run (ACP `session/cancel`).
pub(crate) fn is_cancel(msg: &pb::AgentClientMessage) -> bool {
    match &msg.message {
        Some(pb::agent_client_message::Message::ConversationAction(action)) => {
            matches!(action.action, Some(pb::conversation_action::Action::CancelAction(_)))
        }
        _ => false,
    }
}

/// Client messages for one run, in order.
pub(crate) struct Inbox {
    rx: mpsc::UnboundedReceiver<Queued>,
    /// Arrived while waiting for something else; looked at by later waits.
    pending: VecDeque<Queued>,
    /// Requests sent and not settled yet, oldest first.
    owed: Vec<Owed>,
    /// The result each exec was answered with (when the backend queues replies whole).
    results: HashMap<u32, pb::ExecClientMessage>,
}

impl Inbox {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Queued>) -> Self {
        Inbox { rx, pending: VecDeque::new(), owed: Vec::new(), results: HashMap::new() }
    }

    /// Notes a request the client now owes an answer to.
    pub(crate) fn owe(&mut self, request: Owed) {
        self.owed.push(request);
    }

    /// The requests the client has not settled, oldest first.
    pub(crate) fn owed(&self) -> &[Owed] {
        &self.owed
    }

    /// The result exec `id` was answered with, if it has been (and was queued whole).
    pub(crate) fn exec_result(&self, id: u32) -> Option<&pb::ExecClientMessage> {
        self.results.get(&id)
    }

    /// Every message passes here once, as it arrives.
    fn arrived(&mut self, msg: &pb::AgentClientMessage) {
        self.owed.retain(|o| !o.settled_by(msg));
        if let Some(pb::agent_client_message::Message::ExecClientMessage(reply)) = &msg.message {
            let is_result =
                reply.message.as_ref().is_some_and(|m| !matches!(m, pb::exec_client_message::Message::ShellStream(_)));
            if is_result {
                self.results.insert(reply.id, (**reply).clone());
            }
        }
    }

    fn keep(&mut self, msg: Queued) {
        self.pending.push_back(msg);
        if self.pending.len() > 10_000 {
            self.pending.pop_front();
        }
    }

    /// Takes what has arrived without waiting, so a cancel sent meanwhile is seen.
    pub(crate) fn take_arrived(&mut self) {
        while let Ok(msg) = self.rx.try_recv() {
            self.arrived(&msg);
            self.keep(msg);
        }
    }

    /// Waits for the stream's first message and keeps it for the waits after it: whether it is
    /// a `prewarm_request` (`None`: the client went away first).
    pub(crate) async fn first_is_prewarm(&mut self) -> Option<bool> {
        if self.pending.is_empty() {
            let msg = self.rx.recv().await?;
            self.arrived(&msg);
            self.keep(msg);
        }
        self.pending.front().map(|m| matches!(m.message, Some(pb::agent_client_message::Message::PrewarmRequest(_))))
    }

    /// A `cancel_action` has arrived and no wait has taken it.
    pub(crate) fn cancel_requested(&self) -> bool {
        self.pending.iter().any(|m| is_cancel(m))
    }

    /// Waits for the first message `matches` accepts. A cancel that it does not accept ends the
    /// wait (a wait that accepts it, as `awaitClient conversationAction` does, takes it).
    /// Cancel-safe: a message taken from the channel is kept before the next await.
    pub(crate) async fn wait(&mut self, mut matches: impl FnMut(&pb::AgentClientMessage) -> bool) -> Waited {
        if let Some(pos) = self.pending.iter().position(|m| matches(m)) {
            return self.pending.remove(pos).map_or(Waited::Gone, Waited::Got);
        }
        if self.cancel_requested() {
            return Waited::Cancelled;
        }
        while let Some(msg) = self.rx.recv().await {
            self.arrived(&msg);
            if matches(&msg) {
                return Waited::Got(msg);
            }
            let cancel = is_cancel(&msg);
            self.keep(msg);
            if cancel {
                return Waited::Cancelled;
            }
        }
        Waited::Gone
    }

    /// Waits until the client has settled every request it owes (or is gone).
    pub(crate) async fn settled(&mut self) {
        while !self.owed.is_empty() {
            let Some(msg) = self.rx.recv().await else { return };
            self.arrived(&msg);
            self.keep(msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancel() -> Queued {
        Box::new(pb::AgentClientMessage {
            message: Some(pb::agent_client_message::Message::ConversationAction(Box::new(pb::ConversationAction {
                action: Some(pb::conversation_action::Action::CancelAction(Default::default())),
                ..Default::default()
            }))),
        })
    }

    fn stream_close(id: u32) -> Queued {
        Box::new(pb::AgentClientMessage {
            message: Some(pb::agent_client_message::Message::ExecClientControlMessage(pb::ExecClientControlMessage {
                message: Some(pb::exec_client_control_message::Message::StreamClose(pb::ExecClientStreamClose { id })),
            })),
        })
    }

    #[tokio::test]
    async fn a_cancel_ends_other_waits_and_is_taken_by_a_wait_for_it() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inbox = Inbox::new(rx);
        inbox.owe(Owed::Exec(1));
        inbox.owe(Owed::Exec(2));
        tx.send(stream_close(2)).unwrap();
        tx.send(cancel()).unwrap();
        assert!(matches!(inbox.wait(|m| Owed::Exec(1).settled_by(m)).await, Waited::Cancelled));
        assert_eq!(inbox.owed(), [Owed::Exec(1)], "exec 2 was closed on the way");
        assert!(inbox.cancel_requested());
        assert!(matches!(inbox.wait(is_cancel).await, Waited::Got(_)), "taken by a wait for it");
        assert!(!inbox.cancel_requested());
        tx.send(stream_close(1)).unwrap();
        inbox.settled().await;
        assert!(inbox.owed().is_empty());
        drop(tx);
        assert!(matches!(inbox.wait(|_| false).await, Waited::Gone));
    }
}
