// SPDX-License-Identifier: GPL-2.0
/* C shims of the sunrpc svc side (see svc_helpers.h). */
#include "rpcrdma_rs_helper.h"
