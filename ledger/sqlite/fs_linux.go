//go:build linux

package sqlite

import "syscall"

// networkMagic maps the statfs f_type of network and cluster filesystems
// (from linux/magic.h and the filesystems' own headers) to a name for
// messages. FUSE is included because its common uses for remote files
// (sshfs, rclone, s3fs) give no locking that SQLite can rely on; a local
// FUSE filesystem needs OpenOptions.AllowNetworkFS.
var networkMagic = map[uint32]string{
	0x6969:     "NFS",
	0x517B:     "SMB",
	0xFF534D42: "CIFS",
	0xFE534D42: "SMB2",
	0x5346414F: "AFS",
	0x6B414653: "kAFS",
	0x73757245: "Coda",
	0x564C:     "NCP",
	0x01021997: "9P",
	0x00C36400: "Ceph",
	0x0BD00BD0: "Lustre",
	0x47504653: "GPFS",
	0x65735546: "FUSE",
}

// classifyMagic names the filesystem with statfs f_type magic and reports
// whether it is a network filesystem.
func classifyMagic(magic uint32) (name string, network bool) {
	name, network = networkMagic[magic]
	return name, network
}

// networkFS reports whether path is on a network filesystem, and which.
// When statfs fails the filesystem is assumed local: SQLite's own open will
// report a path it cannot use.
func networkFS(path string) (name string, network bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "", false
	}
	return classifyMagic(uint32(st.Type))
}
