package sqlite

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// interiorTablePage returns a well-formed interior page of a table b-tree
// of 4096 bytes: three cells pointing to pages 10, 11 and 12 with keys 100,
// 200 and 300, and the right-most child 13.
func interiorTablePage() []byte {
	d := make([]byte, 4096)
	d[0] = tableInterior
	binary.BigEndian.PutUint16(d[3:], 3)    // cells
	binary.BigEndian.PutUint16(d[5:], 4000) // content area
	binary.BigEndian.PutUint32(d[8:], 13)   // right-most child
	for i, key := range []int{100, 200, 300} {
		off := 4000 + 8*i
		binary.BigEndian.PutUint16(d[12+2*i:], uint16(off))
		binary.BigEndian.PutUint32(d[off:], uint32(10+i))
		// A two-byte varint: key = (hi&0x7f)<<7 | lo.
		d[off+4], d[off+5] = 0x80|byte(key>>7), byte(key&0x7f)
	}
	return d
}

func testStructure() *structure {
	return &structure{b: &Backend{path: "/x/ledger.db"}, pageSize: 4096, pageCount: 100, usable: 4096, claimed: make([]uint64, 2)}
}

func TestCheckPage_AcceptsWellFormedPages(t *testing.T) {
	t.Parallel()
	s := testStructure()
	children, err := s.checkPage(tree{name: "changes"}, 5, interiorTablePage())
	if err != nil || len(children) != 4 || children[0] != 10 || children[3] != 13 {
		t.Fatalf("checkPage(interior) = %v, %v; want [10 11 12 13]", children, err)
	}
	leaf := make([]byte, 4096)
	leaf[0] = indexLeaf
	binary.BigEndian.PutUint16(leaf[5:], 4096) // no cells
	if children, err := s.checkPage(tree{name: "changes_created", index: true}, 6, leaf); err != nil || children != nil {
		t.Fatalf("checkPage(empty index leaf) = %v, %v", children, err)
	}
	// Page 1 keeps its b-tree header after the database header.
	one := make([]byte, 4096)
	copy(one[headerSize:], interiorTablePage()[:12+6])
	copy(one[4000:], interiorTablePage()[4000:])
	if _, err := s.checkPage(tree{name: "sqlite_schema"}, 1, one); err != nil {
		t.Fatalf("checkPage(page 1): %v", err)
	}
}

func TestCheckPage_RefusesEachDamagedField(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		index bool
		edit  func(d []byte)
		says  string
	}{
		"a table page in an index tree":    {true, func(d []byte) {}, "not that of a page of an index b-tree"},
		"an unknown type":                  {false, func(d []byte) { d[0] = 0x07 }, "type byte is 0x07"},
		"too many cells":                   {false, func(d []byte) { binary.BigEndian.PutUint16(d[3:], 2100) }, "claims 2100 cells"},
		"content area before the pointers": {false, func(d []byte) { binary.BigEndian.PutUint16(d[5:], 14) }, "cell content starts at offset 14"},
		"too many fragmented bytes":        {false, func(d []byte) { d[7] = 61 }, "61 fragmented bytes"},
		"a cell outside the content area":  {false, func(d []byte) { binary.BigEndian.PutUint16(d[14:], 100) }, "cell 1 starts at offset 100"},
		"a cell past the page":             {false, func(d []byte) { binary.BigEndian.PutUint16(d[14:], 4095) }, "cell 1 starts at offset 4095"},
		"keys out of order":                {false, func(d []byte) { d[4020] = 0x81 }, "keys do not ascend (cell 2: 172 after 200)"},
		"a free block outside the page":    {false, func(d []byte) { binary.BigEndian.PutUint16(d[1:], 4094) }, "free-block list reaches offset 4094"},
		"a free block running past the page": {false, func(d []byte) {
			binary.BigEndian.PutUint16(d[1:], 4030)
			binary.BigEndian.PutUint16(d[4032:], 100)
		}, "free block at offset 4030 is 100 bytes"},
	} {
		d := interiorTablePage()
		tc.edit(d)
		_, err := testStructure().checkPage(tree{name: "t", index: tc.index}, 5, d)
		if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), "page 5 of t: ") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: checkPage = %v, want ErrCorrupt saying %q", name, err, tc.says)
		}
	}
}

func TestClaim_RefusesPagesOutsideTheFileOrUsedTwice(t *testing.T) {
	t.Parallel()
	s := testStructure()
	if err := s.claim(7, "a page of t"); err != nil {
		t.Fatal(err)
	}
	if err := s.claim(100, "a page of t"); err != nil {
		t.Fatal(err)
	}
	for p, says := range map[uint32]string{7: "which another part of the file uses too", 0: "outside the file's 100 pages", 101: "outside the file's 100 pages"} {
		if err := s.claim(p, "a page of u"); !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), says) {
			t.Errorf("claim(%d) = %v, want ErrCorrupt saying %q", p, err, says)
		}
	}
}

func TestSQLiteVarint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in []byte
		v  int64
		n  int
	}{
		{[]byte{0x05}, 5, 1},
		{[]byte{0x81, 0x00}, 128, 2},
		{[]byte{0x81, 0x80}, 0, 0}, // runs past the end
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, -1, 9},
		{nil, 0, 0},
	} {
		if v, n := sqliteVarint(tc.in); v != tc.v || n != tc.n {
			t.Errorf("sqliteVarint(% x) = %d, %d; want %d, %d", tc.in, v, n, tc.v, tc.n)
		}
	}
}

// goodHeader is the database header of a ledger of 10 pages of 4096 bytes.
func goodHeader() []byte {
	h := make([]byte, headerSize)
	copy(h, sqliteMagic)
	binary.BigEndian.PutUint16(h[16:], 4096)
	h[18], h[19], h[21], h[22], h[23] = 2, 2, 64, 32, 32
	binary.BigEndian.PutUint32(h[24:], 7) // change counter
	binary.BigEndian.PutUint32(h[28:], 10)
	binary.BigEndian.PutUint32(h[44:], 4)
	binary.BigEndian.PutUint32(h[56:], 1)
	binary.BigEndian.PutUint32(h[92:], 7) // version-valid-for
	return h
}

func TestCheckHeader(t *testing.T) {
	t.Parallel()
	b := &Backend{path: "/x/ledger.db"}
	if err := b.checkHeader(goodHeader(), 10*4096, 0); err != nil {
		t.Fatalf("a sound header: %v", err)
	}
	// A larger file, or pages still in the log, are no damage.
	if err := b.checkHeader(goodHeader(), 12*4096, 0); err != nil {
		t.Errorf("a file longer than its header says: %v", err)
	}
	if err := b.checkHeader(goodHeader(), 8*4096, 4096); err != nil {
		t.Errorf("a short file with a write-ahead log: %v", err)
	}
	stale := goodHeader()
	binary.BigEndian.PutUint32(stale[92:], 6) // the page count is not valid
	if err := b.checkHeader(stale, 8*4096, 0); err != nil {
		t.Errorf("a short file whose header page count is not valid: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(h []byte)
		size int64
		says string
	}{
		"a short header":        {func(h []byte) {}, 60, "60 bytes long, shorter than a SQLite header"},
		"page size 1000":        {func(h []byte) { binary.BigEndian.PutUint16(h[16:], 1000) }, 40960, "page size reads 1000"},
		"page size 256":         {func(h []byte) { binary.BigEndian.PutUint16(h[16:], 256) }, 40960, "page size reads 256"},
		"format version 3":      {func(h []byte) { h[19] = 3 }, 40960, "versions read 2 and 3"},
		"too many reserved":     {func(h []byte) { h[20] = 255; binary.BigEndian.PutUint16(h[16:], 512) }, 5120, "reserves 255 bytes"},
		"payload fraction":      {func(h []byte) { h[21] = 65 }, 40960, "payload fractions read 65"},
		"schema format 5":       {func(h []byte) { binary.BigEndian.PutUint32(h[44:], 5) }, 40960, "schema format number reads 5"},
		"text encoding 9":       {func(h []byte) { binary.BigEndian.PutUint32(h[56:], 9) }, 40960, "text encoding reads 9"},
		"reserved bytes in use": {func(h []byte) { h[80] = 1 }, 40960, "bytes 72 to 91"},
		"truncated":             {func(h []byte) {}, 9 * 4096, "truncated: its header counts 10 pages of 4096 bytes (40960 bytes), but the file holds 36864"},
	} {
		h := goodHeader()
		tc.edit(h)
		if tc.size < headerSize {
			h = h[:tc.size]
		}
		err := b.checkHeader(h, tc.size, 0)
		if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: checkHeader = %v, want ErrCorrupt saying %q", name, err, tc.says)
		}
	}
	// Page size 65536 is written as 1.
	big := goodHeader()
	binary.BigEndian.PutUint16(big[16:], 1)
	if err := b.checkHeader(big, 10*65536, 0); err != nil {
		t.Errorf("page size 65536: %v", err)
	}
}
