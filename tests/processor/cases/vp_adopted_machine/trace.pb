


guest_proc@–Pê