//! The request context a run request and a `requestContext` exec carry.

use crate::error::CoreError;
use crate::proto::agent::v1 as pb;
use crate::protojson;
use crate::tool_schema;

use super::inner::SessionInner;

/// The request context: what the host supplies, with the session's folder as workspace and
/// this machine's OS filled in where the host left them empty, the client's shell as the shell, and the MCP tools'
/// input schemas in the form the backend accepts (`tool_schema`: no `oneOf`/`anyOf`/`allOf`,
/// which make it refuse the whole turn). A failing or invalid host callback is an
/// `E_CALLBACK` error (the context cannot be guessed).
pub(super) async fn for_session(session: &SessionInner) -> Result<pb::RequestContext, CoreError> {
    let timeout = session.timing.callback;
    let from_host = tokio::time::timeout(timeout, session.host.request_context()).await;
    let mut ctx = match from_host {
        Ok(Ok(Some(json))) => protojson::from_json::<pb::RequestContext>("agent.v1.RequestContext", &json)
            .map_err(|e| CoreError::Callback(format!("requestContext returned an invalid RequestContext: {e}")))?,
        Ok(Ok(None)) => pb::RequestContext::default(),
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(CoreError::Callback(format!(
                "the requestContext callback did not settle within {} ms",
                timeout.as_millis()
            )))
        }
    };
    ctx.tools.iter_mut().for_each(tool_schema::normalize_tool);
    session.lock().mcp_tools =
        ctx.tools.iter().map(|t| (t.name.clone(), t.provider_identifier.clone(), t.tool_name.clone())).collect();
    let env = ctx.env.get_or_insert_with(Default::default);
    let cwd = session.lock().cwd.clone();
    if let Some(cwd) = cwd {
        if env.workspace_paths.is_empty() {
            env.workspace_paths.push(cwd.clone());
        }
        if env.project_folder.is_empty() {
            env.project_folder = cwd;
        }
    }
    if env.os_version.is_empty() {
        env.os_version = std::env::consts::OS.to_string();
    }
    // The client's shell, whatever the host said: the model writes its commands for the shell
    // it is told of, so that must be the one the tools run (not the user's `$SHELL`).
    env.shell = session.shell.to_string();
    Ok(ctx)
}
