//! JSON between the core and JavaScript, in both directions, converted without recursion
//! limits that a legal value can reach.
//!
//! To JavaScript ([`Json`]): updates, tool results and records. napi-rs's own conversion
//! recurses and refuses values nested more than 128 deep (`InvalidArg: Exceeded maximum JSON
//! nesting depth`); an `ls` tree 63 folders deep is already that deep, and a server may send
//! one in a tool call's result. [`Json`] walks the value with a stack of its own instead, so any
//! depth converts, at the same N-API cost per value.
//!
//! From JavaScript ([`HostJson`]): callback results, read straight from the JavaScript value.
//!
//! The result is what `JSON.stringify` would make of the value, with three differences that
//! suit proto3 JSON:
//! * a BigInt becomes a string of its digits, proto3 JSON's form of a 64-bit integer;
//! * NaN and ±Infinity become `"NaN"`, `"Infinity"` and `"-Infinity"`, its form for floats;
//! * byte arrays (`Uint8Array`, `Buffer`, `ArrayBuffer`, `DataView`) held by an object's
//!   property are kept as bytes, beside the JSON, with the property's path. An exec result can
//!   then take them into `bytes` fields without base64, and into `string` fields as UTF-8 text
//!   (`host.rs`).
//!
//! As with `JSON.stringify`, properties that are `undefined`, functions or symbols are left out
//! of objects and become `null` in arrays. napi-rs's own conversion refuses them instead, and
//! turns a `Buffer` into an error about functions.
//!
//! Strings are copied out of V8 in one pass: the buffer is sized from the string's length in
//! UTF-16 units, which V8 knows, instead of a first pass counting its UTF-8 bytes.

use std::fmt::Display;
use std::ptr;

use cursor_acp_hugepages as hugepages;
use napi::bindgen_prelude::*;
use napi::sys;
use serde_json::{map, Map, Number, Value};

/// How deeply a callback's result may nest, and how many values it may hold. The depth leaves
/// room for any message the protocol can carry (protobuf decoders stop at 100 nested messages,
/// at most two JSON levels each: the built-in `ls` tree, 64 folders deep at most, is 132) while
/// bounding the recursion of this reader and of the core's proto3 JSON decoding.
const MAX_DEPTH: usize = 256;
const MAX_VALUES: usize = 1_000_000;

/// A callback's result: JSON, and the byte arrays taken out of it.
pub struct HostJson {
    pub json: Value,
    pub bytes: Vec<BytesAt>,
}

/// A byte array and the path of the property that held it (`["success", "data"]`).
pub struct BytesAt {
    pub path: Vec<String>,
    pub data: Vec<u8>,
}

impl FromNapiValue for HostJson {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut reader = Reader { env, values: 0, open: Vec::new(), path: Vec::new(), bytes: Vec::new() };
        // SAFETY: napi calls `from_napi_value` on the JS thread with the env and value of the
        // current call, which the reader was made with.
        let json = match unsafe { reader.read(value)? } {
            Read::Json(json) => json,
            Read::Bytes(_) => return Err(reader.error("a byte array is not a result")),
            Read::Skipped(what) => return Err(reader.error(format_args!("{what} is not a result"))),
        };
        Ok(HostJson { json, bytes: reader.bytes })
    }
}

enum Read {
    Json(Value),
    Bytes(Vec<u8>),
    /// `undefined`, a function or a symbol (named).
    Skipped(&'static str),
}

/// Reads one JavaScript value. Its contract: its `unsafe` methods run on the JS thread, within
/// the N-API call that gave `env`, with handles (`napi_value`) of that call's scope.
struct Reader {
    env: sys::napi_env,
    values: usize,
    /// The objects and arrays being read, outermost first: how deep the value being read is,
    /// and which values would make a circular reference.
    open: Vec<sys::napi_value>,
    /// The property names leading to the value being read.
    path: Vec<String>,
    bytes: Vec<BytesAt>,
}

impl Reader {
    fn error(&self, what: impl Display) -> Error {
        let at = if self.path.is_empty() { String::new() } else { format!(" (at `{}`)", self.path.join(".")) };
        Error::new(Status::InvalidArg, format!("{what}{at}"))
    }

    /// A failed N-API call as an error. A getter or proxy trap that threw leaves its exception
    /// pending (whatever status the call returned): it is taken, since Node would otherwise
    /// report it as uncaught, and named.
    fn ok(&self, status: sys::napi_status) -> Result<()> {
        if status == sys::Status::napi_ok {
            return Ok(());
        }
        let mut pending = false;
        // SAFETY: a plain N-API call on this thread's env.
        unsafe { sys::napi_is_exception_pending(self.env, &mut pending) };
        if pending {
            let mut thrown = ptr::null_mut();
            let mut text = ptr::null_mut();
            // SAFETY: plain N-API calls on this thread's env; the exception is cleared first.
            let message = unsafe {
                sys::napi_get_and_clear_last_exception(self.env, &mut thrown);
                if sys::napi_coerce_to_string(self.env, thrown, &mut text) == sys::Status::napi_ok {
                    String::from_napi_value(self.env, text).ok()
                } else {
                    // Its `toString` threw in turn: take that exception too.
                    sys::napi_get_and_clear_last_exception(self.env, &mut thrown);
                    None
                }
            };
            return Err(self.error(format_args!("reading the result threw: {}", message.as_deref().unwrap_or("?"))));
        }
        Err(self.error(format_args!("reading the result failed ({})", Status::from(status))))
    }

    /// Marks `value` as being read; a value already being read is a circular reference.
    unsafe fn enter(&mut self, value: sys::napi_value) -> Result<()> {
        for &outer in &self.open {
            let mut same = false;
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `same` is a local.
            self.ok(unsafe { sys::napi_strict_equals(self.env, outer, value, &mut same) })?;
            if same {
                return Err(self.error("a circular reference is not JSON"));
            }
        }
        self.open.push(value);
        Ok(())
    }

    unsafe fn read(&mut self, value: sys::napi_value) -> Result<Read> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(self.error(format_args!("more than {MAX_VALUES} values")));
        }
        let env = self.env;
        let mut kind = 0;
        // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
        // Reader's contract); `kind` is a local.
        self.ok(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
        Ok(match kind {
            sys::ValueType::napi_undefined => Read::Skipped("undefined"),
            sys::ValueType::napi_function => Read::Skipped("a function"),
            sys::ValueType::napi_symbol => Read::Skipped("a symbol"),
            sys::ValueType::napi_null => Read::Json(Value::Null),
            sys::ValueType::napi_boolean => {
                let mut b = false;
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); `b` is a local, and the value is a boolean.
                self.ok(unsafe { sys::napi_get_value_bool(env, value, &mut b) })?;
                Read::Json(Value::Bool(b))
            }
            sys::ValueType::napi_number => {
                let mut n = 0.0;
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); `n` is a local, and the value is a number.
                self.ok(unsafe { sys::napi_get_value_double(env, value, &mut n) })?;
                Read::Json(number(n))
            }
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); the value is a string.
            sys::ValueType::napi_string => Read::Json(Value::String(unsafe { self.string(value)? })),
            sys::ValueType::napi_bigint => {
                let mut digits = ptr::null_mut();
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); `digits` is a local.
                self.ok(unsafe { sys::napi_coerce_to_string(env, value, &mut digits) })?;
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); `digits` is the string N-API just made in this call's
                // scope.
                Read::Json(Value::String(unsafe { self.string(digits)? }))
            }
            sys::ValueType::napi_object => {
                if self.open.len() >= MAX_DEPTH {
                    return Err(self.error(format_args!("nested more than {MAX_DEPTH} deep")));
                }
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); the value is an object.
                if let Some(bytes) = unsafe { self.byte_array(value)? } {
                    Read::Bytes(bytes)
                } else {
                    let mut is_array = false;
                    // SAFETY: within the N-API call that made `self.env` and `value`, on the JS
                    // thread (the Reader's contract); `is_array` is a local.
                    self.ok(unsafe { sys::napi_is_array(env, value, &mut is_array) })?;
                    // SAFETY: within the N-API call that made `self.env` and `value`, on the JS
                    // thread (the Reader's contract).
                    unsafe { self.enter(value)? };
                    // SAFETY: within the N-API call that made `self.env` and `value`, on the JS
                    // thread (the Reader's contract); the value is an array or an object, as asked.
                    let json = if is_array { unsafe { self.array(value)? } } else { unsafe { self.object(value)? } };
                    self.open.pop();
                    Read::Json(json)
                }
            }
            _ => return Err(self.error("an external value is not JSON")),
        })
    }

    /// One pass: V8 knows the length in UTF-16 units, and no unit takes more than 3 UTF-8 bytes.
    /// Pages of the buffer that the text does not reach are never touched.
    unsafe fn string(&self, value: sys::napi_value) -> Result<String> {
        let mut units = 0;
        // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
        // Reader's contract); a null buffer of size 0 asks only for the length, written to the
        // local `units`.
        self.ok(unsafe { sys::napi_get_value_string_utf16(self.env, value, ptr::null_mut(), 0, &mut units) })?;
        let capacity = units * 3 + 1;
        let mut buf: Vec<u8> = Vec::with_capacity(capacity);
        let mut written = 0;
        let (env, dest) = (self.env, buf.as_mut_ptr());
        // V8 flattens the string before it copies a byte, so the destination's pages (at least
        // one byte per UTF-16 unit) can be faulted in on another core meanwhile.
        // SAFETY: `buf` outlives the call and is not touched by Rust until it returns.
        let status = unsafe {
            hugepages::populate_during(dest, units, || {
                sys::napi_get_value_string_utf8(env, value, dest.cast(), capacity, &mut written)
            })
        };
        self.ok(status)?;
        // SAFETY: N-API wrote `written` bytes (the capacity always suffices).
        unsafe { buf.set_len(written) };
        if buf.capacity() - written > 64 * 1024 {
            buf.shrink_to_fit();
        }
        // SAFETY: Node asks V8 for UTF-8 with invalid sequences replaced (as napi-rs relies on).
        Ok(unsafe { String::from_utf8_unchecked(buf) })
    }

    /// The bytes of a `Uint8Array` (a `Buffer` is one), `ArrayBuffer` or `DataView`; `None` for
    /// any other object; an error for typed arrays of wider elements.
    unsafe fn byte_array(&self, value: sys::napi_value) -> Result<Option<Vec<u8>>> {
        let env = self.env;
        let (mut data, mut len) = (ptr::null_mut(), 0);
        let mut yes = false;
        // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
        // Reader's contract); `yes` is a local.
        self.ok(unsafe { sys::napi_is_typedarray(env, value, &mut yes) })?;
        if yes {
            let (mut kind, mut buffer, mut offset) = (0, ptr::null_mut(), 0);
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); the value is a typed array, and every out-parameter is a local.
            self.ok(unsafe {
                sys::napi_get_typedarray_info(env, value, &mut kind, &mut len, &mut data, &mut buffer, &mut offset)
            })?;
            if kind != sys::TypedarrayType::uint8_array && kind != sys::TypedarrayType::uint8_clamped_array {
                return Err(self.error("only Uint8Array holds bytes; this typed array is not JSON"));
            }
        } else {
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `yes` is a local.
            self.ok(unsafe { sys::napi_is_arraybuffer(env, value, &mut yes) })?;
            if yes {
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); the value is an ArrayBuffer, and the out-parameters are
                // locals.
                self.ok(unsafe { sys::napi_get_arraybuffer_info(env, value, &mut data, &mut len) })?;
            } else {
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); `yes` is a local.
                self.ok(unsafe { sys::napi_is_dataview(env, value, &mut yes) })?;
                if !yes {
                    return Ok(None);
                }
                let (mut buffer, mut offset) = (ptr::null_mut(), 0);
                // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread
                // (the Reader's contract); the value is a DataView, and every out-parameter is a
                // local.
                self.ok(unsafe {
                    sys::napi_get_dataview_info(env, value, &mut len, &mut data, &mut buffer, &mut offset)
                })?;
            }
        }
        if len == 0 || data.is_null() {
            return Ok(Some(Vec::new()));
        }
        // SAFETY: N-API describes `len` readable bytes at `data`, alive while `value` is.
        Ok(Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec()))
    }

    unsafe fn array(&mut self, value: sys::napi_value) -> Result<Value> {
        let mut len = 0;
        // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
        // Reader's contract); the value is an array, `len` a local.
        self.ok(unsafe { sys::napi_get_array_length(self.env, value, &mut len) })?;
        let mut out = Vec::with_capacity(len as usize);
        for i in 0..len {
            let mut element = ptr::null_mut();
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `element` is a local, and the handle it receives lives in this
            // call's scope.
            self.ok(unsafe { sys::napi_get_element(self.env, value, i, &mut element) })?;
            self.path.push(i.to_string());
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `element` is a handle of this call's scope.
            match unsafe { self.read(element)? } {
                Read::Json(json) => out.push(json),
                Read::Skipped(_) => out.push(Value::Null),
                Read::Bytes(_) => return Err(self.error("byte arrays inside arrays are not supported; use base64")),
            }
            self.path.pop();
        }
        Ok(Value::Array(out))
    }

    /// Own enumerable string-keyed properties, in order, as `JSON.stringify` reads them.
    unsafe fn object(&mut self, value: sys::napi_value) -> Result<Value> {
        let env = self.env;
        let mut keys = ptr::null_mut();
        // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
        // Reader's contract); `keys` is a local.
        self.ok(unsafe {
            sys::napi_get_all_property_names(
                env,
                value,
                sys::KeyCollectionMode::own_only,
                sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                sys::KeyConversion::numbers_to_strings,
                &mut keys,
            )
        })?;
        let mut len = 0;
        // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
        // Reader's contract); `keys` is the array N-API just made, `len` a local.
        self.ok(unsafe { sys::napi_get_array_length(env, keys, &mut len) })?;
        let mut out = Map::new();
        for i in 0..len {
            let (mut key, mut property) = (ptr::null_mut(), ptr::null_mut());
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `key` is a local.
            self.ok(unsafe { sys::napi_get_element(env, keys, i, &mut key) })?;
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `key` is a string (numbers_to_strings) of this call's scope.
            let name = unsafe { self.string(key)? };
            self.path.push(name);
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `key` is one of the value's own keys, `property` a local.
            self.ok(unsafe { sys::napi_get_property(env, value, key, &mut property) })?;
            // SAFETY: within the N-API call that made `self.env` and `value`, on the JS thread (the
            // Reader's contract); `property` is a handle of this call's scope.
            let read = unsafe { self.read(property)? };
            let name = self.path.pop().expect("pushed above");
            match read {
                Read::Json(json) => {
                    out.insert(name, json);
                }
                Read::Bytes(data) => {
                    let mut path = self.path.clone();
                    path.push(name);
                    self.bytes.push(BytesAt { path, data });
                }
                Read::Skipped(_) => {}
            }
        }
        Ok(Value::Object(out))
    }
}

/// A JS number as JSON: integers exactly (up to 2^53), other finite numbers as floats, and
/// NaN / ±Infinity as proto3 JSON's strings for them.
fn number(n: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.is_nan() {
        Value::String("NaN".into())
    } else if n.is_infinite() {
        Value::String(if n > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else if n.fract() == 0.0 && n.abs() <= EXACT {
        Value::Number(Number::from(n as i64))
    } else {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// A JSON value between JavaScript and the core. To JavaScript it is converted with a stack of
/// its own (see the module docs): scalars as napi-rs converts them, arrays and objects at any
/// depth. From JavaScript it is read as [`HostJson`] is (to [`MAX_DEPTH`] levels), without byte
/// arrays: an embedded-backend scenario, say, whose server messages nest as deep as the
/// protocol allows.
pub struct Json(pub Value);

impl TypeName for Json {
    fn type_name() -> &'static str {
        "JSON"
    }

    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl FromNapiValue for Json {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: napi calls `from_napi_value` on the JS thread with the env and value of the
        // current call, handed on unchanged.
        let HostJson { json, bytes } = unsafe { HostJson::from_napi_value(env, value)? };
        match bytes.first() {
            None => Ok(Json(json)),
            Some(at) => Err(Error::new(
                Status::InvalidArg,
                format!("a byte array is not JSON (at `{}`); use base64", at.path.join(".")),
            )),
        }
    }
}

impl ToNapiValue for Json {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        // SAFETY: napi calls `to_napi_value` on the JS thread with a live env, handed on unchanged.
        unsafe { to_js(env, &value.0) }
    }
}

/// An array or object being filled: the JavaScript value and what is left to put in it.
enum Open<'a> {
    Array { js: sys::napi_value, items: std::iter::Enumerate<std::slice::Iter<'a, Value>> },
    Object { js: sys::napi_value, entries: map::Iter<'a> },
}

/// `value` as a JavaScript value. Each array or object is made empty, attached to its parent,
/// and filled as the walk reaches it, so nothing waits for its children on the native stack.
/// Safety: on the JS thread, with the env of the current N-API call.
unsafe fn to_js(env: sys::napi_env, value: &Value) -> Result<sys::napi_value> {
    let mut open: Vec<Open<'_>> = Vec::new();
    // SAFETY: `env` is live on this (the JS) thread, as `to_js` requires of its caller.
    let root = unsafe { start(env, value, &mut open)? };
    while let Some(top) = open.last_mut() {
        match top {
            Open::Array { js, items } => {
                let parent = *js;
                let Some((index, item)) = items.next() else {
                    open.pop();
                    continue;
                };
                // SAFETY: as above; `open` holds the arrays and objects made in this call.
                let child = unsafe { start(env, item, &mut open)? };
                // SAFETY: `parent` is an array made by `start` in this call, `child` a value made
                // in it, and `index` is below its length.
                check(unsafe { sys::napi_set_element(env, parent, index as u32, child) })?;
            }
            Open::Object { js, entries } => {
                let parent = *js;
                let Some((key, item)) = entries.next() else {
                    open.pop();
                    continue;
                };
                // SAFETY: `env` is live on this (the JS) thread, as `to_js` requires.
                let name = unsafe { <&str as ToNapiValue>::to_napi_value(env, key.as_str())? };
                // SAFETY: as above; `open` holds the arrays and objects made in this call.
                let child = unsafe { start(env, item, &mut open)? };
                // SAFETY: `parent` is an object made by `start` in this call; `name` and `child`
                // are values made in it.
                check(unsafe { sys::napi_set_property(env, parent, name, child) })?;
            }
        }
    }
    Ok(root)
}

/// The JavaScript value of `value`: a scalar, or an empty array or object, which is then queued
/// in `open` to be filled. Safety: on the JS thread, with the env of the current N-API call.
unsafe fn start<'a>(env: sys::napi_env, value: &'a Value, open: &mut Vec<Open<'a>>) -> Result<sys::napi_value> {
    // SAFETY: `env` is live on this (the JS) thread, as `start` requires of its caller; the
    // out-parameters are locals.
    unsafe {
        Ok(match value {
            Value::Null => Null::to_napi_value(env, Null)?,
            Value::Bool(b) => bool::to_napi_value(env, *b)?,
            Value::Number(n) => <&Number as ToNapiValue>::to_napi_value(env, n)?,
            Value::String(s) => <&str as ToNapiValue>::to_napi_value(env, s.as_str())?,
            Value::Array(items) => {
                let mut js = ptr::null_mut();
                check(sys::napi_create_array_with_length(env, items.len(), &mut js))?;
                if !items.is_empty() {
                    open.push(Open::Array { js, items: items.iter().enumerate() });
                }
                js
            }
            Value::Object(entries) => {
                let mut js = ptr::null_mut();
                check(sys::napi_create_object(env, &mut js))?;
                if !entries.is_empty() {
                    open.push(Open::Object { js, entries: entries.iter() });
                }
                js
            }
        })
    }
}

fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::from(status), "converting a value to JavaScript failed"))
    }
}
