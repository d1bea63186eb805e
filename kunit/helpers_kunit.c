// SPDX-License-Identifier: GPL-2.0
/* The KUnit module links its own copy of the C shims. */
#include "../ffi/helpers.c"
#include "../ffi/xprt_helpers.c"
#include "../ffi/svc_helpers.c"
