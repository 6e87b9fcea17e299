//! `LocalTools`: the core's built-in tools for JavaScript hosts, so an extension delegates the
//! exec requests it does not want to implement itself (`exec: (req, ctx) => tools.run(req, ctx)`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cursor_acp_core::host;
use cursor_acp_core::kinds::ExecKind;
use cursor_acp_core::tools::{self, check_env_policy, EnvPolicy, Inherit, ToolOptions, Workspace};
use cursor_acp_core::CoreError;
use napi::bindgen_prelude::*;
use napi::Env;
use serde_json::Value;

use crate::js_error::{coded, promise};
use crate::js_host::ExecContext;
use crate::json::Json;

/// Workspace roots and limits of the built-in tools.
#[napi(object, object_to_js = false)]
pub struct LocalToolsOptions {
    /// Folders the tools may touch; relative paths resolve against the first. Required.
    pub roots: Vec<String>,
    /// Text returned by one read before it is truncated at a line boundary (default 1 MiB).
    pub max_read_bytes: Option<u32>,
    /// Largest binary file read returns as bytes (default 16 MiB less 64 KiB: what fits in one
    /// message to the server; a larger answer is sent as the result's `error`, naming the sizes).
    pub max_binary_bytes: Option<u32>,
    /// Shell output kept in the final result per stream, tail first (default 1 MiB).
    pub max_output_bytes: Option<u32>,
    /// Output lines one grep collects before it stops (default 20000).
    pub grep_max_lines: Option<u32>,
    /// Characters of a grep line before it is cut (default 500).
    pub grep_max_line_chars: Option<u32>,
    /// Files one glob returns (default 1000).
    pub glob_max_files: Option<u32>,
    /// Entries one ls lists (default 5000).
    pub ls_max_entries: Option<u32>,
    /// Shell timeout when the request has none (default 600000).
    pub shell_timeout_ms: Option<u32>,
    /// Shell run as `<shell> -c <command>`: an absolute path or a name found on `PATH`, which
    /// must exist (`E_INVALID` otherwise). Default bash, else sh. Commands see it as `SHELL`
    /// (unless `env` sets one); `tools.shell` says which it is, for the client's `shell`.
    pub shell: Option<String>,
    /// Variables set for every shell, over whatever `envPolicy` inherits (even names it would
    /// drop: you asked for them).
    pub env: Option<HashMap<String, String>>,
    /// Which of this process's variables shells inherit. Default: all but `CURSOR_API_KEY`,
    /// `CURSOR_ACCESS_TOKEN` and names that look like secrets (`*KEY*`, `*SECRET*`, `*TOKEN*`,
    /// `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`).
    pub env_policy: Option<EnvPolicyOptions>,
    /// Where background shells write `<shellId>.txt` (0600), made (0700) when the first one
    /// starts. Default: a folder of these tools' own in the temp dir. `close()` removes the
    /// output files, and the folder when it is the tools' own.
    pub terminals_dir: Option<String>,
}

/// How shells' environment is made from this process's (patterns are globs, case-insensitive).
#[napi(object, object_to_js = false)]
pub struct EnvPolicyOptions {
    /// Start from every variable (`'all'`, the default), the core set (`'core'`: `PATH`, `HOME`,
    /// `USER`, `SHELL`, `TMPDIR`, `LANG`, `LC_*`, `TERM`, `TZ`, and Windows' system variables)
    /// or none (`'none'`: only `env`).
    #[napi(ts_type = "'all' | 'core' | 'none'")]
    pub inherit: Option<String>,
    /// More names never to inherit (`['AWS_*', 'DATABASE_URL']`).
    pub exclude: Option<Vec<String>>,
    /// Names inherited whatever `inherit` and the excludes say (`['GITHUB_TOKEN']` for `gh`,
    /// `['MYAPP_*']` over `'core'`). Never this product's credentials: set those in `env` if a
    /// shell really needs one.
    pub include: Option<Vec<String>>,
}

fn env_policy(o: Option<&EnvPolicyOptions>) -> std::result::Result<EnvPolicy, CoreError> {
    let Some(o) = o else { return Ok(EnvPolicy::default()) };
    let inherit = match o.inherit.as_deref() {
        None | Some("all") => Inherit::All,
        Some("core") => Inherit::Core,
        Some("none") => Inherit::None,
        Some(other) => {
            return Err(CoreError::InvalidInput(format!(
                "envPolicy.inherit must be 'all', 'core' or 'none', not {other:?}"
            )))
        }
    };
    let policy = EnvPolicy {
        inherit,
        exclude: o.exclude.clone().unwrap_or_default(),
        include: o.include.clone().unwrap_or_default(),
    };
    check_env_policy(&policy)?;
    Ok(policy)
}

/// The tools `o` describes; `shell`, when given, is the client's (checked already) and wins
/// over `o.shell`.
pub fn build(o: &LocalToolsOptions, shell: Option<&Path>) -> std::result::Result<tools::LocalTools, CoreError> {
    let shell = match shell {
        Some(shell) => shell.to_path_buf(),
        None => tools::check_shell(o.shell.as_deref())?,
    };
    let workspace = Workspace::new(&o.roots).map_err(|e| CoreError::InvalidInput(e.to_string()))?;
    let d = ToolOptions::default();
    let size = |v: Option<u32>, default: usize| v.map_or(default, |v| v as usize);
    let mut env: Vec<(String, String)> = o.env.clone().unwrap_or_default().into_iter().collect();
    env.sort();
    let options = ToolOptions {
        max_read_bytes: size(o.max_read_bytes, d.max_read_bytes),
        max_binary_bytes: size(o.max_binary_bytes, d.max_binary_bytes),
        max_output_bytes: size(o.max_output_bytes, d.max_output_bytes),
        grep_max_lines: size(o.grep_max_lines, d.grep_max_lines).max(1),
        grep_max_line_chars: size(o.grep_max_line_chars, d.grep_max_line_chars),
        glob_max_files: size(o.glob_max_files, d.glob_max_files),
        ls_max_entries: size(o.ls_max_entries, d.ls_max_entries),
        shell_timeout: o.shell_timeout_ms.map_or(d.shell_timeout, |ms| Duration::from_millis(ms as u64)),
        shell: Some(shell),
        env,
        env_policy: env_policy(o.env_policy.as_ref())?,
        terminals_dir: o.terminals_dir.as_ref().map_or(d.terminals_dir, PathBuf::from),
    };
    Ok(tools::LocalTools::new(workspace, options))
}

/// Native read, write, delete, ls, grep, glob and shells (streaming, timeout, abort, background
/// with stdin), confined to the workspace roots. Results are the proto's result messages in
/// proto3 JSON, ready to return from the `exec` callback.
#[napi]
pub struct LocalTools {
    inner: tools::LocalTools,
}

impl LocalTools {
    /// A handle on tools the core already holds (a client's).
    pub(crate) fn from_core(inner: tools::LocalTools) -> Self {
        LocalTools { inner }
    }
}

#[napi]
impl LocalTools {
    #[napi(constructor)]
    pub fn new(env: Env, options: LocalToolsOptions) -> Result<Self> {
        let inner = within_runtime_if_available(|| build(&options, None)).map_err(|e| coded(&env, &e))?;
        Ok(LocalTools { inner })
    }

    /// The workspace roots, resolved (the terminals folder comes last).
    #[napi(getter)]
    pub fn roots(&self) -> Vec<String> {
        self.inner.workspace().roots().iter().map(|r| r.display().to_string()).collect()
    }

    /// The shell commands run in (an absolute path unless none was found): pass it as the
    /// client's `shell` when these tools answer its execs, so the server is told of this one.
    #[napi(getter)]
    pub fn shell(&self) -> String {
        self.inner.shell().display().to_string()
    }

    /// Where background shells write their output.
    #[napi(getter)]
    pub fn terminals_dir(&self) -> String {
        self.inner.options().terminals_dir.display().to_string()
    }

    /// The absolute path `path` (absolute or relative to a root) names inside the workspace;
    /// throws `E_INVALID` with the reason when it escapes (`..`, absolute elsewhere, symlinks).
    #[napi]
    pub fn resolve(&self, env: Env, path: String) -> Result<String> {
        match self.inner.workspace().resolve(&path) {
            Ok(p) => Ok(p.display().to_string()),
            Err(e) => Err(coded(&env, &CoreError::InvalidInput(e.to_string()))),
        }
    }

    /// Whether `run` implements this exec kind.
    #[napi]
    pub fn handles(kind: String) -> bool {
        ExecKind::from_name(&kind).is_some_and(tools::LocalTools::handles)
    }

    /// Runs an exec request. With the callback's `ctx`, shell output streams to the server and
    /// the server's abort kills the process; without it the request runs to completion.
    /// Resolves `null` for kinds these tools do not implement (the exec callback may return that
    /// as is: `null` means unhandled).
    #[napi(ts_args_type = "request: ExecRequest, ctx?: ExecContext", ts_return_type = "Promise<ExecResult | null>")]
    pub fn run<'env>(
        &self,
        env: &'env Env,
        request: Value,
        ctx: Option<&ExecContext>,
    ) -> Result<PromiseRaw<'env, Option<Json>>> {
        let kind = ExecKind::from_name(request.get("kind").and_then(|k| k.as_str()).unwrap_or_default());
        let args = request.get("args").cloned().unwrap_or(Value::Object(Default::default()));
        let ctx = match ctx {
            Some(c) => c.core(),
            None => host::ExecContext::detached(),
        };
        let tools = self.inner.clone();
        promise(
            env,
            async move {
                match kind {
                    Some(kind) => tools.run_kind(kind, &args, &ctx).await,
                    None => Ok(None),
                }
            },
            |_, v| Ok(v.map(Json)),
        )
    }

    /// Files matching a glob (`{ globPattern, targetDirectory? }`), most recently modified first,
    /// as a `GlobToolResult` (`{ success: { files, totalFiles, clientTruncated } }` or `{ error }`).
    #[napi(ts_return_type = "Promise<GlobToolResult>")]
    pub fn glob<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "GlobToolArgs")] args: Value,
    ) -> Result<PromiseRaw<'env, Json>> {
        let tools = self.inner.clone();
        promise(env, async move { tools.glob(&args).await }, |_, v| Ok(Json(v)))
    }

    /// Kills every background shell started through these tools and removes their output
    /// files (a `terminalsDir` you gave stays, without them).
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}

/// Ends process group `pgid` when this process ends, however it ends (`SIGKILL` included):
/// the same watcher that ends the built-in tools' shells sends it `SIGTERM`, then `SIGKILL` a
/// second later. For process groups this process started, e.g. a stdio MCP server spawned as
/// the leader of a group of its own; call `forgetProcessGroup` once the group has ended. Throws
/// `E_INVALID` for 0, 1 and this process's own group. On Windows, where there are no process
/// groups, `pgid` is the id of a process this process started: it joins a job object of its own
/// (what it starts from then on joins too), ended when this process ends or at
/// `forgetProcessGroup`; `E_INVALID` when it cannot join one.
#[napi]
pub fn watch_process_group(env: Env, pgid: u32) -> Result<()> {
    tools::watch_child_group(pgid).map_err(|e| coded(&env, &e))
}

/// Stops watching process group `pgid` (it ended, or was killed): its id may be reused. On
/// Windows this ends what is left in the process's job.
#[napi]
pub fn forget_process_group(pgid: u32) {
    tools::forget_group(pgid);
}

/// The environment variables that hold this product's own credentials (`CURSOR_API_KEY`, …): a
/// process the model can drive (a shell of the tools, an MCP server) never inherits them.
#[napi]
pub fn own_credential_variables() -> Vec<String> {
    cursor_acp_core::tools::OWN_CREDENTIALS.iter().map(|name| name.to_string()).collect()
}
