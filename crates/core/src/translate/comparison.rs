//! An alternate model's response shown for comparison (`response_comparison`): a card of its
//! own (`comparison-<id>`) whose content is the alternate text.

use agent_client_protocol_schema::v1 as acp;

use super::content::text_content;
use super::translator::{OpenCall, Translator};
use crate::proto::agent::v1 as pb;

impl Translator {
    pub(super) fn on_response_comparison(&mut self, update: &pb::ResponseComparisonUpdate) -> Vec<acp::SessionUpdate> {
        use pb::response_comparison_update::Event;
        let id = format!("comparison-{}", update.comparison_id);
        let Some(event) = &update.event else { return Vec::new() };
        let mut out = Vec::new();
        if !self.open.contains_key(&id) {
            let model = match event {
                Event::Started(s) if !s.alternate_model_id.is_empty() => format!(" ({})", s.alternate_model_id),
                _ => String::new(),
            };
            self.open.insert(id.clone(), OpenCall::new("response_comparison"));
            let card = acp::ToolCall::new(id.clone(), format!("Alternate response{model}"))
                .name("response_comparison".to_string())
                .kind(acp::ToolKind::Think)
                .status(acp::ToolCallStatus::InProgress);
            out.push(acp::SessionUpdate::ToolCall(card));
        }
        let update = match event {
            Event::Started(_) => return out,
            Event::TextDelta(d) => {
                let open = self.open.get_mut(&id).expect("announced above");
                open.output.push_str(&d.text);
                acp::ToolCallUpdateFields::new().content(vec![text_content(open.output.clone())])
            }
            Event::Completed(_) => {
                self.open.remove(&id);
                acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Completed)
            }
            Event::Skipped(s) => {
                self.open.remove(&id);
                let why = pb::ResponseComparisonSkipReason::try_from(s.reason)
                    .map(|r| match r {
                        pb::ResponseComparisonSkipReason::AlternateToolCall => "the alternate model called a tool",
                        pb::ResponseComparisonSkipReason::InferenceError => "the alternate model failed",
                        pb::ResponseComparisonSkipReason::Timeout => "the alternate model timed out",
                        pb::ResponseComparisonSkipReason::Cancelled => "cancelled",
                        pb::ResponseComparisonSkipReason::Unspecified => "no reason given",
                    })
                    .unwrap_or("no reason given");
                acp::ToolCallUpdateFields::new()
                    .status(acp::ToolCallStatus::Completed)
                    .content(vec![text_content(format!("Skipped: {why}."))])
            }
        };
        out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, update)));
        out
    }
}
