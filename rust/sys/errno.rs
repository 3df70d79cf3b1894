// SPDX-License-Identifier: GPL-2.0

//! Error codes the 6.12 kernel crate does not name (`kernel::error::code` lacks
//! them), built from the C values. No `unsafe` here.

use kernel::error::Error;

macro_rules! errnos {
    ($($fn:ident => $c:ident,)*) => {
        $(
            #[doc = concat!("`", stringify!($c), "`.")]
            pub(crate) fn $fn() -> Error {
                Error::from_errno(-(kernel::bindings::$c as i32))
            }
        )*
    };
}

errnos! {
    enotconn => ENOTCONN,
    emsgsize => EMSGSIZE,
    etimedout => ETIMEDOUT,
    eproto => EPROTO,
    eremoteio => EREMOTEIO,
    econnrefused => ECONNREFUSED,
    econnreset => ECONNRESET,
    enetunreach => ENETUNREACH,
    enetdown => ENETDOWN,
    ehostunreach => EHOSTUNREACH,
    enobufs => ENOBUFS,
}
