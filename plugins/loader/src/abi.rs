//! The plugin C ABI, version 1. See `docs/plugins.md` for the rules.
//!
//! A plugin exports two unmangled `extern "C"` functions:
//!
//! - `rr_plugin_abi_version() -> u32`: must return [`ABI_VERSION`]; the host
//!   calls it first and nothing else when it differs;
//! - `rr_plugin_describe_v1() -> *const RrPluginV1`: a pointer to a static
//!   table, valid as long as the library is loaded (forever).
//!
//! All text crossing the boundary is UTF-8 JSON in (pointer, length) pairs;
//! memory a plugin hands out is given back to it through `free_buffer`.

use std::ffi::c_void;

/// The ABI this host speaks. Bumped on any incompatible change to the table
/// or the JSON messages.
pub const ABI_VERSION: u32 = 1;
/// Symbol of the handshake, NUL-terminated.
pub const ENTRY_ABI_VERSION: &[u8] = b"rr_plugin_abi_version\0";
/// Symbol of the table, NUL-terminated.
pub const ENTRY_DESCRIBE: &[u8] = b"rr_plugin_describe_v1\0";

/// What a plugin builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    Store = 1,
    Embedder = 2,
    Reranker = 3,
}

impl Kind {
    pub fn from_u32(v: u32) -> Option<Kind> {
        match v {
            1 => Some(Kind::Store),
            2 => Some(Kind::Embedder),
            3 => Some(Kind::Reranker),
            _ => None,
        }
    }
}

/// Borrowed bytes: valid for the duration of the call that receives them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RrSlice {
    pub ptr: *const u8,
    pub len: usize,
}

impl RrSlice {
    pub const fn from_str(s: &str) -> RrSlice {
        RrSlice { ptr: s.as_ptr(), len: s.len() }
    }

    /// The bytes.
    ///
    /// # Safety
    /// `ptr` must point at `len` initialised bytes that outlive the result.
    pub unsafe fn as_bytes<'a>(&self) -> &'a [u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller, per this function's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Bytes owned by the plugin, handed to the host, and given back to the
/// plugin's `free_buffer` once copied. `cap` is the plugin's business.
#[repr(C)]
#[derive(Debug)]
pub struct RrBuffer {
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

impl RrBuffer {
    pub const EMPTY: RrBuffer = RrBuffer { ptr: std::ptr::null_mut(), len: 0, cap: 0 };
}

/// The table of ABI v1. Every field must be set; function pointers are
/// never null.
#[repr(C)]
pub struct RrPluginV1 {
    /// `size_of::<RrPluginV1>()` as the plugin was compiled; the host refuses smaller tables.
    pub struct_size: usize,
    /// [`Kind`] as a `u32`.
    pub kind: u32,
    /// The registry name (`kind = "<name>"` in the configuration): static UTF-8.
    pub name: RrSlice,
    /// Builds an instance from the JSON configuration section. Returns 0 and
    /// sets `*instance`; or non-zero with a UTF-8 message in `*error`.
    pub create: extern "C" fn(config: RrSlice, error: *mut RrBuffer, instance: *mut *mut c_void) -> i32,
    /// One JSON request in, one JSON answer (status 0) or a UTF-8 error message (non-zero) out.
    /// May be called concurrently from several threads on one instance.
    pub call: extern "C" fn(instance: *mut c_void, request: RrSlice, out: *mut RrBuffer) -> i32,
    /// Frees a buffer this plugin produced.
    pub free_buffer: extern "C" fn(buffer: RrBuffer),
    /// Destroys an instance; called once, after its last call.
    pub destroy: extern "C" fn(instance: *mut c_void),
}

// SAFETY: the table is immutable static data (function pointers and a pointer to
// static bytes), so sharing references between threads is sound.
unsafe impl Sync for RrPluginV1 {}
