//! Context summarization: ACP compaction updates where the client renders them, else a
//! `think` card.

use agent_client_protocol_schema::v1 as acp;

use super::content::{new_id, text_block, text_content};
use super::translator::{OpenCall, Translator};

impl Translator {
    /// Context summarization: a compaction update, or a `think` card for clients without it.
    pub(super) fn start_compaction(&mut self) -> Vec<acp::SessionUpdate> {
        self.rotate();
        self.compactions += 1;
        let id = format!("compaction-{}-{}", self.compactions, &new_id()[..8]);
        self.compaction = Some(id.clone());
        if self.compaction_updates {
            return vec![acp::SessionUpdate::CompactionUpdate(acp::CompactionUpdate::new(
                id,
                acp::CompactionStatus::InProgress,
            ))];
        }
        self.open.insert(id.clone(), OpenCall::new("summary"));
        let call = acp::ToolCall::new(id, "Compacting conversation")
            .kind(acp::ToolKind::Think)
            .status(acp::ToolCallStatus::InProgress);
        vec![acp::SessionUpdate::ToolCall(call)]
    }

    pub(super) fn on_summary(&mut self, summary: &str) -> Vec<acp::SessionUpdate> {
        let mut out = Vec::new();
        if self.compaction.is_none() {
            out.extend(self.start_compaction());
        }
        let id = self.compaction.clone().unwrap_or_default();
        if self.compaction_updates {
            out.push(acp::SessionUpdate::CompactionSummaryChunk(acp::CompactionSummaryChunk::new(
                id,
                text_block(summary.to_string()),
            )));
        } else {
            let fields = acp::ToolCallUpdateFields::new().content(vec![text_content(summary.to_string())]);
            out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields)));
        }
        out
    }

    pub(super) fn complete_compaction(&mut self) -> Vec<acp::SessionUpdate> {
        match self.compaction.take() {
            Some(id) if self.compaction_updates => vec![acp::SessionUpdate::CompactionUpdate(
                acp::CompactionUpdate::new(id, acp::CompactionStatus::Completed),
            )],
            Some(id) => {
                self.open.remove(&id);
                let fields = acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Completed);
                vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields))]
            }
            None => Vec::new(),
        }
    }
}
