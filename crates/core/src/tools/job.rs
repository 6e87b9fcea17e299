//! Windows: a job object per shell, Windows' own way to hold a process tree together.
//!
//! Every process the shell starts joins its job (a child is created in its parent's job), so
//! `TerminateJobObject` ends the whole tree at once, where `taskkill /T` walks parent pids
//! (missing under wine, racing a process that starts meanwhile, unable to find a grandchild
//! whose parent already exited). The job is made with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` and
//! its only handle is this process's, not inheritable: when this process ends, however it
//! ends (an editor killing the agent outright included), Windows closes the handle and ends the
//! tree. That is what the reaper's watcher does on Unix.
//!
//! The shell starts suspended and is resumed only once it is in the job, so nothing it starts
//! can be created outside it. A process a host started itself (a stdio MCP server) joins a job
//! of its own once running ([`Job::hold`]), through the reaper.

use std::ffi::c_void;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};

use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    OpenProcess, OpenThread, ResumeThread, PROCESS_SET_QUOTA, PROCESS_TERMINATE, THREAD_SUSPEND_RESUME,
};

/// The creation flag a shell is spawned with, so that it runs only once [`Job::adopt`] resumed it.
pub(super) const START_SUSPENDED: u32 = windows_sys::Win32::System::Threading::CREATE_SUSPENDED;

/// The exit code the processes of a terminated job end with (what `Child::kill` gives on Windows).
const KILLED_EXIT_CODE: u32 = 1;

/// A job object whose processes end when it is dropped (or [`Job::terminate`]d), unless
/// [`Job::release`]d first.
pub(super) struct Job(OwnedHandle);

impl Job {
    /// An empty job whose processes end when its handle closes.
    pub(super) fn new() -> io::Result<Job> {
        // SAFETY: no security attributes (the default, not inheritable) and no name; both
        // pointers may be null.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a handle CreateJobObjectW just returned, owned by nothing else; CloseHandle
        // is all it needs.
        let job = Job(unsafe { OwnedHandle::from_raw_handle(raw) });
        job.set_limits(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)?;
        Ok(job)
    }

    fn set_limits(&self, flags: JOB_OBJECT_LIMIT) -> io::Result<()> {
        let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        limits.BasicLimitInformation.LimitFlags = flags;
        // SAFETY: the job handle is open; the pointer and length describe `limits`, which
        // outlives the call.
        let set = unsafe {
            SetInformationJobObject(
                self.0.as_raw_handle(),
                JobObjectExtendedLimitInformation,
                std::ptr::from_ref(&limits).cast::<c_void>(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if set == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Puts the suspended process `process` (id `pid`, spawned with [`START_SUSPENDED`]) in the
    /// job, then resumes it. `Err` when it could not be resumed: it never ran, and the caller
    /// kills it. A process that could not join the job is resumed all the same (and the
    /// caller told, with `Ok(false)`), so the shell runs with the fallback kill.
    pub(super) fn adopt(&self, process: RawHandle, pid: u32) -> io::Result<bool> {
        // SAFETY: both handles are open (the process's is the child's, alive while suspended).
        let joined = unsafe { AssignProcessToJobObject(self.0.as_raw_handle(), process) } != 0;
        let join_error = (!joined).then(io::Error::last_os_error);
        resume_threads(pid)?;
        if let Some(e) = join_error {
            tracing::warn!("shell {pid} runs outside a job object ({e}): ending it falls back to taskkill");
        }
        Ok(joined)
    }

    /// Puts running process `pid` (one this process started) in the job: what it starts from
    /// now on joins the job too. What it started before is not in it, so a host calls this as
    /// soon as its spawn returns.
    pub(super) fn hold(&self, pid: u32) -> io::Result<()> {
        // SAFETY: opens a process by id, no pointer involved; null means it failed.
        let raw = unsafe { OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a process handle just opened, owned by nothing else.
        let process = unsafe { OwnedHandle::from_raw_handle(raw) };
        // SAFETY: both handles are open.
        if unsafe { AssignProcessToJobObject(self.0.as_raw_handle(), process.as_raw_handle()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ends every process in the job.
    pub(super) fn terminate(&self) {
        // SAFETY: the job handle is open. A job already empty is no error.
        unsafe {
            TerminateJobObject(self.0.as_raw_handle(), KILLED_EXIT_CODE);
        }
    }

    /// Closes the job without ending what is left in it: the shell's run is over and nothing
    /// holds its output, so what remains was started to outlive it (as on Unix, where such a
    /// process is left alone).
    pub(super) fn release(self) {
        if let Err(e) = self.set_limits(0) {
            tracing::debug!("a finished shell's job keeps kill-on-close ({e}): what it left behind ends with it");
        }
    }
}

/// Resumes the threads of suspended process `pid`: a process created suspended has one, and
/// std gives no handle to it, so it is found by its owner's id.
fn resume_threads(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of every thread of the system (the process id is ignored for threads).
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE || raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a snapshot handle just returned and owned by nothing else; CloseHandle frees it.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut entry = THREADENTRY32 { dwSize: size_of::<THREADENTRY32>() as u32, ..Default::default() };
    let mut resumed = 0;
    // SAFETY: the snapshot is open and `entry` is a THREADENTRY32 with its size set.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: opens a thread by id; no pointer is involved, and null means it failed.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if !thread.is_null() {
                // SAFETY: a thread handle just opened, owned by nothing else.
                let thread = unsafe { OwnedHandle::from_raw_handle(thread) };
                // SAFETY: the thread handle is open with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(thread.as_raw_handle()) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(io::Error::other(format!("no thread of the suspended shell {pid} could be resumed")));
    }
    Ok(())
}
