package leasefmt

import "strings"

// NFSSillyRenamePrefix begins the name the Linux NFS client gives a file
// that is removed, or renamed over, while a process of that client still
// has it open ("silly rename", fs/nfs/unlink.c: .nfs, the file's ID in 16
// hex digits and a counter in 8): the file stays readable through the
// open descriptors, and the client removes it when the last one closes.
const NFSSillyRenamePrefix = ".nfs"

// IsNFSSillyRename reports whether name is such a file's name: ".nfs" and
// 1 to 64 lowercase hex digits. No name of a table is one (IDs are hex,
// lease's own hidden names are .ID.json.tmp.*, .lock, ...). Every lister
// of a table passes such a name over, and lease fsck reports it as what it
// is and never moves or removes it: it may be open, and its client deletes
// it on close.
func IsNFSSillyRename(name string) bool {
	h, ok := strings.CutPrefix(name, NFSSillyRenamePrefix)
	if !ok || h == "" || len(h) > 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
