//! The card rules as a property: random interleavings of server updates (ids reused across
//! turns, as the embedded demo and some servers do), the host's own cards and their settling,
//! reads of any size, a cancel at any point (the turn loop's sweep reaching the queue some steps
//! later, as it does), and a restart between turns. What the reader receives must keep every
//! rule of `cards.rs` whatever the interleaving.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1 as acp;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::cards::CardLedger;
use crate::proto::agent::v1 as pb;
use crate::translate::{to_json, Translator};
use crate::updates::{CardGate, QueuedUpdate, Updates};

/// A small deterministic generator (xorshift64*), so a failing case is reproduced by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const SERVER_IDS: &[&str] = &["demo-ls", "demo-shell", "call-3"];
const HOST_IDS: &[&str] = &["agent-exec-1", "agent-exec-2", "demo-ls"];

fn server_update(rng: &mut Rng) -> Value {
    let id = rng.pick(SERVER_IDS);
    let shell = json!({ "shellToolCall": { "args": { "command": "ls -la" } } });
    let done = json!({ "shellToolCall": { "args": { "command": "ls -la" }, "result": { "success": { "stdout": "x\n", "exitCode": 0 } } } });
    match rng.below(8) {
        0 => json!({ "textDelta": { "text": "words " } }),
        1 => json!({ "thinkingDelta": { "text": "thought " } }),
        2 => json!({ "partialToolCall": { "callId": id, "toolCall": shell } }),
        3 | 4 => json!({ "toolCallStarted": { "callId": id, "toolCall": shell } }),
        5 | 6 => json!({ "toolCallCompleted": { "callId": id, "toolCall": done } }),
        _ => json!({ "shellOutputDelta": { "stdout": { "data": "out\n" } } }),
    }
}

/// What the client has received, checked as it arrives.
#[derive(Default)]
struct Client {
    announced: HashSet<String>,
    ended: HashSet<String>,
    /// Cards announced in the running turn.
    this_turn: Vec<String>,
    /// The user has cancelled the running turn.
    cancelled: bool,
    seen: Vec<Value>,
}

impl Client {
    fn receive(&mut self, batch: Vec<acp::SessionUpdate>, case: u64) {
        for update in batch {
            let u = to_json(&update);
            let kind = u["sessionUpdate"].as_str().unwrap_or_default().to_string();
            let context =
                || format!("case {case}: {u}\nafter {:#?}", self.seen.iter().rev().take(6).collect::<Vec<_>>());
            if self.cancelled {
                assert!(
                    kind != "agent_message_chunk" && kind != "agent_thought_chunk",
                    "words after cancel: {}",
                    context()
                );
                assert!(kind != "tool_call", "a new card after cancel: {}", context());
            }
            if kind == "tool_call" || kind == "tool_call_update" {
                let id = u["toolCallId"].as_str().unwrap_or_default().to_string();
                if kind == "tool_call" {
                    assert!(self.announced.insert(id.clone()), "an id announced twice in the session: {}", context());
                    self.this_turn.push(id.clone());
                } else {
                    assert!(self.announced.contains(&id), "an update of a card never announced: {}", context());
                }
                assert!(!self.ended.contains(&id), "an update after the card ended: {}", context());
                if matches!(u["status"].as_str(), Some("completed" | "failed")) {
                    self.ended.insert(id);
                }
                for terminal in u["content"].as_array().into_iter().flatten().filter_map(|c| c["terminalId"].as_str()) {
                    assert!(self.announced.contains(terminal), "a terminal of no card: {}", context());
                }
                for key in ["terminal_info", "terminal_output", "terminal_exit"] {
                    if let Some(t) = u["_meta"][key]["terminal_id"].as_str() {
                        assert!(self.announced.contains(t), "a terminal of no card: {}", context());
                    }
                }
            }
            self.seen.push(u);
        }
    }

    fn turn_over(&mut self, case: u64) {
        for id in std::mem::take(&mut self.this_turn) {
            assert!(self.ended.contains(&id), "case {case}: card {id} still open after its turn: {:#?}", self.seen);
        }
        self.cancelled = false;
    }
}

/// The host asking for a card and waiting for it (a permission request would go out once it
/// resolves): it must resolve only with an id the client has received a `tool_call` of.
struct Waiting(oneshot::Receiver<Option<String>>);

fn check_waiters(waiting: &mut Vec<Waiting>, client: &Client, case: u64) {
    waiting.retain_mut(|w| match w.0.try_recv() {
        Ok(Some(id)) => {
            assert!(client.announced.contains(&id), "case {case}: a request about {id} before its card");
            false
        }
        Ok(None) | Err(oneshot::error::TryRecvError::Closed) => false,
        Err(oneshot::error::TryRecvError::Empty) => true,
    });
}

fn read(updates: &Updates, max: usize, got: &Arc<Mutex<Vec<Vec<acp::SessionUpdate>>>>) {
    let got = got.clone();
    updates.read_with(max, Box::new(move |batch| got.lock().unwrap().push(batch)));
}

fn run_case(case: u64) {
    let mut rng = Rng(case.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut ledger = Arc::new(Mutex::new(CardLedger::default()));
    let mut translator = Translator::new();
    translator.set_terminal_output(rng.below(2) == 0);
    let mut client = Client::default();
    let turns = 2 + rng.below(3);
    for turn_number in 0..turns {
        if turn_number > 0 && rng.below(3) == 0 {
            // A restart: a new process loads the saved session (its ids come with it).
            let used = ledger.lock().unwrap().used_ids();
            ledger = Arc::new(Mutex::new(CardLedger::with_used(used)));
            translator = Translator::new();
        }
        ledger.lock().unwrap().begin_turn().send();
        translator.begin_turn();
        let cancel = CancellationToken::new();
        let (tx, rx) = mpsc::channel::<QueuedUpdate>(4096);
        let updates = Updates::new(rx, CardGate::new(ledger.clone(), cancel.clone()));
        let got: Arc<Mutex<Vec<Vec<acp::SessionUpdate>>>> = Arc::default();
        let mut waiting = Vec::new();
        // The loop's sweep after a cancel reaches the queue this many steps later.
        let mut sweep_in: Option<u64> = None;
        let deliver = |client: &mut Client, waiting: &mut Vec<Waiting>| {
            for batch in got.lock().unwrap().drain(..) {
                client.receive(batch, case);
            }
            check_waiters(waiting, client, case);
        };
        for _ in 0..(5 + rng.below(40)) {
            match rng.below(10) {
                0..=4 if !cancel.is_cancelled() || sweep_in.is_some() => {
                    let update: pb::InteractionUpdate =
                        crate::protojson::from_json("agent.v1.InteractionUpdate", &server_update(&mut rng)).unwrap();
                    for u in translator.on_update(&update) {
                        tx.try_send(Box::new(u)).unwrap();
                    }
                    updates.serve();
                }
                5 => {
                    // The host opens a card of its own (or asks about the server's).
                    let id = rng.pick(HOST_IDS);
                    match ledger.lock().unwrap().wait_for(id) {
                        Ok(rx) => waiting.push(Waiting(rx)),
                        Err(Some(now)) => assert!(client.announced.contains(&now), "case {case}: {now} not out"),
                        Err(None) => {}
                    }
                    if !cancel.is_cancelled() && rng.below(2) == 0 {
                        let card =
                            acp::ToolCall::new(id.to_string(), "Run a tool").status(acp::ToolCallStatus::Pending);
                        updates.push_host(acp::SessionUpdate::ToolCall(card));
                    }
                }
                6 => {
                    // The host settles a card (its own, or the server's on a rejection).
                    let id = rng.pick(HOST_IDS);
                    let status =
                        [acp::ToolCallStatus::Completed, acp::ToolCallStatus::Failed, acp::ToolCallStatus::InProgress]
                            [rng.below(3) as usize];
                    let update =
                        acp::ToolCallUpdate::new(id.to_string(), acp::ToolCallUpdateFields::new().status(status));
                    updates.push_host(acp::SessionUpdate::ToolCallUpdate(update));
                }
                7 | 8 => read(&updates, 1 + rng.below(6) as usize, &got),
                _ if !cancel.is_cancelled() && rng.below(3) == 0 => {
                    // The user cancels: nothing new from here on, whatever is still queued.
                    deliver(&mut client, &mut waiting);
                    cancel.cancel();
                    client.cancelled = true;
                    sweep_in = Some(rng.below(4));
                }
                _ => {}
            }
            deliver(&mut client, &mut waiting);
            if let Some(n) = sweep_in {
                if n == 0 {
                    for u in translator.cancel() {
                        tx.try_send(Box::new(u)).unwrap();
                    }
                    updates.serve();
                    sweep_in = None;
                } else {
                    sweep_in = Some(n - 1);
                }
            }
        }
        // The turn ends: the loop's sweep (or the cancel's, if it has not come yet), then the end.
        let swept = if cancel.is_cancelled() { translator.cancel() } else { translator.sweep("The turn ended.") };
        for u in swept {
            tx.try_send(Box::new(u)).unwrap();
        }
        drop(tx);
        updates.serve();
        loop {
            read(&updates, 1 + rng.below(6) as usize, &got);
            let batches: Vec<_> = got.lock().unwrap().drain(..).collect();
            let over = batches.iter().any(Vec::is_empty);
            for batch in batches {
                client.receive(batch, case);
            }
            check_waiters(&mut waiting, &client, case);
            if over {
                break;
            }
        }
        assert!(waiting.is_empty(), "case {case}: a host still waits for a card after the turn");
        client.turn_over(case);
    }
}

#[test]
fn the_client_never_gets_a_card_it_was_not_told_of_whatever_the_interleaving() {
    let cases: u64 = std::env::var("CARD_PROPERTY_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000);
    for case in 0..cases {
        run_case(case);
    }
}

#[test]
fn a_card_announced_before_a_restart_is_never_announced_again() {
    let mut ledger = CardLedger::default();
    let mut wakes = super::cards::Wakes::default();
    let call = |id: &str| acp::SessionUpdate::ToolCall(acp::ToolCall::new(id.to_string(), "ls"));
    let first = ledger.admit(call("demo-ls"), super::cards::Reading::Running, &mut wakes).map(|u| to_json(&u));
    assert_eq!(first.unwrap()["toolCallId"], "demo-ls");
    let saved = ledger.used_ids();
    let mut restarted = CardLedger::with_used(saved);
    restarted.begin_turn().send();
    let again = restarted.admit(call("demo-ls"), super::cards::Reading::Running, &mut wakes).map(|u| to_json(&u));
    assert_eq!(again.unwrap()["toolCallId"], "demo-ls~2");
}
