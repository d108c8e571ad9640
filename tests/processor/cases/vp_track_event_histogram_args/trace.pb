
2@
PZH≤h∫sample‚ b Mem.Peak»
@PZH≤h∫sample‚ 	
@PZH≤h‚
Direct