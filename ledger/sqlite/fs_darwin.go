//go:build darwin

package sqlite

import "syscall"

// networkTypes are the f_fstypename values of network filesystems on
// macOS, and of FUSE, whose common uses are remote.
var networkTypes = map[string]bool{
	"nfs": true, "smbfs": true, "afpfs": true, "webdav": true, "cifs": true,
	"ftp": true, "macfuse": true, "osxfuse": true, "fusefs": true,
}

// networkFS reports whether path is on a network filesystem, and which.
// When statfs fails the filesystem is assumed local.
func networkFS(path string) (name string, network bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "", false
	}
	b := make([]byte, 0, len(st.Fstypename))
	for _, c := range st.Fstypename {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	name = string(b)
	return name, networkTypes[name]
}
