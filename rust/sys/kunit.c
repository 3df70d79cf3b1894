// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: failing the running KUnit test with a message, for the suite
 * in rust/sys/kunit.rs. kunit_fail_current_test() is a macro; without
 * CONFIG_KUNIT it expands to nothing, so this file builds on every kernel.
 */

#include <kunit/test-bug.h>

#include "rpcrdma_cm_sys.h"

void rpcrdma_cm_kunit_vector_failed(const char *name, int len)
{
	kunit_fail_current_test("vector %.*s failed", len, name);
}
