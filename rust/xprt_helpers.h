/* SPDX-License-Identifier: GPL-2.0 */
/* C shims of the sunrpc xprt side; included by rpcrdma_rs_helper.h. */
#ifndef RPCRDMA_RS_XPRT_HELPERS_H
#define RPCRDMA_RS_XPRT_HELPERS_H

#endif
