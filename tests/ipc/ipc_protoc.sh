#!/usr/bin/env bash
# ipc_protoc.sh - checks with protoc that the frames vperfetto's IPC client
# sends and receives are Perfetto's IPCFrame, and the InvokeMethod args an
# InitializeConnectionRequest.
#
# Usage: ipc_protoc.sh IPC_CAPTURE_DEMO PROTOS_DIR
set -euo pipefail

demo=$1
protos=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cap=$tmp/cap
mkdir "$cap"

VPERFETTO_IPC_CAPTURE=$cap "$demo" run

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# protoc's text of one captured frame, on one line.
frame() {
	[ -f "$cap/$1" ] || fail "missing capture file $1 (have: $(ls "$cap"))"
	protoc --decode=perfetto.protos.IPCFrame -I "$protos" \
		perfetto/ipc/ipc.proto <"$cap/$1" | tr -s ' \n' '  '
}

expect() { # file, substring
	local text
	text=$(frame "$1")
	case "$text" in
	*"$2"*) echo "ok: $1: $2" ;;
	*) fail "$1: want '$2' in: $text" ;;
	esac
}

expect 000000-tx.bin 'request_id: 1 msg_bind_service { service_name: "ProducerPort" }'
expect 000001-rx.bin 'msg_bind_service_reply { success: true service_id: 1 methods { id: 1 name: "InitializeConnection" } }'
expect 000002-tx.bin 'msg_invoke_method { service_id: 1 method_id: 1 args_proto:'
expect 000003-rx.bin 'msg_invoke_method_reply { success: true'
[ "$(ls "$cap" | wc -l)" -eq 4 ] || fail "expected 4 frames, have: $(ls "$cap")"

"$demo" args "$cap/000002-tx.bin" >"$tmp/args.bin"
args=$(protoc --decode=perfetto.protos.InitializeConnectionRequest \
	-I "$protos" perfetto/ipc/producer_port.proto <"$tmp/args.bin")
case "$args" in
*'producer_name: "capture-test"'*) echo "ok: args: producer_name: \"capture-test\"" ;;
*) fail "args: $args" ;;
esac
case "$args" in
*'shared_memory_size_hint_bytes: 1048576'*) ;;
*) fail "args: $args" ;;
esac

"$demo" args "$cap/000003-rx.bin" >"$tmp/reply.bin"
reply=$(protoc --decode=perfetto.protos.InitializeConnectionResponse \
	-I "$protos" perfetto/ipc/producer_port.proto <"$tmp/reply.bin")
case "$reply" in
*'direct_smb_patching_supported: true'*) echo "ok: reply decodes" ;;
*) fail "reply: $reply" ;;
esac
