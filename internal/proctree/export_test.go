package proctree

// OwnCgroup is the directory of the calling process's cgroup v2 ("": none).
var OwnCgroup = ownCgroup

// StaleHolder parses a group name newGroup makes (lease-PID-RANDOM).
var StaleHolder = staleHolder
