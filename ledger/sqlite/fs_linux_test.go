//go:build linux

package sqlite

import "testing"

func TestClassifyMagic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		magic   uint32
		name    string
		network bool
	}{
		{0x6969, "NFS", true},
		{0x517B, "SMB", true},
		{0xFF534D42, "CIFS", true},
		{0xFE534D42, "SMB2", true},
		{0x5346414F, "AFS", true},
		{0x01021997, "9P", true},
		{0x65735546, "FUSE", true},
		{0xEF53, "", false},     // ext4
		{0x58465342, "", false}, // XFS
		{0x9123683E, "", false}, // Btrfs
		{0x01021994, "", false}, // tmpfs
		{0x794C7630, "", false}, // overlayfs
	} {
		name, network := classifyMagic(tc.magic)
		if name != tc.name || network != tc.network {
			t.Errorf("classifyMagic(%#x) = %q, %v; want %q, %v", tc.magic, name, network, tc.name, tc.network)
		}
	}
	// Statfs_t.Type is a signed 32-bit field on some architectures.
	var signed int32 = -11317950 // 0xFF534D42
	if name, _ := classifyMagic(uint32(signed)); name != "CIFS" {
		t.Errorf("sign-extended CIFS magic classified as %q", name)
	}
}

func TestNetworkFSOfTempDir(t *testing.T) {
	t.Parallel()
	if name, network := networkFS(t.TempDir()); network {
		t.Skipf("the temporary directory is on %s", name)
	}
	if _, network := networkFS("/no/such/path"); network {
		t.Error("a path that cannot be examined is reported as network")
	}
}
