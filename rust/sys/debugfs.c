// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: debugfs files whose text Rust writes (rust/sys/debugfs.rs),
 * which creates them (debugfs_create_file) with one of the two
 * file_operations tables here: single_open() plumbing, and for writable
 * files the copy of written text from user space.
 *
 * .owner = THIS_MODULE is why these tables stay in C rather than moving to
 * the kernel crate's kernel::debugfs (Linux 7.3), whose tables have no owner:
 * an open file must pin the module, or its ->release would be read from the
 * freed module after rmmod (see rust/sys/debugfs.rs).
 */

#include <linux/fs.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "rpcrdma_cm_sys.h"

static int rpcrdma_cm_seq_show(struct seq_file *m, void *v)
{
	return rpcrdma_cm_debugfs_show(m, m->private);
}

static int rpcrdma_cm_seq_open(struct inode *inode, struct file *file)
{
	return single_open(file, rpcrdma_cm_seq_show, inode->i_private);
}

/* A read-only file (rust/sys/debugfs.rs creates it with these ops). */
const struct file_operations rpcrdma_cm_seq_fops = {
	.owner = THIS_MODULE,
	.open = rpcrdma_cm_seq_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

/*
 * A writable debugfs file: each write() hands the written text (at most
 * RPCRDMA_CM_WRITE_MAX octets, NUL-terminated, in kernel memory) to
 * rpcrdma_cm_debugfs_write(), whose result is the write()'s error.
 */
#define RPCRDMA_CM_WRITE_MAX 256

static ssize_t rpcrdma_cm_seq_write(struct file *file, const char __user *ubuf,
				    size_t len, loff_t *ppos)
{
	struct seq_file *m = file->private_data;
	char *buf;
	int ret;

	if (len > RPCRDMA_CM_WRITE_MAX)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = rpcrdma_cm_debugfs_write(m->private, buf, len);
	kfree(buf);
	return ret ? ret : len;
}

const struct file_operations rpcrdma_cm_rw_fops = {
	.owner = THIS_MODULE,
	.open = rpcrdma_cm_seq_open,
	.read = seq_read,
	.write = rpcrdma_cm_seq_write,
	.llseek = seq_lseek,
	.release = single_release,
};
