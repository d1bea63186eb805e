/* SPDX-License-Identifier: GPL-2.0 */
/* C shims of the sunrpc svc side; included by rpcrdma_rs_helper.h. */
#ifndef RPCRDMA_RS_SVC_HELPERS_H
#define RPCRDMA_RS_SVC_HELPERS_H

#endif
