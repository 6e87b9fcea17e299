//! What the tools are made with: their limits, the shell and the environment of the processes
//! they start, where background shells write.

use std::path::PathBuf;
use std::time::Duration;

use super::environment::EnvPolicy;

/// The largest binary file a read returns by default: what fits in one message to the server
/// (16 MiB) with its path and the fields around it. A larger answer could not be sent at all.
pub const DEFAULT_MAX_BINARY_BYTES: usize = crate::transport::MAX_OUTBOUND_MESSAGE - 64 * 1024;

/// Limits and environment of the tools.
#[derive(Debug, Clone)]
pub struct ToolOptions {
    /// Text returned by one read (and kept as a deleted file's previous content); longer reads
    /// stop at a line boundary with `truncated: true`.
    pub max_read_bytes: usize,
    /// Largest binary file returned as bytes by read ([`DEFAULT_MAX_BINARY_BYTES`]). Above
    /// that default a read's answer may not fit in one message: it is then answered with its
    /// error branch, naming the sizes.
    pub max_binary_bytes: usize,
    /// Shell output kept for the final result, per stream (the tail is kept).
    pub max_output_bytes: usize,
    /// Output lines a grep collects before it stops (`ripgrep_truncated`).
    pub grep_max_lines: usize,
    /// Characters of one grep line before it is cut (`content_truncated`).
    pub grep_max_line_chars: usize,
    /// Files a glob returns (`client_truncated` beyond).
    pub glob_max_files: usize,
    /// Entries an ls lists before it stops (directories left unlisted are marked unprocessed).
    pub ls_max_entries: usize,
    /// Shell timeout when the request gives none.
    pub shell_timeout: Duration,
    /// The shell (`-c command`); default bash, else sh (cmd on Windows, see [`default_shell`]).
    /// Processes the tools start see it as `SHELL` (unless [`ToolOptions::env`] sets one), so
    /// that a command asking which shell it runs in hears the one it does.
    pub shell: Option<PathBuf>,
    /// Variables set for every process the tools start, over whatever [`ToolOptions::env_policy`]
    /// inherits (even names it would drop: the host asked for them).
    pub env: Vec<(String, String)>,
    /// Which of the host's variables those processes inherit. By default all but this
    /// product's credentials and secret-looking names (`*KEY*`, `*SECRET*`, `*TOKEN*`, …).
    pub env_policy: EnvPolicy,
    /// Where background shells write their output (`<id>.txt`); readable by the read tool.
    /// Empty (the default): a folder of the tools' own in the temp dir, made when the first
    /// background shell starts and removed by [`LocalTools::close`] or with the last clone.
    /// A folder named here is made when needed (0700), until [`LocalTools::close`], and kept;
    /// the output files the tools wrote in it (0600) are removed with the tools, like their
    /// shells.
    pub terminals_dir: PathBuf,
}

impl Default for ToolOptions {
    fn default() -> Self {
        Self {
            max_read_bytes: 1024 * 1024,
            max_binary_bytes: DEFAULT_MAX_BINARY_BYTES,
            max_output_bytes: 1024 * 1024,
            grep_max_lines: 20_000,
            grep_max_line_chars: 500,
            glob_max_files: 1_000,
            ls_max_entries: 5_000,
            shell_timeout: Duration::from_secs(10 * 60),
            shell: None,
            env: Vec::new(),
            env_policy: EnvPolicy::default(),
            terminals_dir: PathBuf::new(),
        }
    }
}
