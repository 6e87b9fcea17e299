#[macro_use]
extern crate napi_derive;
