


	host_proc
@ËP
"

guest_proc@–Pê