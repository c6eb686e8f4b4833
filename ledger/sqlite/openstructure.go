package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strings"
)

// checkStructure is the open-time check of a ledger too large to read
// whole. It reads, through SQLite's pager (so pages still in the
// write-ahead log count), a number of pages that does not grow with the
// file: the pages where each b-tree starts and ends, which every read
// and write of it goes through, and none of the rows in between:
//
//   - of every b-tree (the schema table, every table and index): its root
//     page, up to maxSpread pages of the level below the root spread
//     from its first to its last (only the first and the last when they
//     are leaves), and from there the first and the last page of every
//     level down to the leaves (the
//     path to the oldest and to the newest rows), each checked as
//     quick_check checks a page: its type matches its tree, its header,
//     cell pointers, freeblocks and child pointers stay inside the page
//     and the file, rowid keys ascend, the first and the last leaf lie at
//     one depth, and no page is claimed twice;
//   - the first maxTrunks trunk pages of the freelist, and, when the
//     freelist ends within them, that its count matches the header's.
//
// That is at most maxSpread pages and two per level for each tree, about
// a hundred in all, whatever the size of the file (docs/benchmarks.md
// gives the figures). Damage elsewhere, in a leaf in the middle of a
// tree, an interior page off the edges and off those read below the
// root, an overflow page, or a value
// altered inside a well-formed page, is not seen: reading it later fails
// with SQLITE_CORRUPT, which interpretError turns into ledger.ErrCorrupt,
// and mcp-changeset check reports it.
func (b *Backend) checkStructure(ctx context.Context, db *sql.DB) error {
	_, err := b.walkStructure(ctx, db)
	return err
}

// walkStructure is checkStructure, returning the finished walk so that
// tests and benchmarks can see how many pages it read.
func (b *Backend) walkStructure(ctx context.Context, db *sql.DB) (*structure, error) {
	// A read-only transaction begins with a plain BEGIN, whatever the
	// pool's _txlock: it takes no write lock.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, b.interpretError("open", err)
	}
	defer tx.Rollback()
	s := &structure{b: b, ctx: ctx, tx: tx}
	if err := s.load(); err != nil {
		return nil, err
	}
	for _, t := range s.trees {
		if err := s.walk(t); err != nil {
			return nil, err
		}
	}
	return s, s.freelist()
}

// A tree is one b-tree of the file: the schema table, a table or an index.
type tree struct {
	name  string
	root  uint32
	index bool // an index b-tree (an index or a WITHOUT ROWID table), else a table b-tree
}

// structure is the state of one checkStructure walk.
type structure struct {
	b   *Backend
	ctx context.Context
	tx  *sql.Tx

	pageSize  int64
	pageCount uint32
	usable    int // page size less the reserved bytes at the end of each page
	page1     []byte
	trees     []tree
	claimed   []uint64 // bit set of the pages a tree or the freelist holds
	pagesRead int
	widest    int // the most pages read of one level of one tree
}

// load reads the page geometry, page 1 and the list of b-trees.
func (s *structure) load() error {
	var pageCount int64
	if err := s.tx.QueryRowContext(s.ctx, "PRAGMA page_size").Scan(&s.pageSize); err != nil {
		return s.b.interpretError("open", err)
	}
	if err := s.tx.QueryRowContext(s.ctx, "PRAGMA page_count").Scan(&pageCount); err != nil {
		return s.b.interpretError("open", err)
	}
	if pageCount < 1 || pageCount > 1<<32-2 {
		return s.b.corrupt("the file counts %d pages", pageCount)
	}
	s.pageCount = uint32(pageCount)
	s.claimed = make([]uint64, pageCount/64+1)
	pages, err := s.read([]uint32{1})
	if err != nil {
		return err
	}
	s.page1 = pages[0]
	s.usable = int(s.pageSize) - int(s.page1[20])
	rows, err := s.tx.QueryContext(s.ctx, `SELECT s.name, s.type, s.rootpage, coalesce(t.wr, 0)
		FROM sqlite_schema AS s LEFT JOIN pragma_table_list AS t ON t.schema = 'main' AND t.name = s.name
		WHERE s.rootpage > 0 ORDER BY s.rootpage`)
	if err != nil {
		return s.b.interpretError("open", err)
	}
	defer rows.Close()
	s.trees = []tree{{name: "sqlite_schema", root: 1}}
	for rows.Next() {
		var name, typ string
		var root int64
		var withoutRowid bool
		if err := rows.Scan(&name, &typ, &root, &withoutRowid); err != nil {
			return s.b.interpretError("open", err)
		}
		if root < 2 || root > int64(s.pageCount) {
			return s.b.corrupt("the schema gives %s the root page %d, outside the file's %d pages", name, root, s.pageCount)
		}
		s.trees = append(s.trees, tree{name: name, root: uint32(root), index: typ == "index" || withoutRowid})
	}
	if err := rows.Err(); err != nil {
		return s.b.interpretError("open", err)
	}
	return nil
}

// maxPagesPerRead bounds the page numbers in one read's IN list.
const maxPagesPerRead = 500

// read returns the pages numbered pgnos, in that order, as SQLite's pager
// sees them (sqlite_dbpage), so that pages still in the write-ahead log
// are the ones read.
func (s *structure) read(pgnos []uint32) ([][]byte, error) {
	s.pagesRead += len(pgnos)
	out := make([][]byte, 0, len(pgnos))
	for start := 0; start < len(pgnos); start += maxPagesPerRead {
		part := pgnos[start:min(start+maxPagesPerRead, len(pgnos))]
		args := make([]any, len(part))
		for i, p := range part {
			args[i] = int64(p)
		}
		rows, err := s.tx.QueryContext(s.ctx, "SELECT pgno, data FROM sqlite_dbpage WHERE pgno IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(part)), ", ")+")", args...)
		if err != nil {
			return nil, s.b.interpretError("open", err)
		}
		got := make(map[uint32][]byte, len(part))
		for rows.Next() {
			var pgno int64
			var data []byte
			if err := rows.Scan(&pgno, &data); err != nil {
				rows.Close()
				return nil, s.b.interpretError("open", err)
			}
			got[uint32(pgno)] = data
		}
		if err := rows.Close(); err != nil {
			return nil, s.b.interpretError("open", err)
		}
		if err := rows.Err(); err != nil {
			return nil, s.b.interpretError("open", err)
		}
		for _, p := range part {
			d := got[p]
			if int64(len(d)) != s.pageSize {
				return nil, s.b.corrupt("page %d of %d cannot be read whole (%d bytes)", p, s.pageCount, len(d))
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// claim records that page p belongs to what, and refuses a page outside
// the file or claimed twice.
func (s *structure) claim(p uint32, what string) error {
	if p < 1 || p > s.pageCount {
		return s.b.corrupt("%s points to page %d, outside the file's %d pages", what, p, s.pageCount)
	}
	if s.claimed[p/64]&(1<<(p%64)) != 0 {
		return s.b.corrupt("%s points to page %d, which another part of the file uses too", what, p)
	}
	s.claimed[p/64] |= 1 << (p % 64)
	return nil
}

// maxDepth bounds the depth of a b-tree: SQLite's own bound is 20.
const maxDepth = 40

// maxSpread bounds how many pages of the level below a root
// checkStructure reads.
const maxSpread = 16

// spreadOut returns at most n of pages, spread evenly from the first to
// the last, in order.
func spreadOut(pages []uint32, n int) []uint32 {
	if len(pages) <= n {
		return pages
	}
	out := make([]uint32, n)
	for i := range n {
		out[i] = pages[i*(len(pages)-1)/(n-1)]
	}
	return out
}

// walk checks the tree's root, the whole level below it, and the first
// and the last page of each level further down.
func (s *structure) walk(t tree) error {
	if err := s.claim(t.root, "the schema entry of "+t.name); err != nil {
		return err
	}
	pages, err := s.read([]uint32{t.root})
	if err != nil {
		return err
	}
	children, err := s.checkPage(t, t.root, pages[0])
	if err != nil || children == nil {
		return err // a tree of one page, or damage
	}
	// The level below the root: every page the root points to is
	// claimed; up to maxSpread of them, spread evenly from the first to
	// the last, are read if they are interior pages, only the first and
	// the last if they are the leaves (all pages of a level are leaves if
	// the first is: the check below refuses a mix).
	for _, c := range children {
		if err := s.claim(c, "a page of "+t.name); err != nil {
			return err
		}
	}
	if pages, err = s.read(children[:1]); err != nil {
		return err
	}
	spread := maxSpread
	if isLeaf(pages[0], children[0]) {
		spread = 2
	}
	children = spreadOut(children, spread)
	s.widest = max(s.widest, len(children))
	more, err := s.read(children[1:])
	if err != nil {
		return err
	}
	pages = append(pages, more...)
	var first, last []uint32 // the children of the level's first and last page
	leaves := 0
	for i, d := range pages {
		kids, err := s.checkPage(t, children[i], d)
		if err != nil {
			return err
		}
		if kids == nil {
			leaves++
		}
		if i == 0 {
			first = kids
		}
		if i == len(pages)-1 {
			last = kids
		}
	}
	if leaves == len(pages) {
		return nil
	}
	if leaves > 0 {
		return s.b.corrupt("b-tree %s has leaves at different depths (level 1 mixes leaf and interior pages)", t.name)
	}
	// Further down, the edges: the first child of the first page and the
	// last child of the last page, level by level.
	for depth := 2; ; depth++ {
		if depth > maxDepth {
			return s.b.corrupt("b-tree %s is more than %d levels deep", t.name, maxDepth)
		}
		edge := []uint32{first[0], last[len(last)-1]}
		if edge[0] == edge[1] {
			return s.b.corrupt("b-tree %s: two pages of level %d point to the same page %d", t.name, depth-1, edge[0])
		}
		for _, p := range edge {
			if err := s.claim(p, "a page of "+t.name); err != nil {
				return err
			}
		}
		pages, err := s.read(edge)
		if err != nil {
			return err
		}
		if first, err = s.checkPage(t, edge[0], pages[0]); err != nil {
			return err
		}
		if last, err = s.checkPage(t, edge[1], pages[1]); err != nil {
			return err
		}
		switch {
		case first == nil && last == nil:
			return nil
		case first == nil || last == nil:
			return s.b.corrupt("b-tree %s has leaves at different depths (its first and last pages of level %d)", t.name, depth)
		}
	}
}

// Page types of b-tree pages.
const (
	indexInterior = 0x02
	tableInterior = 0x05
	indexLeaf     = 0x0a
	tableLeaf     = 0x0d
)

// isLeaf reports whether page pgno holding d has a leaf page's type.
func isLeaf(d []byte, pgno uint32) bool {
	h := pageHeaderOffset(pgno)
	return d[h] == indexLeaf || d[h] == tableLeaf
}

// pageHeaderOffset is where the b-tree header of page pgno starts: after
// the database header on page 1.
func pageHeaderOffset(pgno uint32) int {
	if pgno == 1 {
		return headerSize
	}
	return 0
}

// checkPage checks page pgno of tree t, holding d, and returns its
// children in order, or nil for a leaf.
func (s *structure) checkPage(t tree, pgno uint32, d []byte) ([]uint32, error) {
	bad := func(format string, args ...any) ([]uint32, error) {
		return nil, s.b.corrupt("page %d of %s: %s", pgno, t.name, fmt.Sprintf(format, args...))
	}
	h := pageHeaderOffset(pgno)
	typ := d[h]
	var interior bool
	switch {
	case typ == tableInterior && !t.index, typ == indexInterior && t.index:
		interior = true
	case typ == tableLeaf && !t.index, typ == indexLeaf && t.index:
	default:
		kind := "a table"
		if t.index {
			kind = "an index"
		}
		return bad("its type byte is 0x%02x, not that of a page of %s b-tree", typ, kind)
	}
	hdr := 8
	if interior {
		hdr = 12
	}
	u16 := func(off int) int { return int(binary.BigEndian.Uint16(d[off:])) }
	cells := u16(h + 3)
	content := u16(h + 5)
	if content == 0 {
		content = 65536
	}
	ptrEnd := h + hdr + 2*cells
	if ptrEnd > s.usable {
		return bad("it claims %d cells, more than fit in a page", cells)
	}
	if content < ptrEnd || content > s.usable {
		return bad("its cell content starts at offset %d, outside %d..%d", content, ptrEnd, s.usable)
	}
	if frag := d[h+7]; frag > 60 {
		return bad("it counts %d fragmented bytes, more than 60", frag)
	}
	for fb, n := u16(h+1), 0; fb != 0; n++ {
		if fb < content || fb > s.usable-4 || n > s.usable/4 {
			return bad("its free-block list reaches offset %d", fb)
		}
		size, next := u16(fb+2), u16(fb)
		if size < 4 || fb+size > s.usable || (next != 0 && next < fb+size) {
			return bad("its free block at offset %d is %d bytes and is followed by one at %d", fb, size, next)
		}
		fb = next
	}
	minCell := 2 // a leaf cell holds at least two one-byte varints
	if interior {
		minCell = 4 + 1
	}
	var children []uint32
	var lastKey int64
	for i := range cells {
		off := u16(h + hdr + 2*i)
		if off < content || off+minCell > s.usable {
			return bad("its cell %d starts at offset %d, outside %d..%d", i, off, content, s.usable-minCell)
		}
		if !interior {
			continue
		}
		children = append(children, binary.BigEndian.Uint32(d[off:]))
		if t.index {
			continue
		}
		key, n := sqliteVarint(d[off+4 : s.usable])
		if n == 0 {
			return bad("the key of its cell %d runs past the page", i)
		}
		if i > 0 && key <= lastKey {
			return bad("its keys do not ascend (cell %d: %d after %d)", i, key, lastKey)
		}
		lastKey = key
	}
	if !interior {
		return nil, nil
	}
	return append(children, binary.BigEndian.Uint32(d[h+8:])), nil
}

// maxTrunks bounds the freelist trunk pages checkStructure reads: each
// lists up to about a thousand free pages, so a freelist of more than
// maxTrunks trunks (a file with more than 60 MB free) is checked only in
// part.
const maxTrunks = 16

// freelist checks the freelist's first maxTrunks trunk pages and, when
// the freelist ends within them, that the pages they list add up to the
// header's count of free pages.
func (s *structure) freelist() error {
	trunk := binary.BigEndian.Uint32(s.page1[32:])
	want := binary.BigEndian.Uint32(s.page1[36:])
	if want >= s.pageCount {
		return s.b.corrupt("the header counts %d free pages in a file of %d pages", want, s.pageCount)
	}
	var seen uint32
	for n := 0; trunk != 0; n++ {
		if n == maxTrunks {
			return nil // the rest is read when SQLite needs it
		}
		if err := s.claim(trunk, "the freelist"); err != nil {
			return err
		}
		pages, err := s.read([]uint32{trunk})
		if err != nil {
			return err
		}
		d := pages[0]
		leaves := binary.BigEndian.Uint32(d[4:])
		if int64(leaves) > int64(s.usable/4-2) {
			return s.b.corrupt("freelist trunk page %d lists %d pages, more than fit", trunk, leaves)
		}
		for i := range leaves {
			if err := s.claim(binary.BigEndian.Uint32(d[8+4*i:]), "freelist trunk page "+fmt.Sprint(trunk)); err != nil {
				return err
			}
		}
		seen += 1 + leaves
		trunk = binary.BigEndian.Uint32(d[0:])
	}
	if seen != want {
		return s.b.corrupt("the freelist holds %d pages, but the header counts %d", seen, want)
	}
	return nil
}

// sqliteVarint decodes a SQLite varint (big-endian, 7 bits a byte, the
// ninth byte whole) from p, returning it and its length, or n == 0 if p
// ends first.
func sqliteVarint(p []byte) (v int64, n int) {
	var u uint64
	for i := 0; i < 9; i++ {
		if i >= len(p) {
			return 0, 0
		}
		c := p[i]
		if i == 8 {
			return int64(u<<8 | uint64(c)), 9
		}
		u = u<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return int64(u), i + 1
		}
	}
	return int64(u), 9
}
