# shellcheck shell=sh
# rust-rust: the project's client and server together.
# One VM (scripts/vm rust-rust): the main job's mount, client and server
# both rpcrdma_rs. Two VMs (scripts/vm --two-vm rust-rust): the
# c-client-rust-server workload with rpcrdma_rs on both sides, including a
# delegation our server recalls over the backchannel and our client returns.
# Arguments: [SIZE_MIB] [VERSIONS, e.g. 4.2+3] [LONG_ENTRIES]
if [ "$ROLE" = single ]; then
    set -- "${1:-64}"
    . "$REPO_ROOT/scripts/scenarios/main.sh"
else
    set -- "${1:-64}" "${2:-4.2+3}" - "${3:-2000}" rust rust
    . "$REPO_ROOT/scripts/scenarios/c-client-rust-server.sh"
fi
