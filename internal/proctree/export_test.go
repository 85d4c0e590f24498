package proctree

// OwnCgroup is the directory of the calling process's cgroup v2 ("": none).
var OwnCgroup = ownCgroup
