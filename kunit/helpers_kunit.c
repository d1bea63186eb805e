// SPDX-License-Identifier: GPL-2.0
/* The KUnit module links its own copy of the C helpers. */
#include "../rust/helpers/rdma.c"
#include "../rust/helpers/mr.c"
#include "../rust/helpers/kext.c"
