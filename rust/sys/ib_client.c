// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: notice of RDMA devices being added (rust/sys/ib_client.rs).
 */

#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

#include "rpcrdma_cm_sys.h"

/*
 * An IB client whose only job is to tell Rust that a device was added (so
 * listeners whose device went away can listen again). The news travels
 * through a work item, so Rust runs without the IB core's locks held.
 */

static void *rpcrdma_cm_client_ctx;

static void rpcrdma_cm_client_workfn(struct work_struct *work)
{
	rpcrdma_cm_device_added_rs(rpcrdma_cm_client_ctx);
}

static DECLARE_WORK(rpcrdma_cm_client_work, rpcrdma_cm_client_workfn);

static int rpcrdma_cm_client_add(struct ib_device *device)
{
	schedule_work(&rpcrdma_cm_client_work);
	return 0;
}

static void rpcrdma_cm_client_remove(struct ib_device *device, void *client_data)
{
}

static struct ib_client rpcrdma_cm_client = {
	.name = "rpcrdma_cm",
	.add = rpcrdma_cm_client_add,
	.remove = rpcrdma_cm_client_remove,
};

/* @ctx is passed to rpcrdma_cm_device_added_rs() until unregistered. */
int rpcrdma_cm_client_register(void *ctx)
{
	rpcrdma_cm_client_ctx = ctx;
	return ib_register_client(&rpcrdma_cm_client);
}

/* After this returns, rpcrdma_cm_device_added_rs() is not running nor called. */
void rpcrdma_cm_client_unregister(void)
{
	ib_unregister_client(&rpcrdma_cm_client);
	cancel_work_sync(&rpcrdma_cm_client_work);
	rpcrdma_cm_client_ctx = NULL;
}
