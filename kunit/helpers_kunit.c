// SPDX-License-Identifier: GPL-2.0
/* The KUnit module links its own copy of the C shims. */
#include "../rust/helpers.c"
#include "../rust/xprt_helpers.c"
#include "../rust/svc_helpers.c"
#include "../rust/params.c"
