
:R
gpuôR
ddr @è
:
R
gpuØ@Ð