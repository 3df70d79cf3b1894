// SPDX-License-Identifier: GPL-2.0

//! The built-in service (test builds) that the connections of our own
//! `listen` listeners answer: NULL of the NFS program, and the echo program
//! that the selftests and benchmarks call through every chunk type. nfsd's
//! connections never reach it (`Conn::on_recv` sends their calls to
//! `svc.rs`).

use super::responder::{CallIn, Incoming, ReplyRoute};
use super::xprt::{n32, short};
use super::Conn;
use crate::proto::header::{decode, encode_msg, ErrorBody, Limits, MsgSpec};
use crate::proto::rpc::{
    decode_call, echo, encode_accepted, encode_rpc_mismatch, AcceptStat, RpcError,
};
use crate::proto::ulb::NFS_PROGRAM;
use crate::proto::xdr::{XdrReader, XdrWriter};
use crate::stats::XprtCounter as X;
use crate::sys::qp::Qp;
use kernel::alloc::VVec;
use kernel::prelude::*;

impl Conn {
    /// A call on a connection of our own listener (not nfsd's): answered by
    /// the built-in service.
    pub(super) fn builtin_call_received(&self, qp: &Qp, data: &[u8]) {
        let Some(Incoming {
            call,
            nomsg,
            s2c,
            reminv,
        }) = self.check_call(qp, data, decode(data, &Limits::DEFAULT))
        else {
            return;
        };
        let chunks = &call.chunks;
        if nomsg
            || chunks.read_segments() != 0
            || chunks.write_chunks() != 0
            || chunks.reply_chunk().is_some()
        {
            if let Err(e) = self.serve_with_chunks(qp, &call, s2c, reminv) {
                self.call_failed(qp, call.xid, call.credits, e);
            }
            return;
        }
        let (xid, credits) = (call.xid, call.credits);
        let rpc = call.inline;
        let res = qp.send(None, |buf| {
            let limit = buf.len().min(s2c as usize);
            let buf = &mut buf[..limit];
            let spec = MsgSpec {
                xid,
                credits,
                nomsg: false,
                reads: &[],
                writes: &[],
                reply: None,
            };
            let hl = encode_msg(buf, &spec).map_err(short)?;
            Ok(hl + serve(&mut buf[hl..], rpc)?.0)
        });
        match res {
            Ok(()) => {
                self.touch();
                self.count(X::RepliesSent, 1);
                self.count(X::RepliesSentInline, 1);
            }
            Err(e) if e == EMSGSIZE => {
                // The reply does not fit the server-to-client threshold and the
                // call offered no Reply chunk (RFC 8166 Section 4.5.3).
                self.count(X::RepliesTooLarge, 1);
                self.send_error(qp, xid, credits, ErrorBody::Chunk);
            }
            Err(e) => self.send_failed(qp, e),
        }
    }

    /// Serves a call that carries chunks: pulls its Read chunks, runs it, and
    /// returns the reply through the Write list, inline, or in the Reply chunk.
    fn serve_with_chunks(&self, qp: &Qp, call: &CallIn<'_>, s2c: u32, reminv: bool) -> Result {
        let msg = self.assemble_call(qp, call)?;
        let mut out = VVec::with_capacity(msg.len() + 128, GFP_KERNEL)?;
        out.extend_with(msg.len() + 128, 0, GFP_KERNEL)?;
        let (n, ddp) = serve(&mut out, &msg)?;
        let route = ReplyRoute::of(call.xid, call.credits, &call.chunks)?;
        self.send_reply(qp, &route, &out[..n], ddp, s2c, reminv)
    }
}

/// The built-in service: writes the RPC reply to `call` into `out`; returns its
/// length and, when it has one, where its DDP-eligible result's data starts and
/// how long it is (without XDR padding). `EMSGSIZE` if it does not fit.
fn serve(out: &mut [u8], call: &[u8]) -> Result<(usize, Option<(usize, u32)>)> {
    let none = |r: core::result::Result<usize, crate::proto::xdr::Short>| {
        r.map(|n| (n, None)).map_err(short)
    };
    let c = match decode_call(call) {
        Ok(c) => c,
        Err((Some(xid), RpcError::RpcVersion(_))) => return none(encode_rpc_mismatch(out, xid)),
        Err((Some(xid), _)) => return none(encode_accepted(out, xid, AcceptStat::GarbageArgs)),
        Err((None, _)) => return Err(EPROTO),
    };
    let stat = match (c.prog, c.vers, c.proc_) {
        (NFS_PROGRAM, 3 | 4, 0) => AcceptStat::Success,
        (NFS_PROGRAM, 3 | 4, _) => AcceptStat::ProcUnavail,
        (NFS_PROGRAM, _, _) => AcceptStat::ProgMismatch { low: 3, high: 4 },
        (echo::PROGRAM, echo::VERSION, echo::NULL) => AcceptStat::Success,
        (echo::PROGRAM, echo::VERSION, proc_ @ (echo::ECHO | echo::ECHO_NODDP)) => {
            let mut r = XdrReader::new(&call[c.args..]);
            let Ok(data) = r.opaque(echo::MAX_PAYLOAD as usize) else {
                return none(encode_accepted(out, c.xid, AcceptStat::GarbageArgs));
            };
            let n = encode_accepted(out, c.xid, AcceptStat::Success).map_err(short)?;
            let mut w = XdrWriter::new(&mut out[n..]);
            w.opaque(data).map_err(short)?;
            let ddp = (proc_ == echo::ECHO).then_some((n + 4, n32(data.len())));
            return Ok((n + w.position(), ddp));
        }
        (echo::PROGRAM, echo::VERSION, _) => AcceptStat::ProcUnavail,
        (echo::PROGRAM, _, _) => AcceptStat::ProgMismatch {
            low: echo::VERSION,
            high: echo::VERSION,
        },
        _ => AcceptStat::ProgUnavail,
    };
    none(encode_accepted(out, c.xid, stat))
}
