//! The binding's promises, settled through one threadsafe function per JavaScript thread.
//!
//! napi-rs settles each future-backed promise through a threadsafe function of its own, i.e. a
//! libuv async handle created and closed per promise. libuv checks every async handle on each
//! wake-up, so the JS thread's cost per wake-up grows with the number of pending promises: with
//! 1,000 turns each waiting in `nextBatch`, that scan was 19% of the JS thread's samples. Here
//! every promise is queued to one handle, which is referenced (keeps Node alive) exactly while
//! some promise is pending, as a pending napi-rs promise did. A promise is settled either by a
//! future run on the runtime ([`promise`]) or by whoever holds its [`Resolver`] (a turn's
//! `nextBatch`, handed its updates by the turn loop); either way in the order of settlement.

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::{check_status, sys, Env, JsError};

type Settle = Box<dyn FnOnce(sys::napi_env) -> Result<sys::napi_value> + Send>;

/// A settled outcome on its way to the JS thread.
struct Job {
    deferred: sys::napi_deferred,
    settle: Settle,
}

/// The shared handle of one JS thread. `alive` turns false when its environment is torn down,
/// so tasks finishing later drop their outcome instead of calling a freed handle.
#[derive(Clone)]
struct Handle {
    tsfn: sys::napi_threadsafe_function,
    alive: Arc<AtomicBool>,
}

// SAFETY: a threadsafe function may be called from any thread (that is its purpose); the
// deferred inside a `Job` is only used on the JS thread, in `call_js`.
unsafe impl Send for Handle {}
// SAFETY: as for `Handle`: the deferred and the settle closure (itself `Send`) are only used on the
// JS thread, in `call_js`.
unsafe impl Send for Job {}

struct Settler {
    handle: Handle,
    pending: usize,
}

thread_local! {
    static SETTLER: RefCell<Option<Settler>> = const { RefCell::new(None) };
}

/// Runs `fut` on the runtime and settles the returned promise: `Ok` through `map` (on the JS
/// thread), `Err` rejects with the error `map_err` builds.
pub fn promise<'env, T, V, F, M, E>(env: &'env Env, fut: F, map: M, map_err: E) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: Future<Output = std::result::Result<T, cursor_acp_core::CoreError>> + Send + 'static,
    M: FnOnce(&Env, T) -> Result<V> + Send + 'static,
    E: FnOnce(&Env, &cursor_acp_core::CoreError) -> napi::Error + Send + 'static,
{
    let (promise, resolver) = deferred(env)?;
    napi::bindgen_prelude::spawn(async move {
        let outcome = fut.await;
        resolver.settle(move |env| match outcome {
            Ok(value) => map(env, value),
            Err(e) => Err(map_err(env, &e)),
        });
    });
    Ok(promise)
}

/// A promise and the [`Resolver`] that settles it later, from any thread.
pub fn deferred<'env, V: ToNapiValue + 'static>(env: &'env Env) -> Result<(PromiseRaw<'env, V>, Resolver<V>)> {
    let raw_env = env.raw();
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    // SAFETY: `raw_env` is the env of the current call, on the JS thread; both out-parameters are
    // locals.
    check_status!(unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) })?;
    let handle = acquire(raw_env)?;
    let resolver = Resolver { handle, deferred: Some(SendDeferred(deferred)), value: std::marker::PhantomData };
    Ok((PromiseRaw::new(raw_env, promise), resolver))
}

/// Settles one promise from any thread, through its JS thread's handle: settlements reach
/// JavaScript in the order they were made. Dropped unsettled, it rejects the promise, so that
/// none is left pending (and Node is not kept alive for it).
pub struct Resolver<V> {
    handle: Handle,
    deferred: Option<SendDeferred>,
    value: std::marker::PhantomData<fn() -> V>,
}

impl<V: ToNapiValue + 'static> Resolver<V> {
    /// Settles with what `settle` returns, run on the JS thread: `Ok` resolves, `Err` rejects.
    pub fn settle(mut self, settle: impl FnOnce(&Env) -> Result<V> + Send + 'static) {
        let deferred = self.deferred.take().expect("settled once");
        self.send(
            deferred,
            Box::new(move |raw_env| {
                let env = Env::from_raw(raw_env);
                let value = settle(&env)?;
                // SAFETY: `settle` runs in `call_js`, on the JS thread with the live env N-API
                // passed it.
                unsafe { V::to_napi_value(raw_env, value) }
            }),
        );
    }
}

impl<V> Resolver<V> {
    fn send(&self, deferred: SendDeferred, settle: Settle) {
        let job = Box::into_raw(Box::new(Job { deferred: deferred.into_inner(), settle }));
        let status = if self.handle.alive.load(Ordering::SeqCst) {
            // SAFETY: `tsfn` is alive while `alive` is true (it is cleared by the env's cleanup
            // hook first); calling a threadsafe function is allowed from any thread, and `job` is
            // handed over to `call_js`, which frees it.
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.handle.tsfn,
                    job.cast(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            }
        } else {
            sys::Status::napi_closing
        };
        if status != sys::Status::napi_ok {
            // The environment is going away: nobody is left to settle for.
            // SAFETY: the call failed, so N-API never took `job`; it is still the box made above
            // and freed once, here.
            drop(unsafe { Box::from_raw(job) });
        }
    }
}

impl<V> Drop for Resolver<V> {
    fn drop(&mut self) {
        if let Some(deferred) = self.deferred.take() {
            self.send(deferred, Box::new(|_| Err(napi::Error::from_reason("the operation ended without a result"))));
        }
    }
}

struct SendDeferred(sys::napi_deferred);
// SAFETY: carried to the JS thread untouched (see `Job`).
unsafe impl Send for SendDeferred {}

impl SendDeferred {
    fn into_inner(self) -> sys::napi_deferred {
        self.0
    }
}

/// This thread's handle (created on first use), counted as in use by one more pending promise.
fn acquire(env: sys::napi_env) -> Result<Handle> {
    SETTLER.with(|cell| {
        let mut settler = cell.borrow_mut();
        if settler.is_none() {
            *settler = Some(Settler { handle: create(env)?, pending: 0 });
        }
        let s = settler.as_mut().expect("created above");
        if s.pending == 0 {
            // SAFETY: `env` is the env of the current call, on the JS thread that owns `tsfn`.
            check_status!(unsafe { sys::napi_ref_threadsafe_function(env, s.handle.tsfn) })?;
        }
        s.pending += 1;
        Ok(s.handle.clone())
    })
}

fn create(env: sys::napi_env) -> Result<Handle> {
    let mut name = ptr::null_mut();
    let label = "cursor-acp-native promise";
    // SAFETY: `env` is the env of the current call, on the JS thread; `label` is valid UTF-8 of the
    // given length, `name` a local.
    check_status!(unsafe {
        sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name)
    })?;
    let mut tsfn = ptr::null_mut();
    // SAFETY: `env` is the env of the current call, on the JS thread; `name` is the string made
    // above, `call_js` matches N-API's call-js signature and `tsfn` is a local.
    check_status!(unsafe {
        sys::napi_create_threadsafe_function(
            env,
            ptr::null_mut(),
            ptr::null_mut(),
            name,
            0,
            1,
            ptr::null_mut(),
            None,
            ptr::null_mut(),
            Some(call_js),
            &mut tsfn,
        )
    })?;
    // Unreferenced while no promise is pending: an idle client never keeps Node alive.
    // SAFETY: `env` is the env of the current call, on the JS thread that owns `tsfn`, made just
    // above.
    check_status!(unsafe { sys::napi_unref_threadsafe_function(env, tsfn) })?;
    let alive = Arc::new(AtomicBool::new(true));
    let hook_data = Box::into_raw(Box::new(alive.clone()));
    // SAFETY: `env` is the env of the current call, on the JS thread; `hook_data` is a box that
    // `on_env_cleanup` takes back exactly once.
    check_status!(unsafe { sys::napi_add_env_cleanup_hook(env, Some(on_env_cleanup), hook_data.cast()) })?;
    Ok(Handle { tsfn, alive })
}

/// The environment is being torn down: later outcomes are dropped, and a new environment on
/// this thread (none in Node, but cheap to allow) starts afresh.
unsafe extern "C" fn on_env_cleanup(data: *mut c_void) {
    // SAFETY: `data` is the `Box<Arc<AtomicBool>>` that `create` registered with this hook, which
    // N-API calls once.
    let alive = unsafe { Box::from_raw(data.cast::<Arc<AtomicBool>>()) };
    alive.store(false, Ordering::SeqCst);
    #[allow(clippy::let_underscore_must_use, reason = "a thread being torn down may have dropped its settler already")]
    let _ = SETTLER.try_with(|cell| cell.borrow_mut().take());
}

/// On the JS thread: settles one promise. `env` is null when Node drains the queue during
/// teardown; the job is then only freed.
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `Job` that `Resolver::send` boxed and N-API queued; N-API calls
    // `call_js` once per queued call, so the box is taken back once.
    let job = unsafe { Box::from_raw(data.cast::<Job>()) };
    if env.is_null() {
        return;
    }
    match (job.settle)(env) {
        // SAFETY: on the JS thread with the live env N-API passed; `job.deferred` was made in this
        // env and is settled once, here; `value` was made by `settle` in this call.
        Ok(value) => unsafe {
            sys::napi_resolve_deferred(env, job.deferred, value);
        },
        // SAFETY: as above, rejecting with an error value made in this env.
        Err(err) => unsafe {
            let reason = JsError::from(err).into_value(env);
            sys::napi_reject_deferred(env, job.deferred, reason);
        },
    }
    SETTLER.with(|cell| {
        if let Some(s) = cell.borrow_mut().as_mut() {
            s.pending -= 1;
            if s.pending == 0 {
                // SAFETY: on the JS thread with the live env N-API passed, which owns `tsfn`.
                unsafe { sys::napi_unref_threadsafe_function(env, s.handle.tsfn) };
            }
        }
    });
}
