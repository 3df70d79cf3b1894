/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rpcrdma_cm tracepoints (trace system "rpcrdma_cm"), for trace-cmd and perf
 * the way xprtrdma's and svcrdma's are used:
 *
 *   echo 1 > /sys/kernel/tracing/events/rpcrdma_cm/enable
 *
 * Defined by trace.c (CREATE_TRACE_POINTS); Rust fires them through the
 * functions declared in rpcrdma_cm_sys.h.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rpcrdma_cm

#if !defined(RPCRDMA_CM_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define RPCRDMA_CM_TRACE_H

#include <linux/tracepoint.h>

/*
 * A connection negotiated its thresholds and remote invalidation (RFC 8797):
 * what xprtrdma_inline_thresh shows for Linux's client, for both roles.
 */
TRACE_EVENT(rpcrdma_cm_negotiated,
	TP_PROTO(u32 id, bool server, const char *peer, const char *outcome,
		 u32 peer_send, u32 peer_recv, bool peer_r, u32 c2s, u32 s2c, bool reminv),
	TP_ARGS(id, server, peer, outcome, peer_send, peer_recv, peer_r, c2s, s2c, reminv),
	TP_STRUCT__entry(
		__field(u32, id)
		__field(bool, server)
		__string(peer, peer)
		__string(outcome, outcome)
		__field(u32, peer_send)
		__field(u32, peer_recv)
		__field(bool, peer_r)
		__field(u32, c2s)
		__field(u32, s2c)
		__field(bool, reminv)
	),
	TP_fast_assign(
		__entry->id = id;
		__entry->server = server;
		__assign_str(peer);
		__assign_str(outcome);
		__entry->peer_send = peer_send;
		__entry->peer_recv = peer_recv;
		__entry->peer_r = peer_r;
		__entry->c2s = c2s;
		__entry->s2c = s2c;
		__entry->reminv = reminv;
	),
	TP_printk("conn=%u %s peer=%s pvt=%s peer_send/recv=%u/%u peer_r=%d c2s=%u s2c=%u reminv=%d",
		  __entry->id, __entry->server ? "server" : "client", __get_str(peer),
		  __get_str(outcome), __entry->peer_send, __entry->peer_recv,
		  __entry->peer_r, __entry->c2s, __entry->s2c, __entry->reminv)
);

/* A connection request refused before anything was allocated for it. */
TRACE_EVENT(rpcrdma_cm_reject,
	TP_PROTO(const char *peer, const char *why),
	TP_ARGS(peer, why),
	TP_STRUCT__entry(
		__string(peer, peer)
		__string(why, why)
	),
	TP_fast_assign(
		__assign_str(peer);
		__assign_str(why);
	),
	TP_printk("peer=%s why=%s", __get_str(peer), __get_str(why))
);

/* RDMA_ERROR sent for a call: ERR_VERS (1) or ERR_CHUNK (2). */
TRACE_EVENT(rpcrdma_cm_rdma_error,
	TP_PROTO(u32 id, u32 xid, u32 code),
	TP_ARGS(id, xid, code),
	TP_STRUCT__entry(
		__field(u32, id)
		__field(u32, xid)
		__field(u32, code)
	),
	TP_fast_assign(
		__entry->id = id;
		__entry->xid = xid;
		__entry->code = code;
	),
	TP_printk("conn=%u xid=0x%08x err=%s", __entry->id, __entry->xid,
		  __entry->code == 1 ? "ERR_VERS" : "ERR_CHUNK")
);

/* A connection ended: how, with the event's status. */
TRACE_EVENT(rpcrdma_cm_closed,
	TP_PROTO(u32 id, const char *why, int status),
	TP_ARGS(id, why, status),
	TP_STRUCT__entry(
		__field(u32, id)
		__string(why, why)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->id = id;
		__assign_str(why);
		__entry->status = status;
	),
	TP_printk("conn=%u state=%s status=%d", __entry->id, __get_str(why), __entry->status)
);

/* A work request failed (not a flush at close): the connection is lost. */
TRACE_EVENT(rpcrdma_cm_wc_error,
	TP_PROTO(u32 id, bool recv, int status),
	TP_ARGS(id, recv, status),
	TP_STRUCT__entry(
		__field(u32, id)
		__field(bool, recv)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->id = id;
		__entry->recv = recv;
		__entry->status = status;
	),
	TP_printk("conn=%u %s status=%d", __entry->id, __entry->recv ? "recv" : "send",
		  __entry->status)
);

/*
 * An error ends an established connection: @why names it (recv_error,
 * send_error, chunk_error, flushed: a work request flushed while the
 * connection was up, the QP having failed with no error completion of its
 * own; send_busy, no_memory), @status the completion status or errno. The
 * disconnect follows.
 */
TRACE_EVENT(rpcrdma_cm_fatal,
	TP_PROTO(u32 id, const char *why, int status),
	TP_ARGS(id, why, status),
	TP_STRUCT__entry(
		__field(u32, id)
		__string(why, why)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->id = id;
		__assign_str(why);
		__entry->status = status;
	),
	TP_printk("conn=%u why=%s status=%d", __entry->id, __get_str(why), __entry->status)
);

/*
 * A mount's transport: a connect or reconnect attempt ended (@status 0 once
 * established), or a chunk registration for call @xid failed.
 */
TRACE_EVENT(rpcrdma_cm_xprt,
	TP_PROTO(u32 id, const char *what, u32 xid, int status),
	TP_ARGS(id, what, xid, status),
	TP_STRUCT__entry(
		__field(u32, id)
		__string(what, what)
		__field(u32, xid)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->id = id;
		__assign_str(what);
		__entry->xid = xid;
		__entry->status = status;
	),
	TP_printk("conn=%u %s xid=0x%08x status=%d", __entry->id, __get_str(what),
		  __entry->xid, __entry->status)
);

#endif /* RPCRDMA_CM_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rpcrdma_cm_trace
#include <trace/define_trace.h>
