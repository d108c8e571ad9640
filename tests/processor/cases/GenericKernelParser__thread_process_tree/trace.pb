
V@êˆß™À
ÒL
init

proc1 --helloÒ	
task1 ®,task2´F!idle(