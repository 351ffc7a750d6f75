//! The plugin side of the ABI, so a plugin author writes no `unsafe`:
//! implement [`GuestPlugin`] and invoke [`export_plugin!`](crate::export_plugin).
//!
//! Panics never cross the boundary: every entry point catches them and
//! reports an error instead.
// The entry points take raw pointers because they are the C ABI; only the
// host calls them, through the table, and it upholds the pointer contract.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::{Kind, RrBuffer, RrPluginV1, RrSlice};

/// A plugin implementation. `call` must be safe to run concurrently.
pub trait GuestPlugin: Sized + Send + Sync + 'static {
    /// What it builds.
    const KIND: Kind;
    /// Its registry name.
    const NAME: &'static str;
    /// Builds an instance from the JSON configuration section.
    fn create(config: &str) -> Result<Self, String>;
    /// Answers one JSON request (see docs/plugins.md for the messages of each kind).
    fn call(&self, request: &str) -> Result<String, String>;
}

fn buffer(text: String) -> RrBuffer {
    let mut bytes = std::mem::ManuallyDrop::new(text.into_bytes());
    RrBuffer { ptr: bytes.as_mut_ptr(), len: bytes.len(), cap: bytes.capacity() }
}

fn write(out: *mut RrBuffer, text: String) {
    if !out.is_null() {
        // SAFETY: ABI v1: the host passes a valid, writable `RrBuffer` pointer.
        unsafe { out.write(buffer(text)) };
    }
}

/// The `create` entry of `T`.
pub extern "C" fn create<T: GuestPlugin>(config: RrSlice, error: *mut RrBuffer, instance: *mut *mut c_void) -> i32 {
    let result = catch_unwind(|| {
        // SAFETY: ABI v1: `config` is valid for this call.
        let bytes = unsafe { config.as_bytes() };
        let text = std::str::from_utf8(bytes).map_err(|_| "configuration is not UTF-8".to_owned())?;
        T::create(text)
    });
    match result {
        Ok(Ok(plugin)) if !instance.is_null() => {
            // SAFETY: ABI v1: `instance` is a valid, writable pointer.
            unsafe { instance.write(Box::into_raw(Box::new(plugin)).cast()) };
            0
        }
        Ok(Ok(_)) => 2,
        Ok(Err(message)) => {
            write(error, message);
            1
        }
        Err(_) => {
            write(error, "plugin panicked while creating an instance".into());
            1
        }
    }
}

/// The `call` entry of `T`.
pub extern "C" fn call<T: GuestPlugin>(instance: *mut c_void, request: RrSlice, out: *mut RrBuffer) -> i32 {
    if instance.is_null() {
        write(out, "null instance".into());
        return 1;
    }
    // SAFETY: `instance` came from `create::<T>` and is not destroyed before its last call.
    let plugin: &T = unsafe { &*instance.cast::<T>() };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ABI v1: `request` is valid for this call.
        let bytes = unsafe { request.as_bytes() };
        let text = std::str::from_utf8(bytes).map_err(|_| "request is not UTF-8".to_owned())?;
        plugin.call(text)
    }));
    match result {
        Ok(Ok(answer)) => {
            write(out, answer);
            0
        }
        Ok(Err(message)) => {
            write(out, message);
            1
        }
        Err(_) => {
            write(out, "plugin panicked".into());
            1
        }
    }
}

/// The `free_buffer` entry (the same for every plugin built with this crate).
pub extern "C" fn free_buffer(buffer: RrBuffer) {
    if !buffer.ptr.is_null() {
        // SAFETY: the buffer was made by `buffer()` above from a `Vec<u8>` with this pointer, length and capacity.
        drop(unsafe { Vec::from_raw_parts(buffer.ptr, buffer.len, buffer.cap) });
    }
}

/// The `destroy` entry of `T`.
pub extern "C" fn destroy<T: GuestPlugin>(instance: *mut c_void) {
    if !instance.is_null() {
        // SAFETY: `instance` came from `Box::into_raw` in `create::<T>`, and the host destroys it once.
        let _ = catch_unwind(|| drop(unsafe { Box::from_raw(instance.cast::<T>()) }));
    }
}

/// The ABI v1 table of `T`.
pub const fn table<T: GuestPlugin>() -> RrPluginV1 {
    RrPluginV1 {
        struct_size: size_of::<RrPluginV1>(),
        kind: T::KIND as u32,
        name: RrSlice::from_str(T::NAME),
        create: create::<T>,
        call: call::<T>,
        free_buffer,
        destroy: destroy::<T>,
    }
}

/// Exports `$plugin` (a [`GuestPlugin`]) as this library's plugin: the two
/// entry points of ABI v1. Put `#[allow(unsafe_code)]` on the invocation:
/// `#[unsafe(no_mangle)]` counts as unsafe code.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        /// The ABI handshake.
        #[unsafe(no_mangle)]
        pub extern "C" fn rr_plugin_abi_version() -> u32 {
            $crate::abi::ABI_VERSION
        }

        /// The plugin's ABI v1 table.
        #[unsafe(no_mangle)]
        pub extern "C" fn rr_plugin_describe_v1() -> *const $crate::abi::RrPluginV1 {
            static TABLE: $crate::abi::RrPluginV1 = $crate::guest::table::<$plugin>();
            &TABLE
        }
    };
}
