// SPDX-License-Identifier: GPL-2.0

//! debugfs directories and read-only files whose text a Rust [`Show`] writes.
//!
//! A [`Dir`] owns its files: dropping it removes the directory recursively with
//! `debugfs_remove()`, which waits until no reader is inside a file's `show`, and
//! only then releases the data the files point to. No file can outlive its data.
//!
//! The files' `file_operations` (debugfs.c) have `.owner = THIS_MODULE`, so an
//! open file pins the module: `rmmod` fails with "in use" until it is closed
//! (the selftests' runner relies on this, `SELFTEST_INJECT_LEAK`). That is why
//! the module does not use the kernel crate's `kernel::debugfs` (Linux 7.3):
//! its tables (rust/kernel/debugfs/file_ops.rs, `ReadFile` and `ReadWriteFile`)
//! leave `owner` NULL, so an open file would not pin the module, and once the
//! module is gone, closing the file would make debugfs (fs/debugfs/file.c,
//! `full_proxy_release`) read `->release` from a table in the freed module.
//! Those tables are monomorphised into this module; it cannot add an owner.

use super::bindings::{
    c_fn, debugfs_create_dir, debugfs_create_file_full, debugfs_remove, dentry, rpcrdma_cm_rw_fops,
    rpcrdma_cm_seq_fops, seq_file, seq_write,
};
use core::fmt;
use core::marker::PhantomData;
use core::ptr;
use kernel::error::from_err_ptr;
use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Something that renders itself as the text of a debugfs file.
pub(crate) trait Show: Send + Sync {
    /// Writes the file's whole content.
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result;

    /// Takes the text of one write() to a file made by [`Dir::rw_file`]; an error
    /// becomes the write()'s error.
    fn write(&self, _text: &str) -> Result {
        Err(EPERM)
    }
}

/// The text buffer of one read of a debugfs file.
pub(crate) struct SeqFile<'a> {
    ptr: *mut seq_file,
    _m: PhantomData<&'a mut seq_file>,
}

impl SeqFile<'_> {
    /// The seq_file `ptr`, written to for as long as the result lives.
    ///
    /// # Safety
    ///
    /// `ptr` is the seq_file of a running ->show (or print_stats) callback.
    pub(super) unsafe fn from_raw(ptr: *mut seq_file) -> Self {
        SeqFile {
            ptr,
            _m: PhantomData,
        }
    }
}

impl fmt::Write for SeqFile<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // On overflow seq_write() marks the buffer full and seq_read() retries
        // ->show with a larger one, so its result needs no handling here.
        // SAFETY: `self.ptr` is the seq_file of the running ->show (valid for
        // `'a`, see `rpcrdma_cm_debugfs_show`); `s` is valid for `s.len()` bytes.
        unsafe { seq_write(self.ptr, s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

/// Called by `debugfs.c` for each read of a file made by [`Dir::file`].
///
/// # Safety
///
/// Called only by debugfs.c's seq_file show, with `m` the seq_file of the
/// read, valid for the call, and `private` the pointer the file was created
/// with, which the [`Dir`] keeps until debugfs_remove() has waited for every
/// call in progress.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_debugfs_show(m: *mut seq_file, private: *mut c_void) -> c_int {
    // The Dir removes the file with debugfs_remove(), which waits for this call
    // to return, before it drops the box `private` points into.
    // SAFETY: `private` is the i_private set by `Dir::add`: an `Arc<dyn Show>`
    // in a `KBox` owned by the `Dir`, valid until after this call (see above).
    let data: &Arc<dyn Show> = unsafe { &*private.cast::<Arc<dyn Show>>() };
    let mut seq = SeqFile {
        ptr: m,
        _m: PhantomData,
    };
    match data.show(&mut seq) {
        Ok(()) => 0,
        Err(fmt::Error) => EINVAL.to_errno(),
    }
}
c_fn!(rpcrdma_cm_debugfs_show);

/// Called by `debugfs.c` for each write() to a file made by [`Dir::rw_file`].
///
/// # Safety
///
/// Called only by debugfs.c's write, with `private` the pointer the file was
/// created with (kept as for [`rpcrdma_cm_debugfs_show`]) and `buf` a
/// NUL-terminated kernel copy of the user's `len` octets (memdup_user_nul),
/// valid for the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_debugfs_write(
    private: *mut c_void,
    buf: *const c_char,
    len: usize,
) -> c_int {
    // SAFETY: `private` is the i_private of a file made by `Dir::rw_file`, valid
    // until debugfs_remove() returns (see rpcrdma_cm_debugfs_show).
    let data: &Arc<dyn Show> = unsafe { &*private.cast::<Arc<dyn Show>>() };
    // SAFETY: debugfs.c passes a kernel copy of the user's `len` octets, alive for
    // this call.
    let bytes = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) };
    let Ok(text) = core::str::from_utf8(bytes) else {
        return EINVAL.to_errno();
    };
    match data.write(text) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
c_fn!(rpcrdma_cm_debugfs_write);

/// A debugfs directory and the files in it.
pub(crate) struct Dir {
    dentry: *mut dentry,
    files: KVec<KBox<Arc<dyn Show>>>,
}

// SAFETY: a `Dir` is a handle to debugfs objects that may be used and removed from
// any thread; the shown data is `Send + Sync` by the bound on `Show`.
unsafe impl Send for Dir {}
// SAFETY: `&Dir` gives access to nothing but the dentry pointer, which debugfs
// functions accept from any thread.
unsafe impl Sync for Dir {}

impl Dir {
    /// Creates directory `name` at the top of debugfs.
    pub(crate) fn new(name: &CStr) -> Result<Self> {
        Self::create(name, ptr::null_mut())
    }

    fn create(name: &CStr, parent: *mut dentry) -> Result<Self> {
        // SAFETY: `name` is NUL-terminated and outlives the call; `parent` is NULL
        // or a live directory dentry.
        let d = from_err_ptr(unsafe { debugfs_create_dir(name.as_char_ptr(), parent) })?;
        Ok(Dir {
            dentry: d,
            files: KVec::new(),
        })
    }

    /// Adds a read-only (0444) file `name` whose content `data.show()` writes on
    /// each open.
    pub(crate) fn file(&mut self, name: &CStr, data: Arc<dyn Show>) -> Result {
        self.add(name, data, false)
    }

    /// Adds a file `name` that root may also write (0644): each write() goes to
    /// `data.write()`.
    pub(crate) fn rw_file(&mut self, name: &CStr, data: Arc<dyn Show>) -> Result {
        self.add(name, data, true)
    }

    fn add(&mut self, name: &CStr, data: Arc<dyn Show>, writable: bool) -> Result {
        // The box goes into `self.files` first: if creating the file fails, it
        // stays there unused until the Dir is dropped.
        self.files.push(KBox::new(data, GFP_KERNEL)?, GFP_KERNEL)?;
        let private: *const Arc<dyn Show> = match self.files.as_slice().last() {
            Some(boxed) => &**boxed,
            None => return Err(EINVAL),
        };
        let (mode, fops) = if writable {
            (0o644, ptr::addr_of!(rpcrdma_cm_rw_fops))
        } else {
            (0o444, ptr::addr_of!(rpcrdma_cm_seq_fops))
        };
        // `private` points into a box in `self.files`, freed only after Drop
        // removed the directory, which waits for callers inside the file's ops.
        // SAFETY: `name` is NUL-terminated, `self.dentry` our live directory,
        // `fops` one of debugfs.c's static tables; `private` outlives the file.
        from_err_ptr(unsafe {
            debugfs_create_file_full(
                name.as_char_ptr(),
                mode,
                self.dentry,
                private.cast_mut().cast(),
                ptr::null(),
                fops,
            )
        })?;
        Ok(())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: `self.dentry` is the directory this Dir created and nobody else
        // removes. debugfs_remove() is recursive and waits for readers inside ->show, so the
        // boxes in `self.files`, dropped after this, are no longer in use.
        unsafe { debugfs_remove(self.dentry) };
    }
}
