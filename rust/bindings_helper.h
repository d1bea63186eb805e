/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the bindings of rust/ are generated from: the kernel headers and the
 * declarations of the C helpers (helpers/, module/).  bindgen reads this
 * file on every build (the Kbuild rule), so the Rust view of every
 * structure matches the configured kernel (struct rpc_xprt changes with
 * CONFIG_SUNRPC_BACKCHANNEL and CONFIG_SUNRPC_DEBUG).  Nothing generated is
 * ever checked in.
 */
#ifndef RPCRDMA_RS_BINDINGS_HELPER_H
#define RPCRDMA_RS_BINDINGS_HELPER_H

#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/sysctl.h>
#include <linux/socket.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/bc_xprt.h>
#include <linux/sunrpc/svc.h>
#include <linux/sunrpc/svc_rdma.h>
#include <linux/sunrpc/svc_xprt.h>
#include <linux/sunrpc/xdr.h>
#include <linux/sunrpc/xprt.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include "helpers/helpers.h"

#endif /* RPCRDMA_RS_BINDINGS_HELPER_H */
