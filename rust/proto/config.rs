// SPDX-License-Identifier: GPL-2.0

//! What users type: module parameter values and debugfs control commands.
//! Parsed here, in pure code, so the rules are host-tested and the module only
//! acts on values that passed them.

use core::net::SocketAddr;
use core::str::FromStr;

use crate::proto::pvt_data::{MAX_INLINE_SIZE, MIN_INLINE_SIZE};

/// Why a `send_size` / `recv_size` value is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeParamError {
    /// Below 1024, the RPC-over-RDMA version 1 minimum.
    TooSmall,
    /// Above 262144, the largest size RFC 8797 can express.
    TooLarge,
    /// Not a multiple of 1024: it could not be advertised exactly.
    NotMultiple,
}

/// Checks a buffer-size parameter. Values are refused, never rounded or clamped:
/// what the user sets is exactly what peers are told.
pub fn check_size_param(v: u32) -> Result<u32, SizeParamError> {
    if v < MIN_INLINE_SIZE {
        Err(SizeParamError::TooSmall)
    } else if v > MAX_INLINE_SIZE {
        Err(SizeParamError::TooLarge)
    } else if v % 1024 != 0 {
        Err(SizeParamError::NotMultiple)
    } else {
        Ok(v)
    }
}

/// Most listeners one `listen` parameter may name.
pub const MAX_LISTENERS: usize = 8;

/// Parses one endpoint: `a.b.c.d:port` or `[v6]:port`, port 1 to 65535.
pub fn parse_endpoint(s: &str) -> Option<SocketAddr> {
    let sa = SocketAddr::from_str(s.trim()).ok()?;
    (sa.port() != 0).then_some(sa)
}

/// Iterates a `listen` parameter: endpoints separated by commas. Empty means none.
pub fn listen_list(s: &str) -> impl Iterator<Item = Option<SocketAddr>> + '_ {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(parse_endpoint)
}

/// Checks a whole `listen` parameter: every endpoint valid, at most
/// [`MAX_LISTENERS`], none twice.
pub fn check_listen_param(s: &str) -> bool {
    let mut seen = [None; MAX_LISTENERS];
    for (i, ep) in listen_list(s).enumerate() {
        let Some(ep) = ep else { return false };
        if i >= MAX_LISTENERS || seen[..i].contains(&Some(ep)) {
            return false;
        }
        seen[i] = Some(ep);
    }
    true
}

/// Longest server transport class name `svc_class` may give (sunrpc's
/// `xcl_name` is matched against nfsd's portlist word).
pub const MAX_SVC_CLASS_NAME: usize = 15;

/// Checks a `svc_class` parameter, up to its first newline: at most
/// [`MAX_SVC_CLASS_NAME`] ASCII letters, digits, `_` or `-`. Empty (no server
/// class) is allowed.
pub fn check_svc_class_param(s: &[u8]) -> bool {
    let name = s.split(|&b| b == b'\n').next().unwrap_or(&[]);
    name.len() <= MAX_SVC_CLASS_NAME
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Per-connection overrides of what a client connection advertises; `None` keeps
/// the module parameter's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Advert {
    /// `send_size=N`.
    pub send_size: Option<u32>,
    /// `recv_size=N`.
    pub recv_size: Option<u32>,
    /// `remote_invalidate=0|1`.
    pub remote_invalidate: Option<bool>,
    /// `legacy=0|1`.
    pub legacy: Option<bool>,
}

/// A command written to `/sys/kernel/debug/rpcrdma_cm/control`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `connect ADDR PORT [send_size=N] [recv_size=N] [remote_invalidate=0|1]
    /// [legacy=0|1]`: open a client connection.
    Connect(SocketAddr, Advert),
    /// `disconnect ID`: close connection ID.
    Disconnect(u32),
    /// `call ID ...`: issue one RPC on client connection ID and wait for it.
    Call(u32, CallSpec),
    /// `bench ID N ...`: issue N such RPCs one after the other and keep their
    /// latency statistics (the `bench` file).
    Bench(u32, u32, CallSpec),
    /// `ping ADDR PORT N`: N NULL calls of NFS version 4 through sunrpc over
    /// the kernel's RPC-over-RDMA transport class (whichever module
    /// registered it); latency statistics in the `bench` file.
    Ping(SocketAddr, u32),
}

/// What `call ID ...` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallSpec {
    /// `call ID null`: the NFS program's NULL procedure, version 4.
    NfsNull,
    /// `call ID echo LEN [ddp=0|1]`: the echo program's ECHO (or with `ddp=0`,
    /// ECHO_NODDP) with LEN octets (at most
    /// [`crate::proto::rpc::echo::MAX_PAYLOAD`]).
    Echo {
        /// Payload octets.
        len: u32,
        /// Whether the payload is DDP-eligible (ECHO) or not (ECHO_NODDP).
        ddp: bool,
    },
    /// `call ID nfs ...`: an NFSv4.0 COMPOUND (see [`NfsSpec`]).
    Nfs(NfsSpec),
    /// `call ID rpc PROG VERS PROC`: any procedure, without arguments.
    Rpc {
        /// Program.
        prog: u32,
        /// Version.
        vers: u32,
        /// Procedure.
        proc_: u32,
    },
}

/// Longest file name an `nfs` command takes.
pub const NFS_NAME_MAX: usize = 64;

/// What an `nfs` command does after PUTROOTFH and (unless the name is `/`) a
/// LOOKUP of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NfsOp {
    /// `nfs getattr NAME`: GETATTR of type and size.
    GetAttr,
    /// `nfs read NAME COUNT [OFFSET]`.
    Read {
        /// Octets.
        count: u32,
        /// File offset.
        offset: u64,
    },
    /// `nfs write NAME COUNT SEED [OFFSET]`: COUNT octets of the echo pattern
    /// for SEED.
    Write {
        /// Octets.
        count: u32,
        /// Pattern seed.
        seed: u32,
        /// File offset.
        offset: u64,
    },
    /// `nfs readdir NAME [MAXCOUNT]` (default 131072).
    ReadDir {
        /// READDIR `maxcount`.
        maxcount: u32,
    },
}

/// An `nfs` command: the operation and the name it applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfsSpec {
    /// What to do.
    pub op: NfsOp,
    name: [u8; NFS_NAME_MAX],
    name_len: u8,
}

impl NfsSpec {
    /// The name to LOOKUP; empty for the root (`/`).
    pub fn name(&self) -> &[u8] {
        &self.name[..self.name_len as usize]
    }
}

fn parse_nfs<'a>(mut w: impl Iterator<Item = &'a str>) -> Option<NfsSpec> {
    let verb = w.next()?;
    let name = w.next()?;
    if name.len() > NFS_NAME_MAX || name.is_empty() || (name.contains('/') && name != "/") {
        return None;
    }
    let num = |s: Option<&str>| s.map(u64::from_str).transpose().ok();
    let op = match verb {
        "getattr" => NfsOp::GetAttr,
        "read" => {
            let count = u32::from_str(w.next()?).ok()?;
            let offset = num(w.next())?.unwrap_or(0);
            (count <= crate::proto::rpc::echo::MAX_PAYLOAD)
                .then_some(NfsOp::Read { count, offset })?
        }
        "write" => {
            let count = u32::from_str(w.next()?).ok()?;
            let seed = u32::from_str(w.next()?).ok()?;
            let offset = num(w.next())?.unwrap_or(0);
            (count <= crate::proto::rpc::echo::MAX_PAYLOAD).then_some(NfsOp::Write {
                count,
                seed,
                offset,
            })?
        }
        "readdir" => {
            let maxcount = num(w.next())?.unwrap_or(131_072);
            let maxcount = u32::try_from(maxcount)
                .ok()
                .filter(|m| (512..=1 << 20).contains(m))?;
            NfsOp::ReadDir { maxcount }
        }
        _ => return None,
    };
    if w.next().is_some() {
        return None;
    }
    let mut spec = NfsSpec {
        op,
        name: [0; NFS_NAME_MAX],
        name_len: 0,
    };
    if name != "/" {
        spec.name[..name.len()].copy_from_slice(name.as_bytes());
        spec.name_len = name.len() as u8;
    }
    Some(spec)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "0" | "n" | "N" => Some(false),
        "1" | "y" | "Y" => Some(true),
        _ => None,
    }
}

fn parse_option(adv: &mut Advert, opt: &str) -> Option<()> {
    let (k, v) = opt.split_once('=')?;
    match k {
        "send_size" => adv.send_size = Some(check_size_param(u32::from_str(v).ok()?).ok()?),
        "recv_size" => adv.recv_size = Some(check_size_param(u32::from_str(v).ok()?).ok()?),
        "remote_invalidate" => adv.remote_invalidate = Some(parse_bool(v)?),
        "legacy" => adv.legacy = Some(parse_bool(v)?),
        _ => return None,
    }
    Some(())
}

/// Most calls one `bench` command makes.
pub const MAX_BENCH: u32 = 100_000;

/// Parses what follows `call ID` (and `bench ID N`).
fn parse_spec<'a>(mut w: impl Iterator<Item = &'a str>) -> Option<CallSpec> {
    let spec = match w.next()? {
        "null" => CallSpec::NfsNull,
        "echo" => {
            let len = u32::from_str(w.next()?).ok()?;
            let ddp = match w.next() {
                None => true,
                Some(opt) => parse_bool(opt.strip_prefix("ddp=")?)?,
            };
            (len <= crate::proto::rpc::echo::MAX_PAYLOAD).then_some(CallSpec::Echo { len, ddp })?
        }
        "nfs" => return parse_nfs(w).map(CallSpec::Nfs),
        "rpc" => CallSpec::Rpc {
            prog: u32::from_str(w.next()?).ok()?,
            vers: u32::from_str(w.next()?).ok()?,
            proc_: u32::from_str(w.next()?).ok()?,
        },
        _ => return None,
    };
    w.next().is_none().then_some(spec)
}

/// A command's `ADDR PORT` words (port 1 to 65535).
fn parse_addr_port<'a>(w: &mut impl Iterator<Item = &'a str>) -> Option<SocketAddr> {
    let ip = core::net::IpAddr::from_str(w.next()?).ok()?;
    let port = u16::from_str(w.next()?).ok().filter(|p| *p != 0)?;
    Some(SocketAddr::new(ip, port))
}

/// A command's count of calls (1 to [`MAX_BENCH`]).
fn parse_count(word: Option<&str>) -> Option<u32> {
    u32::from_str(word?)
        .ok()
        .filter(|n| (1..=MAX_BENCH).contains(n))
}

/// Parses one control command (surrounding white space and a trailing newline
/// are ignored). `None` for anything else, including a bad option value.
pub fn parse_command(s: &str) -> Option<Command> {
    let mut w = s.split_whitespace();
    match w.next()? {
        "connect" => {
            let to = parse_addr_port(&mut w)?;
            let mut adv = Advert::default();
            for opt in w {
                parse_option(&mut adv, opt)?;
            }
            Some(Command::Connect(to, adv))
        }
        "disconnect" => {
            let id = u32::from_str(w.next()?).ok()?;
            w.next().is_none().then_some(Command::Disconnect(id))
        }
        "call" => {
            let id = u32::from_str(w.next()?).ok()?;
            Some(Command::Call(id, parse_spec(w)?))
        }
        "bench" => {
            let id = u32::from_str(w.next()?).ok()?;
            let n = parse_count(w.next())?;
            Some(Command::Bench(id, n, parse_spec(w)?))
        }
        "ping" => {
            let to = parse_addr_port(&mut w)?;
            let n = parse_count(w.next())?;
            w.next().is_none().then_some(Command::Ping(to, n))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{format, vec, vec::Vec};

    #[test]
    fn sizes_are_refused_not_rounded() {
        assert_eq!(check_size_param(4096), Ok(4096));
        assert_eq!(check_size_param(1024), Ok(1024));
        assert_eq!(check_size_param(262_144), Ok(262_144));
        assert_eq!(check_size_param(1023), Err(SizeParamError::TooSmall));
        assert_eq!(check_size_param(0), Err(SizeParamError::TooSmall));
        assert_eq!(check_size_param(4095), Err(SizeParamError::NotMultiple));
        assert_eq!(check_size_param(263_168), Err(SizeParamError::TooLarge));
    }

    #[test]
    fn listen_lists() {
        assert!(check_listen_param(""));
        assert!(check_listen_param("192.0.2.1:20050"));
        assert!(check_listen_param("192.0.2.1:20050, [2001:db8::1]:20050"));
        assert!(!check_listen_param("192.0.2.1"));
        assert!(!check_listen_param("192.0.2.1:0"));
        assert!(!check_listen_param("192.0.2.1:70000"));
        assert!(!check_listen_param("host:20049"));
        assert!(!check_listen_param("192.0.2.1:1,192.0.2.1:1"));
        assert!(!check_listen_param("1.1.1.1:1,1.1.1.1:2,1.1.1.1:3,1.1.1.1:4,1.1.1.1:5,1.1.1.1:6,1.1.1.1:7,1.1.1.1:8,1.1.1.1:9"));
    }

    #[test]
    fn svc_class_names() {
        assert!(check_svc_class_param(b"rdma"));
        assert!(check_svc_class_param(b"rdma_cm-2\n"));
        assert!(check_svc_class_param(b""));
        assert!(check_svc_class_param(b"abcdefghijklmno"));
        assert!(!check_svc_class_param(b"abcdefghijklmnop"));
        assert!(!check_svc_class_param(b"rd ma"));
        assert!(!check_svc_class_param(b"rdma/x"));
        assert!(!check_svc_class_param(b"\xe9t\xe9"));
    }

    #[test]
    fn commands() {
        let ep = parse_endpoint("192.0.2.1:20049").unwrap();
        let none = Advert::default();
        assert_eq!(
            parse_command("connect 192.0.2.1 20049\n"),
            Some(Command::Connect(ep, none))
        );
        assert_eq!(
            parse_command("  disconnect 7 "),
            Some(Command::Disconnect(7))
        );
        assert_eq!(parse_command("connect 192.0.2.1"), None);
        assert_eq!(parse_command("connect 192.0.2.1 0"), None);
        assert_eq!(parse_command("connect 192.0.2.1 20049 extra"), None);
        assert_eq!(parse_command("disconnect x"), None);
        assert_eq!(parse_command("disconnect 1 2"), None);
        assert_eq!(parse_command(""), None);
        assert_eq!(parse_command("reboot"), None);
    }

    #[test]
    fn call_commands() {
        assert_eq!(
            parse_command("call 3 null\n"),
            Some(Command::Call(3, CallSpec::NfsNull))
        );
        assert_eq!(
            parse_command("call 3 echo 1048576"),
            Some(Command::Call(
                3,
                CallSpec::Echo {
                    len: 1 << 20,
                    ddp: true
                }
            ))
        );
        assert_eq!(
            parse_command("call 3 echo 5 ddp=0"),
            Some(Command::Call(3, CallSpec::Echo { len: 5, ddp: false }))
        );
        assert_eq!(parse_command("call 3 echo 5 ddp=2"), None);
        assert_eq!(parse_command("call 3 echo 5 dpp=0"), None);
        assert_eq!(parse_command("call 3 echo 5 ddp=0 x"), None);
        assert_eq!(
            parse_command("call 1 rpc 100005 3 0"),
            Some(Command::Call(
                1,
                CallSpec::Rpc {
                    prog: 100_005,
                    vers: 3,
                    proc_: 0
                }
            ))
        );
        assert_eq!(parse_command("call 3 echo 1048577"), None);
        assert_eq!(parse_command("call 3 echo"), None);
        assert_eq!(parse_command("call 3 echo -1"), None);
        assert_eq!(parse_command("call 3 null extra"), None);
        assert_eq!(parse_command("call 3 rpc 1 2"), None);
        assert_eq!(parse_command("call x null"), None);
        assert_eq!(parse_command("call 3 dance"), None);
        assert_eq!(
            parse_command("bench 2 1000 echo 8 ddp=0"),
            Some(Command::Bench(
                2,
                1000,
                CallSpec::Echo { len: 8, ddp: false }
            ))
        );
        assert_eq!(
            parse_command("ping 198.51.100.1 20049 500\n"),
            Some(Command::Ping(
                SocketAddr::new(core::net::IpAddr::from([198, 51, 100, 1]), 20049),
                500
            ))
        );
        assert!(matches!(
            parse_command("ping fe80::1 20049 1"),
            Some(Command::Ping(..))
        ));
        assert_eq!(parse_command("ping 198.51.100.1 20049 0"), None);
        assert_eq!(parse_command("ping 198.51.100.1 0 5"), None);
        assert_eq!(parse_command("ping 198.51.100.1 20049"), None);
        assert_eq!(parse_command("ping 198.51.100.1 20049 5 x"), None);
        assert_eq!(parse_command("bench 2 0 null"), None);
        assert_eq!(parse_command("bench 2 100001 null"), None);
        assert_eq!(parse_command("bench 2 10"), None);
    }

    fn nfs(s: &str) -> Option<(NfsOp, Vec<u8>)> {
        match parse_command(s)? {
            Command::Call(_, CallSpec::Nfs(n)) => Some((n.op, n.name().to_vec())),
            _ => None,
        }
    }

    #[test]
    fn nfs_commands() {
        assert_eq!(nfs("call 1 nfs getattr /"), Some((NfsOp::GetAttr, vec![])));
        assert_eq!(
            nfs("call 1 nfs read f1 4096"),
            Some((
                NfsOp::Read {
                    count: 4096,
                    offset: 0
                },
                b"f1".to_vec()
            ))
        );
        assert_eq!(
            nfs("call 1 nfs read f1 1 7"),
            Some((
                NfsOp::Read {
                    count: 1,
                    offset: 7
                },
                b"f1".to_vec()
            ))
        );
        assert_eq!(
            nfs("call 1 nfs write w 10 99"),
            Some((
                NfsOp::Write {
                    count: 10,
                    seed: 99,
                    offset: 0
                },
                b"w".to_vec()
            ))
        );
        assert_eq!(
            nfs("call 1 nfs readdir d"),
            Some((NfsOp::ReadDir { maxcount: 131_072 }, b"d".to_vec()))
        );
        assert_eq!(nfs("call 1 nfs read f1 1048577"), None);
        assert_eq!(nfs("call 1 nfs read a/b 1"), None);
        assert_eq!(nfs("call 1 nfs write w 10"), None);
        assert_eq!(nfs("call 1 nfs readdir d 100"), None);
        assert_eq!(nfs("call 1 nfs getattr / x"), None);
        assert_eq!(nfs(&format!("call 1 nfs getattr {}", "n".repeat(65))), None);
        assert_eq!(nfs("call 1 nfs chmod f"), None);
    }

    #[test]
    fn connect_options_override_and_are_checked() {
        let ep = parse_endpoint("192.0.2.1:20050").unwrap();
        let adv = Advert {
            send_size: Some(16384),
            recv_size: Some(1024),
            remote_invalidate: Some(false),
            legacy: Some(true),
        };
        assert_eq!(
            parse_command("connect 192.0.2.1 20050 send_size=16384 recv_size=1024 remote_invalidate=0 legacy=y"),
            Some(Command::Connect(ep, adv))
        );
        assert_eq!(
            parse_command("connect 192.0.2.1 20050 send_size=1000"),
            None
        );
        assert_eq!(
            parse_command("connect 192.0.2.1 20050 recv_size=524288"),
            None
        );
        assert_eq!(
            parse_command("connect 192.0.2.1 20050 remote_invalidate=2"),
            None
        );
        assert_eq!(parse_command("connect 192.0.2.1 20050 colour=blue"), None);
        assert_eq!(parse_command("connect 192.0.2.1 20050 send_size"), None);
    }
}
