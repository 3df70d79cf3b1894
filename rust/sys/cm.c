// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: RDMA connection manager ids (rust/sys/rdma_cm.rs), the module's
 * workqueue, the count of live ids that unloading waits for, and the
 * periodic tick.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "rpcrdma_cm_sys.h"

static int rpcrdma_cm_event_handler(struct rdma_cm_id *id,
				    struct rdma_cm_event *event)
{
	struct rpcrdma_cm_event_info ev = {
		.event = event->event,
		.status = event->status,
	};

	switch (event->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
	case RDMA_CM_EVENT_ESTABLISHED:
		ev.private_data = event->param.conn.private_data;
		ev.private_data_len = ev.private_data ?
			event->param.conn.private_data_len : 0;
		ev.initiator_depth = event->param.conn.initiator_depth;
		break;
	default:
		break;
	}
	return rpcrdma_cm_event_rs(id, id->context, &ev);
}

/* In @net, or the initial namespace when NULL. */
int rpcrdma_cm_create_id(void *context, struct net *net, struct rdma_cm_id **out)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(net ? net : &init_net, rpcrdma_cm_event_handler, context,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	*out = id;
	return 0;
}

void rpcrdma_cm_set_context(struct rdma_cm_id *id, void *context)
{
	id->context = context;
}

/* @addr: 4 octets (AF_INET) or 16 (AF_INET6), network order; @port host order. */
static int rpcrdma_cm_sockaddr(struct sockaddr_storage *ss, int family,
			       const u8 *addr, u16 port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, addr, 4);
		sin->sin_port = htons(port);
		return 0;
	}
	if (family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
		sin6->sin6_port = htons(port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

int rpcrdma_cm_bind_listen(struct rdma_cm_id *id, int family, const u8 *addr,
			   u16 port, int backlog)
{
	struct sockaddr_storage ss;
	int ret;

	ret = rpcrdma_cm_sockaddr(&ss, family, addr, port);
	if (ret)
		return ret;
	if (family == AF_INET6) {
		ret = rdma_set_afonly(id, 1);
		if (ret)
			return ret;
	}
	ret = rdma_bind_addr(id, (struct sockaddr *)&ss);
	if (ret)
		return ret;
	return rdma_listen(id, backlog);
}

int rpcrdma_cm_resolve_addr(struct rdma_cm_id *id, int family, const u8 *addr,
			    u16 port, unsigned long timeout_ms)
{
	struct sockaddr_storage ss;
	int ret;

	ret = rpcrdma_cm_sockaddr(&ss, family, addr, port);
	if (ret)
		return ret;
	return rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, timeout_ms);
}

/* "addr:port" of both ends and the device name, for display. */
void rpcrdma_cm_id_names(struct rdma_cm_id *id, char *local, char *peer,
			 char *dev, size_t len)
{
	snprintf(local, len, "%pISpc", &id->route.addr.src_addr);
	snprintf(peer, len, "%pISpc", &id->route.addr.dst_addr);
	snprintf(dev, len, "%s", id->device ? dev_name(&id->device->dev) : "-");
}

/*
 * The peer's address: an IPv4 address as an IPv4-mapped IPv6 address in
 * @addr16, network order, and its port. -EAFNOSUPPORT for another family.
 */
int rpcrdma_cm_id_peer(struct rdma_cm_id *id, u8 *addr16, u16 *port)
{
	const struct sockaddr *sa = (const struct sockaddr *)&id->route.addr.dst_addr;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		memset(addr16, 0, 10);
		addr16[10] = 0xff;
		addr16[11] = 0xff;
		memcpy(addr16 + 12, &sin->sin_addr, 4);
		*port = ntohs(sin->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		memcpy(addr16, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

/*
 * What the id's device offers. Send With Invalidate, FRWR and LOCAL_INV are
 * all memory management extensions (RFC 8797 Section 3.2: a responder uses
 * remote invalidation only when its own RDMA stack supports it).
 */
int rpcrdma_cm_id_caps(struct rdma_cm_id *id, struct rpcrdma_cm_dev_caps *caps)
{
	struct ib_device *dev = id->device;

	memset(caps, 0, sizeof(*caps));
	if (!dev)
		return -ENODEV;
	caps->mem_mgt_ext = !!(dev->attrs.device_cap_flags &
			       IB_DEVICE_MEM_MGT_EXTENSIONS) &&
			    !rpcrdma_cm_param_test_no_mem_mgt_ext();
	caps->max_fast_reg_page_list_len = dev->attrs.max_fast_reg_page_list_len;
	return 0;
}

/* Called from the ROUTE_RESOLVED handler (the handler lock is held). */
int rpcrdma_cm_connect_locked(struct rdma_cm_id *id, const void *pdata, u8 len)
{
	struct rdma_conn_param param = {};

	if (!id->device)
		return -ENODEV;
	param.private_data = len ? pdata : NULL;
	param.private_data_len = len;
	/* As xprtrdma: the server reads from us, we never read from it. */
	param.responder_resources = min_t(int, id->device->attrs.max_qp_rd_atom, 255);
	param.initiator_depth = 0;
	param.retry_count = 6;
	param.rnr_retry_count = 0;
	param.flow_control = 0;
	return rdma_connect_locked(id, &param);
}

/* Called from the CONNECT_REQUEST handler (the handler lock is held). */
int rpcrdma_cm_accept(struct rdma_cm_id *id, const void *pdata, u8 len, u8 ord)
{
	struct rdma_conn_param param = {};

	if (!id->device)
		return -ENODEV;
	param.private_data = len ? pdata : NULL;
	param.private_data_len = len;
	param.responder_resources = 0;
	param.initiator_depth = min_t(int, ord, id->device->attrs.max_qp_init_rd_atom);
	return rdma_accept(id, &param);
}

int rpcrdma_cm_reject(struct rdma_cm_id *id)
{
	return rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
}

/* The module's workqueue -------------------------------------------------- */

static struct workqueue_struct *rpcrdma_cm_workqueue;
static struct workqueue_struct *rpcrdma_cm_recv_workqueue;

/*
 * Two queues: teardown (and the tick) on one, Receive handling on the other.
 * A teardown waits for its QP's Receive work (flush_work); on one queue a
 * full set of teardowns could wait for Receive work that no worker is left
 * to run. WQ_MEM_RECLAIM: both free memory or answer the peer, and must make
 * progress when memory is short (NFS writeback will depend on them).
 */
int rpcrdma_cm_wq_create(void)
{
	rpcrdma_cm_workqueue = alloc_workqueue("rpcrdma_cm", WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	rpcrdma_cm_recv_workqueue = alloc_workqueue("rpcrdma_cm_recv",
						    WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	if (!rpcrdma_cm_workqueue || !rpcrdma_cm_recv_workqueue) {
		rpcrdma_cm_wq_destroy();
		return -ENOMEM;
	}
	return 0;
}

/*
 * Waits for every work item queued, then frees the queues: teardown first
 * (every QP torn down has flushed its Receive work), then Receives.
 */
void rpcrdma_cm_wq_destroy(void)
{
	if (rpcrdma_cm_workqueue)
		destroy_workqueue(rpcrdma_cm_workqueue);
	rpcrdma_cm_workqueue = NULL;
	if (rpcrdma_cm_recv_workqueue)
		destroy_workqueue(rpcrdma_cm_recv_workqueue);
	rpcrdma_cm_recv_workqueue = NULL;
}

struct workqueue_struct *rpcrdma_cm_recv_wq(void)
{
	return rpcrdma_cm_recv_workqueue;
}

struct workqueue_struct *rpcrdma_cm_wq(void)
{
	return rpcrdma_cm_workqueue;
}

/* Live ids -------------------------------------------------------------- */

static atomic_t rpcrdma_cm_live = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(rpcrdma_cm_live_wq);

void rpcrdma_cm_live_get(void)
{
	atomic_inc(&rpcrdma_cm_live);
}

void rpcrdma_cm_live_put(void)
{
	if (atomic_dec_and_test(&rpcrdma_cm_live))
		wake_up_all(&rpcrdma_cm_live_wq);
}

unsigned int rpcrdma_cm_live_count(void)
{
	return atomic_read(&rpcrdma_cm_live);
}

/* Waits until no id lives, saying so every 10 s. */
void rpcrdma_cm_live_wait(void)
{
	while (!wait_event_timeout(rpcrdma_cm_live_wq,
				   atomic_read(&rpcrdma_cm_live) == 0, 10 * HZ))
		pr_warn("unloading waits for %d connection(s) to be torn down\n",
			atomic_read(&rpcrdma_cm_live));
}

/* The periodic tick ----------------------------------------------------- */

static void *rpcrdma_cm_tick_ctx;
static unsigned long rpcrdma_cm_tick_period;

static void rpcrdma_cm_tick_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(rpcrdma_cm_tick_work, rpcrdma_cm_tick_fn);

static void rpcrdma_cm_tick_fn(struct work_struct *work)
{
	rpcrdma_cm_tick_rs(rpcrdma_cm_tick_ctx);
	queue_delayed_work(rpcrdma_cm_workqueue, &rpcrdma_cm_tick_work,
			   rpcrdma_cm_tick_period);
}

/* @ctx is passed to rpcrdma_cm_tick_rs() until rpcrdma_cm_tick_stop(). */
void rpcrdma_cm_tick_start(void *ctx, unsigned int period_ms)
{
	rpcrdma_cm_tick_ctx = ctx;
	rpcrdma_cm_tick_period = max(msecs_to_jiffies(period_ms), 1UL);
	queue_delayed_work(rpcrdma_cm_workqueue, &rpcrdma_cm_tick_work,
			   rpcrdma_cm_tick_period);
}

/* After this returns the tick neither runs nor is queued. */
void rpcrdma_cm_tick_stop(void)
{
	disable_delayed_work_sync(&rpcrdma_cm_tick_work);
	rpcrdma_cm_tick_ctx = NULL;
}

/* init_waitqueue_head() is a macro (with a lockdep class of its own). */
void rpcrdma_cm_init_waitqueue(struct wait_queue_head *head)
{
	init_waitqueue_head(head);
}

bool rpcrdma_cm_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

void rpcrdma_cm_msleep(unsigned int ms)
{
	msleep(ms);
}

u32 rpcrdma_cm_random_u32(void)
{
	return get_random_u32();
}
