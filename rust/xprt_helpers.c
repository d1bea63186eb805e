// SPDX-License-Identifier: GPL-2.0
/* C shims of the sunrpc xprt side (see xprt_helpers.h). */
#include "rpcrdma_rs_helper.h"
