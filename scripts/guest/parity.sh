# shellcheck shell=sh
# Protocol parity with the C module (issue 12), shared by the interop
# scenarios (rust-client-c-server, c-client-rust-server). Sourced after
# lib.sh. Each phase has a server half (parity_server_prepare, before nfsd
# starts; parity_server_export, after) and a client half:
#   acl       POSIX ACLs over 4 KiB on tmpfs and on ext4 (the harness's
#             disk): NFSv3 GETACL (a Reply chunk into the pages NFSv3 leaves
#             sparse), SETACL (a Call over the inline size), NFSv4.2 ACL
#             attribute (nfs4_getfacl)
#   krb5      a KDC in the server guest; sec=krb5, krb5i, krb5p mounts
#             with data verified in each, NFSv4.2 and NFSv3 (KRB5_SERVER=c:
#             the server is the C module, whose NFSv4.2 krb5i O_DIRECT reads
#             fail for its own client too)
#   krb5-once the same with each flavor mounted once: krb5 over NFSv3,
#             krb5i and krb5p over NFSv4.2 (the debug kernel's CI runs: a
#             krb5 mount there takes about 45 s)
#   nconnect  nconnect=4: four transports, all carrying traffic
#   limits    256 slots and 64 KiB inline sizes on both ends (the project's
#             side takes them as module parameters, the C side through
#             its sysctls); a short READ (O_DIRECT across the end of file)

# A directory with an access and a default ACL of 300 named users each:
# 2 x 300 x 12 bytes of NFSv3 ACL, so GETACL replies and SETACL calls of
# about 7.2 KiB (over the 4 KiB inline size: Reply chunk and long Call).
# Not one ACL of 400: on 7.3 NFSv3 fails GETACL and SETACL of a single ACL
# of more than about 330 entries with EIO over TCP too, C module or not.
ACL_ENTRIES=${ACL_ENTRIES:-300}
ACL_UID0=20000
KRB_REALM=RPCRDMA.TEST
KRB_SRV=srv.rpcrdma.test
KRB_CLI=cli.rpcrdma.test
LIMIT_SLOTS=256
LIMIT_INLINE=65536

has_phase() { case " $PARITY " in *" $1 "*) return 0 ;; esac; return 1; }
# has_krb5: either Kerberos phase (the KDC, the export's flavors, gssd).
has_krb5() { has_phase krb5 || has_phase krb5-once; }

# acl_spec N: "u:20000:r,u:20001:rw,..." (N named users)
acl_spec() {
    seq $ACL_UID0 $((ACL_UID0 + $1 - 1)) |
        awk '{ printf "%su:%d:%s", (NR > 1 ? "," : ""), $1, (NR % 2 ? "r" : "rw") }'
}

# acl_count FILE: named-user entries of FILE's POSIX ACLs (access and
# default)
acl_count() { getfacl -n -p "$1" 2>/dev/null | grep -c '^\(default:\)\?user:[0-9]'; }

# acl_set DIR: its access and default ACLs, ACL_ENTRIES named users each
acl_set() { setfacl -m "$(acl_spec $ACL_ENTRIES)" "$1" && setfacl -d -m "$(acl_spec $ACL_ENTRIES)" "$1"; }

# nfs4_acl_count FILE: ACEs naming one of our users in FILE's NFSv4 ACL
# (nfsd maps each POSIX entry to one or more ACEs; numeric ids with
# AUTH_SYS)
nfs4_acl_count() {
    nfs4_getfacl "$1" 2>/dev/null | grep -Ec ":$(echo $ACL_UID0 | cut -c1)[0-9]{4}(@[^:]*)?:"
}

# ---- server -------------------------------------------------------------------

krb5_conf() {  # both guests: realm, KDC, names
    cat > /etc/krb5.conf <<EOF
[libdefaults]
    default_realm = $KRB_REALM
    dns_lookup_realm = false
    dns_lookup_kdc = false
    rdns = false
    udp_preference_limit = 1
[realms]
    $KRB_REALM = {
        kdc = $SERVER_IP
        admin_server = $SERVER_IP
    }
[domain_realm]
    .rpcrdma.test = $KRB_REALM
    rpcrdma.test = $KRB_REALM
EOF
    printf '%s %s\n%s %s\n' "$SERVER_IP" "$KRB_SRV" "$CLIENT_IP" "$KRB_CLI" >> /etc/hosts
}

# krb5_server_start: a KDC for the realm, the server's keytab, the client's
# keytab in the export (the client copies it over a sec=sys mount), and
# rpc.svcgssd for nfsd's GSS context upcalls.
krb5_server_start() {
    krb5_conf
    hostname $KRB_SRV
    mkdir -p /etc/krb5kdc /var/lib/krb5kdc /var/log
    cat > /etc/krb5kdc/kdc.conf <<EOF
[kdcdefaults]
    kdc_ports = 88
    kdc_tcp_ports = 88
[realms]
    $KRB_REALM = {
        database_name = /var/lib/krb5kdc/principal
        key_stash_file = /etc/krb5kdc/stash
        acl_file = /etc/krb5kdc/kadm5.acl
        max_life = 10h 0m 0s
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }
EOF
    : > /etc/krb5kdc/kadm5.acl
    rm -f /var/lib/krb5kdc/principal* /etc/krb5kdc/stash /etc/krb5.keytab
    kdb5_util create -s -r $KRB_REALM -P rpcrdma-test-master >/tmp/krb5-setup.log 2>&1 || { cat /tmp/krb5-setup.log; return 1; }
    for _p in "nfs/$KRB_SRV" "nfs/$KRB_CLI"; do
        kadmin.local -q "addprinc -randkey $_p" >>/tmp/krb5-setup.log 2>&1 || return 1
    done
    kadmin.local -q "ktadd -k /etc/krb5.keytab nfs/$KRB_SRV" >>/tmp/krb5-setup.log 2>&1 || return 1
    mkdir -p "$EXPORT/.krb5"
    rm -f "$EXPORT/.krb5/client.keytab"
    kadmin.local -q "ktadd -k $EXPORT/.krb5/client.keytab nfs/$KRB_CLI" >>/tmp/krb5-setup.log 2>&1 || return 1
    chmod 644 "$EXPORT/.krb5/client.keytab"
    krb5kdc -P /run/krb5kdc.pid || return 1
    wait_for 10 test -s /run/krb5kdc.pid || return 1
    # nfsd's GSS context upcalls go to rpc.svcgssd (no gss-proxy has
    # claimed /proc/net/rpc/use-gss-proxy).
    rpc.svcgssd -f -vvv > /tmp/svcgssd.log 2>&1 &
    wait_for 10 pidof rpc.svcgssd
}

# parity_server_acl: the ext4 disk, and a directory with large ACLs on it
# and on the tmpfs export.
parity_server_acl() {
    [ -b /dev/vda ] || { fail parity-server-ext4 "no /dev/vda (scripts/vm attaches one)"; return 1; }
    # An extended attribute must fit in the inode or in one 4 KiB block:
    # 4 KiB inodes hold the access ACL (2.4 KiB), the block the default
    # one. Few inodes, so the inode table stays small.
    if mkfs.ext4 -q -F -b 4096 -I 4096 -N 4096 -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda &&
        mkdir -p "$EXPORT/disk" && mount -t ext4 -o acl /dev/vda "$EXPORT/disk" && chmod 1777 "$EXPORT/disk"; then
        pass parity-server-ext4
    else
        fail parity-server-ext4 "mkfs or mount of /dev/vda"; return 1
    fi
    for _f in "$EXPORT/acl.d" "$EXPORT/disk/acl.d"; do
        mkdir -p "$_f" && chmod 1777 "$_f" && acl_set "$_f"
        _c=$(acl_count "$_f")
        [ "$_c" = $((2 * ACL_ENTRIES)) ] || { fail parity-server-acl "local ACLs on $_f: $_c entries"; return 1; }
    done
    pass parity-server-acl
}

# parity_server_prepare: before nfsd starts.
parity_server_prepare() {
    mkdir -p "$EXPORT"
    if has_phase acl; then
        parity_server_acl
    fi
    if has_krb5; then
        if krb5_server_start; then
            pass krb5-kdc-start
            EXPORT_SEC=sys:krb5:krb5i:krb5p
            export EXPORT_SEC
        else
            sed 's/^/vm:   krb5: /' /tmp/krb5-setup.log 2>/dev/null | tail -n 20
            fail krb5-kdc-start "KDC, keytabs or rpc.svcgssd"
        fi
    fi
    if has_phase limits && [ -d /proc/sys/sunrpc/svc_rdma ] && mod_loaded rpcrdma; then
        # The C server's limits are sysctls, read when a connection is accepted.
        echo $LIMIT_SLOTS > /proc/sys/sunrpc/svc_rdma/max_requests &&
            echo $LIMIT_INLINE > /proc/sys/sunrpc/svc_rdma/max_req_size &&
            pass limits-c-server-sysctls || fail limits-c-server-sysctls "max_requests, max_req_size"
    fi
    return 0
}

# parity_server_export: after start_nfs_server; the ext4 disk is its own
# export (crossmnt on the root makes it visible under it).
parity_server_export() {
    has_phase acl || return 0
    export_dir "rw,no_root_squash,insecure,no_subtree_check,fsid=1${EXPORT_SEC:+,sec=$EXPORT_SEC}" "$EXPORT/disk" ||
        fail parity-server-export "exportfs $EXPORT/disk"
}

# parity_server_report: what the server's helpers logged (krb5).
parity_server_report() {
    # The connections the project's server accepted (nconnect's four among
    # them) spread over the completion vectors.
    if has_phase nconnect && mod_loaded rpcrdma_rs && dmesg | grep -q 'svcrdma: accepted:'; then
        vectors_check server-completion-vectors 'svcrdma: accepted:' 4
    fi
    has_krb5 || return 0
    tail -n 20 /tmp/svcgssd.log 2>/dev/null | sed 's/^/vm:   svcgssd: /'
}

# ---- client -------------------------------------------------------------------

# acl_check VERS MNT: the server's large ACLs read on a fresh mount (tmpfs
# and ext4); NFSv3 also sets as large ones and reads them back after a
# remount.
acl_check() {
    _v=$1 _m=$2 _an="nfs$1-acl"
    nfs_mount "$_v" "$SERVER_IP" "$_m" || { fail "$_an" "mount: $NFS_ERR"; return 1; }
    _ok=1
    for _d in "$_m" "$_m/disk"; do
        case $_v in
            3) _c=$(acl_count "$_d/acl.d") ;;
            *) _c=$(nfs4_acl_count "$_d/acl.d") ;;
        esac
        info "nfs$_v ACL of $_d/acl.d: $_c entries"
        [ "$_c" -ge $((2 * ACL_ENTRIES)) ] || { fail "$_an-get" "$_d/acl.d: $_c of $((2 * ACL_ENTRIES)) entries"; _ok=0; }
    done
    [ $_ok = 1 ] && pass "$_an-get"
    if [ "$_v" = 3 ]; then
        _ok=1
        for _d in "$_m" "$_m/disk"; do
            rm -rf "$_d/acl-set.d"
            mkdir "$_d/acl-set.d" && acl_set "$_d/acl-set.d" || { fail "$_an-set" "setfacl on $_d"; _ok=0; }
        done
        if nfs_remount "$_m"; then
            for _d in "$_m" "$_m/disk"; do
                _c=$(acl_count "$_d/acl-set.d")
                [ "$_c" = $((2 * ACL_ENTRIES)) ] || { fail "$_an-set" "$_d/acl-set.d read back $_c entries"; _ok=0; }
                rmdir "$_d/acl-set.d"
            done
            [ $_ok = 1 ] && pass "$_an-set"
        else
            fail "$_an-set" "remount: $NFS_ERR"
        fi
    fi
    nfs_umount "$_m"
}

# krb5_check MNT: copy the client keytab over a sec=sys mount, start
# rpc.gssd, then for each flavor mount by name (gssd finds the server's
# principal from it), write and read back data after a remount.
krb5_check() {
    _m=$1
    [ -f /etc/krb5.conf.rpcrdma ] || {
        krb5_conf && touch /etc/krb5.conf.rpcrdma
        hostname $KRB_CLI
        nfs_mount 4.2 "$SERVER_IP" "$_m" || { fail krb5-client-setup "sec=sys mount: $NFS_ERR"; return 1; }
        cp "$_m/.krb5/client.keytab" /etc/krb5.keytab; _kc=$?
        nfs_umount "$_m"
        [ $_kc = 0 ] || { fail krb5-client-setup "no client keytab in the export"; return 1; }
        _pipefs=$(nfsconf --get general pipefs-directory 2>/dev/null || echo /var/lib/nfs/rpc_pipefs)
        mkdir -p "$_pipefs"
        mountpoint -q "$_pipefs" || mount -t rpc_pipefs sunrpc "$_pipefs"
        rpc.gssd -f -vvv -p "$_pipefs" > /tmp/gssd.log 2>&1 &
        wait_for 10 pidof rpc.gssd || { fail krb5-client-setup "rpc.gssd did not start"; return 1; }
        pass krb5-client-setup
    }
    head -c 2097152 /dev/urandom > /tmp/.krb-src
    _mounts="krb5:4.2 krb5:3 krb5i:4.2 krb5i:3 krb5p:4.2 krb5p:3"
    has_phase krb5 || _mounts="krb5:3 krb5i:4.2 krb5p:4.2"
    for _sv in $_mounts; do
        _sec=${_sv%:*} _v=${_sv#*:}
        _n="nfs$_v-$_sec"
        case $_v in 3) _path=$EXPORT; _o="vers=3,nolock" ;; *) _path=/; _o="vers=$_v" ;; esac
        _o="$_o,proto=rdma,port=$NFS_RDMA_PORT,sec=$_sec,retry=0"
        mkdir -p "$_m"
        if ! _out=$(timeout 120 mount -t nfs -o "$_o" "$KRB_SRV:$_path" "$_m" 2>&1); then
            fail "$_n" "mount: $(echo "$_out" | tail -n 1)"
            tail -n 15 /tmp/gssd.log | sed 's/^/vm:   gssd: /'
            continue
        fi
        _line=$(awk -v m="$_m" '$2 == m && $3 ~ /^nfs/' /proc/mounts | tail -n 1)
        case ",$(echo "$_line" | awk '{print $4}')," in
            *,sec=$_sec,*proto=rdma,*|*,proto=rdma,*sec=$_sec,*) ;;
            *) fail "$_n" "not sec=$_sec over rdma: $_line"; umount "$_m"; continue ;;
        esac
        _f=$_m/krb-$_sec-$_v.dat
        if cp /tmp/.krb-src "$_f" && umount "$_m" && echo 3 > /proc/sys/vm/drop_caches &&
            timeout 120 mount -t nfs -o "$_o" "$KRB_SRV:$_path" "$_m" && cmp -s /tmp/.krb-src "$_f"; then
            # The direct-I/O path, which a READ reply places directly
            # unless the flavor forbids it.
            dd if="$_f" of=/tmp/.krb-direct bs=1M iflag=direct 2>/tmp/.krb-dd.err; _dc=$?
            if cmp -s /tmp/.krb-src /tmp/.krb-direct; then
                pass "$_n"
            elif [ "${KRB5_SERVER:-}" = c ] && [ "$_sec-$_v" = krb5i-4.2 ]; then
                # Known outside this project: the in-tree C client
                # against the C server fails the same way (EIO at once;
                # seen on 2026-11-24, rust-client-c-server with
                # c-client). Reported as INFO, the buffered check above
                # still counts.
                info "known (C server): nfs4.2 krb5i O_DIRECT read: dd exit $_dc, $(wc -c < /tmp/.krb-direct) bytes"
                pass "$_n-buffered"
            else
                fail "$_n" "O_DIRECT read differs: dd exit $_dc, $(wc -c < /tmp/.krb-direct) bytes, $(cmp /tmp/.krb-src /tmp/.krb-direct 2>&1 | head -n 1)"
                sed 's/^/vm:   dd: /' /tmp/.krb-dd.err
                awk -v m="$_m" '$1 == "device" { on = ($5 == m) } on && ($1 == "xprt:" || $1 == "READ:")' /proc/self/mountstats | sed 's/^/vm:   /'
                dmesg | tail -n 8 | sed 's/^/vm:   dmesg: /'
            fi
            rm -f /tmp/.krb-direct
        else
            fail "$_n" "data written with sec=$_sec does not read back"
        fi
        rm -f "$_f"
        umount "$_m" 2>/dev/null
    done
    rm -f /tmp/.krb-src
}

# nconnect_check MNT: four transports under one NFSv4.2 mount, each with
# sends and receives, and the data intact.
nconnect_check() {
    _m=$1 _cn=nfs4.2-nconnect-4
    nfs_mount 4.2 "$SERVER_IP" "$_m" nconnect=4 || { fail $_cn "mount: $NFS_ERR"; return 1; }
    head -c 4194304 /dev/urandom > /tmp/.nc-src
    _ok=1
    for _i in 1 2 3 4; do cp /tmp/.nc-src "$_m/nc$_i.dat" & done; wait
    echo 3 > /proc/sys/vm/drop_caches
    for _i in 1 2 3 4; do cmp -s /tmp/.nc-src "$_m/nc$_i.dat" || _ok=0; done
    # Sends and receives, one line per transport.
    _x=$(xprt_fields_all "$_m" 6 7)
    echo "$_x" | sed 's/^/vm:   nconnect xprt sends recvs: /'
    _busy=$(echo "$_x" | awk '$1 > 0 && $2 > 0' | wc -l)
    info "nconnect: $(echo "$_x" | wc -l) transports, $_busy with traffic"
    rm -f "$_m"/nc?.dat /tmp/.nc-src
    nfs_umount "$_m"
    if [ $_ok = 0 ]; then fail $_cn "data differs"
    elif [ "$_busy" -lt 4 ]; then fail $_cn "$_busy of 4 transports carried traffic"
    else pass $_cn; fi
    # The project's client logs each connection's completion vector: with
    # more than one CPU the four connections must not share one.
    mod_loaded rpcrdma_rs && dmesg | grep -q 'rpcrdma_rs.*connected:' &&
        vectors_check nconnect-client-completion-vectors 'rpcrdma_rs.*connected:' 4
    # In one VM the project's server accepted the four as well.
    [ "$ROLE" = single ] && mod_loaded rpcrdma_rs && dmesg | grep -q 'svcrdma: accepted:' &&
        vectors_check nconnect-server-completion-vectors 'svcrdma: accepted:' 4
    return 0
}

# vectors_check NAME PATTERN N: the last N kernel log lines matching PATTERN
# (a connection's "... completion vector V" line) use more than one vector.
# Only with more than one CPU: the device has a vector per CPU.
vectors_check() {
    [ "$(nproc)" -gt 1 ] || { info "$1: one CPU, one completion vector: not checked"; return 0; }
    _vs=$(dmesg | grep "$2" | tail -n "$3" | sed -n 's/.*completion vector \([0-9]*\).*/\1/p' | sort -u | tr '\n' ' ')
    info "$1: the last $3 connections used vector(s) $_vs ($(nproc) CPUs)"
    if [ "$(echo $_vs | wc -w)" -ge 2 ]; then pass "$1"
    else fail "$1" "all on vector(s) $_vs with $(nproc) CPUs"; fi
}

# limits_client_setup: the C client's limits are sysctls (read when a
# transport is created); the project's are module parameters.
limits_c_client_setup() {
    for _s in rdma_slot_table_entries:$LIMIT_SLOTS rdma_max_inline_read:$LIMIT_INLINE rdma_max_inline_write:$LIMIT_INLINE; do
        echo "${_s#*:}" > "/proc/sys/sunrpc/${_s%%:*}" || { fail limits-c-client-sysctls "${_s%%:*}"; return 1; }
    done
    pass limits-c-client-sysctls
}

# limits_check MNT: on a fresh mount, 32 KiB O_DIRECT writes and reads
# travel inline (no Read or Write chunk counted in mountstats: with 4 KiB
# inline sizes each would need one); the transport has LIMIT_SLOTS slots
# and was granted as many credits (sunrpc's sysfs xprt_info).
limits_check() {
    _m=$1 _ln=limits-slots-$LIMIT_SLOTS
    nfs_mount 4.2 "$SERVER_IP" "$_m" || { fail $_ln "mount: $NFS_ERR"; return 1; }
    head -c 262144 /dev/urandom > /tmp/.lim-src
    _ok=1
    dd if=/tmp/.lim-src of="$_m/lim.dat" bs=32k oflag=direct 2>/dev/null || _ok=0
    _s=$(dd if="$_m/lim.dat" bs=32k iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    [ "$_s" = "$(sha256sum < /tmp/.lim-src | cut -d' ' -f1)" ] || _ok=0
    # read_chunk_count and write_chunk_count
    _rw=$(xprt_fields "$_m" 11 12)
    info "limits: 32 KiB O_DIRECT I/O counted Read and Write chunks: $_rw"
    if [ $_ok = 0 ]; then fail limits-inline-$LIMIT_INLINE "32 KiB O_DIRECT data differs"
    elif [ "$_rw" != "0 0" ]; then fail limits-inline-$LIMIT_INLINE "chunks used for 32 KiB I/O (read, write chunks: $_rw)"
    else pass limits-inline-$LIMIT_INLINE; fi
    rm -f "$_m/lim.dat" /tmp/.lim-src
    _i=$(mount_xprt_info)
    say "xprt_info: $_i"
    _max=$(echo "$_i" | grep -o 'max_num_slots=[0-9]*' | head -n 1 | cut -d= -f2)
    _cwnd=$(echo "$_i" | grep -o 'cong_win=[0-9]*' | head -n 1 | cut -d= -f2)
    info "limits: max_num_slots=$_max cong_win=$_cwnd (credits $(( ${_cwnd:-0} / 256 )))"
    if [ "${_max:-0}" != $LIMIT_SLOTS ]; then fail $_ln "max_num_slots=$_max"
    elif [ $(( ${_cwnd:-0} / 256 )) != $LIMIT_SLOTS ]; then fail $_ln "credits granted $(( ${_cwnd:-0} / 256 ))"
    else pass $_ln; fi
    short_read_check "$_m"
    nfs_umount "$_m"
}

# short_read_check MNT: an O_DIRECT READ of 1 MiB that meets the end of the
# file 1000 bytes in. The client offered a Write chunk for 1 MiB and the
# server fills 1000 bytes of it: a short READ reply, which the client trims
# (C rpcrdma_inline_fixup); the data must come back exact and a Write chunk
# must have been used.
short_read_check() {
    _m=$1 _sn=short-read-write-chunk
    head -c 1049576 /dev/urandom > /tmp/.short-src
    cp /tmp/.short-src "$_m/short.dat" && sync || { fail $_sn "cannot write the file"; return 1; }
    _w0=$(xprt_fields "$_m" 12)
    _got=$(dd if="$_m/short.dat" bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    _w1=$(xprt_fields "$_m" 12)
    info "short read: Write chunks ${_w0:-?} -> ${_w1:-?}"
    if [ "$_got" != "$(sha256sum < /tmp/.short-src | cut -d' ' -f1)" ]; then fail $_sn "data differs"
    elif [ "${_w1:-0}" -le "${_w0:-0}" ]; then fail $_sn "no Write chunk counted (${_w0:-?} -> ${_w1:-?})"
    else pass $_sn; fi
    rm -f "$_m/short.dat" /tmp/.short-src
}
