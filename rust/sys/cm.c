// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: RDMA connection manager ids (rust/sys/rdma_cm.rs), the count
 * of live ids that unloading waits for, and the periodic tick on the module's
 * workqueue (rust/sys/workqueue.rs).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
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

/* "addr:port" of both ends and the device name, for display. */
void rpcrdma_cm_id_names(struct rdma_cm_id *id, char *local, char *peer,
			 char *dev, size_t len)
{
	snprintf(local, len, "%pISpc", &id->route.addr.src_addr);
	snprintf(peer, len, "%pISpc", &id->route.addr.dst_addr);
	snprintf(dev, len, "%s", id->device ? dev_name(&id->device->dev) : "-");
}

/* The peer's address (a struct sockaddr_in or _in6), valid while @id lives. */
const struct sockaddr *rpcrdma_cm_id_peer_addr(struct rdma_cm_id *id)
{
	return (const struct sockaddr *)&id->route.addr.dst_addr;
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
	caps->mem_mgt_ext = !!(dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS);
	caps->max_fast_reg_page_list_len = dev->attrs.max_fast_reg_page_list_len;
	caps->max_qp_rd_atom = max(dev->attrs.max_qp_rd_atom, 0);
	caps->max_qp_init_rd_atom = max(dev->attrs.max_qp_init_rd_atom, 0);
	return 0;
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
static struct workqueue_struct *rpcrdma_cm_tick_wq;

static void rpcrdma_cm_tick_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(rpcrdma_cm_tick_work, rpcrdma_cm_tick_fn);

static void rpcrdma_cm_tick_fn(struct work_struct *work)
{
	rpcrdma_cm_tick_rs(rpcrdma_cm_tick_ctx);
	queue_delayed_work(rpcrdma_cm_tick_wq, &rpcrdma_cm_tick_work,
			   rpcrdma_cm_tick_period);
}

struct workqueue_struct *rpcrdma_cm_alloc_wq(const char *name)
{
	return alloc_workqueue("%s", WQ_MEM_RECLAIM | WQ_UNBOUND, 0, name);
}

/* @ctx is passed to rpcrdma_cm_tick_rs() until rpcrdma_cm_tick_stop(). */
void rpcrdma_cm_tick_start(void *ctx, unsigned int period_ms, struct workqueue_struct *wq)
{
	rpcrdma_cm_tick_ctx = ctx;
	rpcrdma_cm_tick_period = max(msecs_to_jiffies(period_ms), 1UL);
	rpcrdma_cm_tick_wq = wq;
	queue_delayed_work(rpcrdma_cm_tick_wq, &rpcrdma_cm_tick_work,
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
