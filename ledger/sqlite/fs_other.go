//go:build !linux && !darwin

package sqlite

import (
	"path/filepath"
	"strings"
)

// networkFS reports whether path is on a network filesystem. On this
// system it recognises only UNC paths (\\server\share on Windows); other
// filesystems are assumed local.
func networkFS(path string) (name string, network bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	v := filepath.VolumeName(abs)
	if len(v) < 3 || (v[:2] != `\\` && v[:2] != "//") {
		return "", false
	}
	if (v[2] == '?' || v[2] == '.') && !strings.HasPrefix(strings.ToUpper(v[3:]), `\UNC\`) {
		return "", false // a local device path such as \\?\C:
	}
	return "SMB share " + v, true
}
