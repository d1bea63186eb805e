// SPDX-License-Identifier: GPL-2.0
/* The KUnit module links its own copy of the C shims under its own name. */
#define RPCRDMA_RS_CLIENT_NAME "rpcrdma_rs_kunit"
#include "../rust/helpers.c"
#include "../rust/xprt_helpers.c"
#include "../rust/svc_helpers.c"
