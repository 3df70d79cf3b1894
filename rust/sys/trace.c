// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: the tracepoints of rpcrdma_cm_trace.h, defined here and fired
 * from Rust (rust/sys/trace.rs) through these functions (a tracepoint is a
 * static key and a macro-made inline: Rust cannot call it directly).
 */

#define CREATE_TRACE_POINTS
#include "rpcrdma_cm_trace.h"

#include "rpcrdma_cm_sys.h"

void rpcrdma_cm_trace_negotiated(u32 id, bool server, const char *peer, const char *outcome,
				 u32 peer_send, u32 peer_recv, bool peer_r, u32 c2s, u32 s2c,
				 bool reminv)
{
	trace_rpcrdma_cm_negotiated(id, server, peer, outcome, peer_send, peer_recv, peer_r,
				    c2s, s2c, reminv);
}

void rpcrdma_cm_trace_reject(const char *peer, const char *why)
{
	trace_rpcrdma_cm_reject(peer, why);
}

void rpcrdma_cm_trace_rdma_error(u32 id, u32 xid, u32 code)
{
	trace_rpcrdma_cm_rdma_error(id, xid, code);
}

void rpcrdma_cm_trace_closed(u32 id, const char *why, int status)
{
	trace_rpcrdma_cm_closed(id, why, status);
}

void rpcrdma_cm_trace_wc_error(u32 id, bool recv, int status)
{
	trace_rpcrdma_cm_wc_error(id, recv, status);
}

void rpcrdma_cm_trace_xprt(u32 id, const char *what, u32 xid, int status)
{
	trace_rpcrdma_cm_xprt(id, what, xid, status);
}

void rpcrdma_cm_trace_fatal(u32 id, const char *why, int status)
{
	trace_rpcrdma_cm_fatal(id, why, status);
}
