#!/usr/bin/env bash
# vm_tracks_e2e.sh - vperfetto_merge --vm-tracks on generated traces.
#
# usage: vm_tracks_e2e.sh TRACEGEN VCPU_GEN MERGE TP PROTOC_DECODE_SH PROTO_DIR
#
# A generated host and guest trace (known clock relation) get the vcpu
# scenario of tests/tracegen/vcpu_scenario.h appended (the host's vCPU
# threads, a hog, a hole, kvm events, vcpu_map records; the guest's
# threads), in microseconds.  The merge with --vm-tracks must put one track
# per guest CPU on the guest's machine whose slices are exactly the
# scenario's host states; vperfetto_tp must place the VM on machine 1
# through the vm_machine record and give the guest threads' summary; the
# output must decode with protoc and no unknown fields, against our protos
# and, when PERFETTO_TRACE_PROTO names Perfetto's own perfetto_trace.proto,
# against Perfetto's schema too.  Without --vm-tracks nothing is added.
set -uo pipefail
TG=$1 VGEN=$2 MERGE=$3 E2E_TP=$4 PDECODE=$5 PROTO_DIR=$6
. "$(dirname "$0")/../lib/e2e_lib.sh"
e2e_init vm_tracks_e2e
W=$E2E_DIR

"$TG" --host "$W/h.pb" --guest "$W/g.pb" --seed 5 --duration-s 1 \
	--events 200 --params-out "$W/p.txt" >/dev/null || exit 1
hb0=$(sed -n 's/^hb0=//p' "$W/p.txt")
gb0=$(sed -n 's/^gb0=//p' "$W/p.txt")
base=$((hb0 + 100000000))
"$VGEN" "$base" $((gb0 + 100000000)) 1000 "$W/hx.pb" "$W/gx.pb" || exit 1
cat "$W/h.pb" "$W/hx.pb" >"$W/host.pb"
cat "$W/g.pb" "$W/gx.pb" >"$W/guest.pb"

check "merge --vm-tracks" "$MERGE" -q "$W/host.pb" "$W/guest.pb" \
	-o "$W/m.pb" --vm-tracks
check "merge without it" "$MERGE" -q "$W/host.pb" "$W/guest.pb" -o "$W/plain.pb"

expect "no vCPU tracks without --vm-tracks" "$W/plain.pb" \
	"select count(*) from track where name like 'vCPU % host state'" 0
expect "a track per guest CPU, on machine 1" "$W/m.pb" \
	"select group_concat(t.name || '@' || m.raw_id, ' ') from (select * from
	 track where name like 'vCPU % host state' order by name) t
	 join machine m on t.machine_id = m.id" \
	"vCPU 0 host state@1 vCPU 1 host state@1"

# The slices, relative to the scenario's start, in us.
want0="running:1000:1000 preempted:2000:1000 running:3000:1000"
want0="$want0 blocked:4000:1000 preempted:5000:500 running:5500:500"
want0="$want0 exit:6000:200 running:6200:700 exit:6900:100 blocked:7000:1000"
want1="unknown:1000:500 running:1500:1000 blocked:2500:1000"
want1="$want1 unknown:3500:1000 blocked:4500:3500"
slices() { # CPU
	query "$W/m.pb" "select group_concat(s.name || ':' ||
		((s.ts - $base) / 1000) || ':' || (s.dur / 1000), ' ')
		from (select s.* from slice s join track t on s.track_id = t.id
		where t.name = 'vCPU $1 host state' and s.dur > 0
		order by s.ts) s"
}
got=$(slices 0)
check "vCPU 0: its host states (got: $got)" [ "$got" = "$want0" ]
got=$(slices 1)
check "vCPU 1: the hole is unknown (got: $got)" [ "$got" = "$want1" ]
expect "running slices say on which host CPU" "$W/m.pb" \
	"select count(*) from slice where name in ('running', 'exit') and
	 EXTRACT_ARG(arg_set_id, 'debug.host_cpu') is null" 0
expect "and which host thread" "$W/m.pb" \
	"select group_concat(distinct EXTRACT_ARG(arg_set_id, 'debug.host_tid'))
	 from slice where name = 'running'" "1001,1002"

# vperfetto_tp on the merged trace: the VM is machine 1 (vm_machine), and
# the tracks show what vcpu_state says.
expect "vcpu rows on machine 1" "$W/m.pb" \
	"select group_concat(m.raw_id || ':' || v.cpu || ':' || v.tid, ' ')
	 from vcpu v join machine m on v.machine_id = m.id" "1:0:1001 1:1:1002"
expect "the tracks' slices are vcpu_state's rows" "$W/m.pb" \
	"select (select count(*) from vcpu_state) = (select count(*) from slice
	 s join track t on s.track_id = t.id where t.name like 'vCPU %' and
	 s.dur > 0)" 1
# The guest's threads, mapped through the clock model (25 ppm drift):
# exact to a few hundred ns.
expect_range "busy: preempted by the host ~1500 us" "$W/m.pb" \
	"select preempted_dur from guest_thread_host_summary where tid = 50" \
	1499000 1501000
expect_range "busy: really running ~2600 us" "$W/m.pb" \
	"select host_running_dur from guest_thread_host_summary where tid = 50" \
	2599000 2601000
expect_range "other: unknown across the hole ~500 us" "$W/m.pb" \
	"select unknown_dur from guest_thread_host_summary where tid = 60" \
	495000 505000

check "decodes with our protos, no unknown fields" \
	env VP_ALLOW_FIELDS=9000 VP_PROTO_DIR="$PROTO_DIR" bash "$PDECODE" "$W/m.pb"
if [ -n "${PERFETTO_TRACE_PROTO:-}" ] && [ -r "$PERFETTO_TRACE_PROTO" ]; then
	mkdir -p "$W/pp"
	cp "$PERFETTO_TRACE_PROTO" "$W/pp/perfetto_trace.proto"
	check "decodes with Perfetto's perfetto_trace.proto, no unknown fields" \
		env VP_ALLOW_FIELDS=9000 VP_PROTO_DIR="$W/pp" bash "$PDECODE" "$W/m.pb"
else
	echo "note: PERFETTO_TRACE_PROTO not set: not decoded with Perfetto's own schema"
fi
e2e_finish vm_tracks_e2e
