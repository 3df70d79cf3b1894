// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: the C half of the abstraction layer (rust/sys/).
 *
 * What Rust on 6.12 cannot express lives here: module parameters (a macro that
 * emits a section entry), a file_operations table for seq_file-backed debugfs
 * files, and ERR_PTR unwrapping. Only rust/sys/ calls these functions.
 */

#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>

/* Module parameters ------------------------------------------------------ */

static bool selftest;
module_param(selftest, bool, 0444);
MODULE_PARM_DESC(selftest,
		 "Run the protocol core's test vectors at load and refuse to load if one fails (default: N)");

bool rpcrdma_cm_param_selftest(void);
bool rpcrdma_cm_param_selftest(void)
{
	return READ_ONCE(selftest);
}

/* debugfs files backed by a Rust `Show` ----------------------------------- */

/* Implemented in rust/sys/debugfs.rs. @private is the file's inode->i_private. */
int rpcrdma_cm_debugfs_show(struct seq_file *m, void *private);

static int rpcrdma_cm_seq_show(struct seq_file *m, void *v)
{
	return rpcrdma_cm_debugfs_show(m, m->private);
}

static int rpcrdma_cm_seq_open(struct inode *inode, struct file *file)
{
	return single_open(file, rpcrdma_cm_seq_show, inode->i_private);
}

static const struct file_operations rpcrdma_cm_seq_fops = {
	.owner = THIS_MODULE,
	.open = rpcrdma_cm_seq_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

int rpcrdma_cm_debugfs_create_dir(const char *name, struct dentry *parent,
				  struct dentry **out);
int rpcrdma_cm_debugfs_create_dir(const char *name, struct dentry *parent,
				  struct dentry **out)
{
	struct dentry *d = debugfs_create_dir(name, parent);

	if (IS_ERR(d))
		return PTR_ERR(d);
	*out = d;
	return 0;
}

/*
 * A read-only file whose content is produced by rpcrdma_cm_debugfs_show() on each
 * open. debugfs_remove() of the file (or of a parent) waits for readers still in
 * ->show, so @private must stay valid until that returns.
 */
int rpcrdma_cm_debugfs_create_seq_file(const char *name, umode_t mode,
				       struct dentry *parent, void *private,
				       struct dentry **out);
int rpcrdma_cm_debugfs_create_seq_file(const char *name, umode_t mode,
				       struct dentry *parent, void *private,
				       struct dentry **out)
{
	struct dentry *d = debugfs_create_file(name, mode, parent, private,
					       &rpcrdma_cm_seq_fops);

	if (IS_ERR(d))
		return PTR_ERR(d);
	*out = d;
	return 0;
}
