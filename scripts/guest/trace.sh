# shellcheck shell=sh
# Trace events of rpcrdma_rs (Documentation/admin-guide/tracepoints.rst):
# the "trace" phase of the main scenario. Sourced after lib.sh, with the
# project's module providing both transports and nfsd exporting.
#
# trace_check MNT: counts the events under events/rpcrdma of tracefs (at
# least TRACE_MIN_EVENTS), enables them all, mounts NFSv4.2 with
# proto=rdma, moves data through a Read chunk (O_DIRECT WRITE), a Write
# chunk (O_DIRECT READ) and Reply chunks (READDIR of a large directory),
# then checks that the key client and server events arrived. Where
# fail_sunrpc exists (debug kernel) it also injects one client disconnect
# and checks that its event and the reconnect are traced. Events are
# disabled and the buffer cleared on the way out.
TRACE_MIN_EVENTS=${TRACE_MIN_EVENTS:-30}

# trace_count EVENT: lines of the trace buffer with that event.
trace_count() { grep -c " $1: " /tmp/.trace-buf; }

# trace_off: events off, buffer emptied (also on failure paths).
trace_off() {
    echo 0 > $TRACEFS/events/rpcrdma/enable 2>/dev/null
    : > $TRACEFS/trace 2>/dev/null
}

# trace_inject_disconnect MNT: one disconnect of the client's connection
# through fail_sunrpc, then I/O that needs the connection back. Prints
# nothing; returns 1 where fail_sunrpc is missing.
trace_inject_disconnect() {
    _fs=/sys/kernel/debug/fail_sunrpc
    [ -d $_fs ] || return 1
    # Saved and put back as found (probability last on, first off).
    _saved=
    for _k in probability ignore-server-disconnect ignore-client-disconnect verbose interval times; do
        _saved="$_saved $_k=$(cat $_fs/$_k)"
    done
    echo 0 > $_fs/probability
    echo Y > $_fs/ignore-server-disconnect
    echo N > $_fs/ignore-client-disconnect
    echo 0 > $_fs/verbose
    echo 1 > $_fs/interval
    echo 1 > $_fs/times
    echo 100 > $_fs/probability
    dd if="$1/trace.dat" of=/dev/null bs=256k count=1 iflag=direct 2>/dev/null
    echo 0 > $_fs/probability
    for _kv in $_saved; do
        [ "${_kv%%=*}" = probability ] || echo "${_kv#*=}" > "$_fs/${_kv%%=*}"
    done
    echo "${_saved#* probability=}" | cut -d' ' -f1 > $_fs/probability
    # After the reconnect: the transport comes back for this one.
    dd if="$1/trace.dat" of=/dev/null bs=256k count=1 iflag=direct 2>/dev/null
    return 0
}

trace_check() {
    _m=$1 _tn=trace
    if ! rpcrdma_events; then
        fail $_tn-events "no $TRACEFS/events/rpcrdma (kernel without CONFIG_TRACEPOINTS, or tracefs missing)"
        return 1
    fi
    _n=$(find $TRACEFS/events/rpcrdma -mindepth 1 -maxdepth 1 -type d | wc -l)
    info "trace events under events/rpcrdma: $_n"
    if [ "$_n" -ge "$TRACE_MIN_EVENTS" ]; then
        pass $_tn-events
    else
        fail $_tn-events "$_n events, want at least $TRACE_MIN_EVENTS"
    fi

    trace_off
    # Room for a whole mount's worth of events per CPU.
    echo 4096 > $TRACEFS/buffer_size_kb
    # No comm recording: it hooks sched_switch, so enabling and disabling
    # the events would rewrite __schedule's jump label while every vCPU
    # runs it. Under QEMU TCG a vCPU once trapped on that site's int3 when
    # the patch was complete ("Oops: int3" in __schedule, its code bytes
    # the restored NOP; debug kernel, 2026-12-03). The phase reads no
    # comm; the module's own sites are rewritten while no I/O runs.
    echo 0 > $TRACEFS/options/record-cmd 2>/dev/null
    echo 1 > $TRACEFS/events/rpcrdma/enable || { fail $_tn-enable "cannot enable events/rpcrdma"; return 1; }
    if ! nfs_mount 4.2 "$SERVER_IP" "$_m"; then
        fail $_tn-mount "$NFS_ERR"
        trace_off
        return 1
    fi
    _ok=1
    # 1 MiB O_DIRECT: a WRITE whose data goes in a Read chunk, a READ
    # whose data comes back through a Write chunk.
    head -c 1048576 /dev/urandom > /tmp/.trace-src
    dd if=/tmp/.trace-src of="$_m/trace.dat" bs=1M oflag=direct 2>/dev/null || { fail $_tn-io "O_DIRECT write"; _ok=0; }
    dd if="$_m/trace.dat" bs=1M iflag=direct 2>/dev/null | cmp -s - /tmp/.trace-src || { fail $_tn-io "O_DIRECT read back"; _ok=0; }
    # 400 entries with long names: READDIR replies beyond the 4 KiB
    # inline size, which come back through a Reply chunk.
    mkdir -p "$_m/trace.d"
    _i=0
    while [ $_i -lt 400 ]; do
        : > "$_m/trace.d/entry-with-a-rather-long-name-to-fill-readdir-replies-$_i"
        _i=$((_i + 1))
    done
    if nfs_remount "$_m"; then
        _c=$(ls -l "$_m/trace.d" | grep -c entry-with)
        [ "$_c" = 400 ] || { fail $_tn-io "readdir listed $_c of 400 entries"; _ok=0; }
    else
        fail $_tn-io "remount: $NFS_ERR"; _ok=0
    fi
    _dsc=skipped
    if trace_inject_disconnect "$_m"; then _dsc=injected; fi
    [ $_ok = 1 ] && pass $_tn-io
    rm -rf "$_m/trace.d" "$_m/trace.dat" /tmp/.trace-src
    nfs_umount "$_m"
    echo 0 > $TRACEFS/events/rpcrdma/enable
    cat $TRACEFS/trace > /tmp/.trace-buf

    # The events the phase must have caused, client side then server side.
    _want="xprtrdma_op_connect xprtrdma_connect xprtrdma_inline_thresh xprtrdma_marshal
        xprtrdma_chunk_read xprtrdma_chunk_write xprtrdma_chunk_reply xprtrdma_post_send
        xprtrdma_mr_map xprtrdma_mr_fastreg xprtrdma_mr_unmap xprtrdma_reply xprtrdma_disconnect
        svcrdma_accept svcrdma_decode_rqst svcrdma_post_read_chunk svcrdma_post_write_chunk
        svcrdma_post_reply_chunk svcrdma_post_send"
    _missing=
    _counts=
    for _e in $_want; do
        _c=$(trace_count $_e)
        _counts="$_counts $_e=$_c"
        [ "$_c" -gt 0 ] || _missing="$_missing $_e"
    done
    # Registrations end in a LOCAL_INV or a remote invalidation.
    _inv=$(( $(trace_count xprtrdma_mr_localinv) + $(trace_count xprtrdma_mr_reminv) ))
    _counts="$_counts localinv+reminv=$_inv"
    [ $_inv -gt 0 ] || _missing="$_missing xprtrdma_mr_localinv|xprtrdma_mr_reminv"
    info "trace event counts:$_counts"
    # One line of each event that arrived, for the log.
    sed -n 's/^.*: \([xs][a-z]*rdma_[a-z_]*\): .*$/\1/p' /tmp/.trace-buf | sort -u |
        while read -r _e; do
            grep -m1 " $_e: " /tmp/.trace-buf | sed 's/^ */vm:   [trace] /'
        done
    if [ -z "$_missing" ]; then
        pass $_tn-arrive
    else
        fail $_tn-arrive "missing:$_missing"
    fi

    # An error path: the injected disconnect and the reconnect after it.
    if [ $_dsc = injected ]; then
        _d=$(trace_count xprtrdma_op_inject_dsc)
        # Successful connects traced after the injected disconnect.
        _r=$(awk '/ xprtrdma_op_inject_dsc: / { s = 1 } s && / xprtrdma_connect: .* rc=0/ { n++ } END { print n + 0 }' /tmp/.trace-buf)
        info "trace disconnect: op_inject_dsc=$_d connects after it=$_r"
        if [ "$_d" -gt 0 ] && [ "$_r" -gt 0 ]; then
            pass $_tn-inject-disconnect
        else
            fail $_tn-inject-disconnect "op_inject_dsc=$_d, connects after it=$_r"
        fi
    else
        info "trace disconnect: no fail_sunrpc, not injected"
    fi
    trace_off
    rm -f /tmp/.trace-buf
}
