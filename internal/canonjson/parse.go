package canonjson

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"sync"
)

// parser is a single-pass recursive descent parser that writes the canonical
// form to out while it reads in. Objects are written in input order and
// reordered in place once their end is reached, so only objects whose members
// arrive unsorted cost extra copying. Each unsorted object copies its own
// encoding once, so the worst case is O(len(in) * MaxDepth) bytes copied,
// about 80 ms for 1 MB of unsorted objects nested 1000 deep.
//
// Parsers are pooled: members, keys and tmp are scratch space reused across
// calls, which keeps Canonicalize at one allocation for typical payloads.
type parser struct {
	in    []byte
	pos   int
	out   []byte
	depth int

	// members is a stack shared by all open objects; each object owns the
	// entries from the length it saw on entry.
	members []member
	// keys holds decoded member names that contained escapes, and scratch
	// for decoding escaped string values. It only grows during a call, so
	// offsets into it stay valid.
	keys []byte
	// tmp is scratch for reordering an object's members.
	tmp []byte
	// num is scratch for the digits of numbers whose exactness is checked.
	num []byte
	// cmp orders members; it is built once per parser so that sorting does
	// not allocate a closure on every object.
	cmp func(a, b member) int
}

// member records one object member. Its name is in[ks:ke] when it had no
// escapes (the common case, no copying) and keys[ks:ke] otherwise. Its
// canonical encoding, name through value, is out[start:end].
type member struct {
	ks, ke     int
	inKeys     bool
	off        int // input offset of the name, for error messages
	start, end int
}

var parserPool = sync.Pool{New: func() any {
	p := new(parser)
	p.cmp = func(a, b member) int { return compareUTF16(p.name(a), p.name(b)) }
	return p
}}

// maxPooledBuf bounds the scratch kept in the pool, so that one huge
// document does not pin its buffers for the life of the process.
const maxPooledBuf = 1 << 20

func getParser(data []byte) *parser {
	p := parserPool.Get().(*parser)
	p.in, p.pos, p.depth = data, 0, 0
	p.out, p.members, p.keys = p.out[:0], p.members[:0], p.keys[:0]
	return p
}

func putParser(p *parser) {
	p.in = nil // do not retain the caller's input
	if cap(p.out) > maxPooledBuf || cap(p.keys) > maxPooledBuf || cap(p.tmp) > maxPooledBuf || cap(p.num) > maxPooledBuf {
		return
	}
	parserPool.Put(p)
}

func (p *parser) name(m member) []byte {
	if m.inKeys {
		return p.keys[m.ks:m.ke]
	}
	return p.in[m.ks:m.ke]
}

func (p *parser) fail(off int, msg string) error {
	return &syntaxError{msg: msg, off: off}
}

// unexpected describes the byte at p.pos, or the end of input.
func (p *parser) unexpected(want string) error {
	if p.pos >= len(p.in) {
		return p.fail(p.pos, "unexpected end of input, want "+want)
	}
	return p.fail(p.pos, "unexpected byte "+strconv.Quote(string(p.in[p.pos:p.pos+1]))+", want "+want)
}

func (p *parser) document() error {
	if bytes.HasPrefix(p.in, []byte("\xef\xbb\xbf")) {
		return p.fail(0, "byte order mark")
	}
	if err := p.value(); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return p.fail(p.pos, "data after JSON value")
	}
	return nil
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() error {
	p.skipSpace()
	if p.pos >= len(p.in) {
		return p.unexpected("value")
	}
	switch c := p.in[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		_, _, _, err := p.str(false)
		return err
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return p.number()
		}
		return p.unexpected("value")
	}
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return p.fail(p.pos, "invalid literal, want "+lit)
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.fail(p.pos, "nesting deeper than "+strconv.Itoa(MaxDepth))
	}
	p.pos++ // the opening bracket
	return nil
}

func (p *parser) array() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		p.depth--
		return nil
	}
	for {
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.unexpected("',' or ']'")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			p.depth--
			return nil
		default:
			return p.unexpected("',' or ']'")
		}
	}
}

func (p *parser) object() error {
	if err := p.enter(); err != nil {
		return err
	}
	open := len(p.out)
	p.out = append(p.out, '{')
	base := len(p.members)
	sorted := true
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		p.depth--
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.unexpected("string for member name")
		}
		if len(p.members) > base {
			p.out = append(p.out, ',')
		}
		m := member{off: p.pos, start: len(p.out)}
		var err error
		if m.ks, m.ke, m.inKeys, err = p.str(true); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.unexpected("':'")
		}
		p.pos++
		p.out = append(p.out, ':')
		// Checking order as members arrive finds duplicates in sorted input
		// without a sort, and tells us whether the object needs reordering.
		if n := len(p.members); sorted && n > base {
			switch c := p.cmp(p.members[n-1], m); {
			case c == 0:
				return p.duplicate(m)
			case c > 0:
				sorted = false
			}
		}
		i := len(p.members)
		p.members = append(p.members, m)
		if err := p.value(); err != nil {
			return err
		}
		p.members[i].end = len(p.out)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.unexpected("',' or '}'")
		}
		if c := p.in[p.pos]; c == ',' {
			p.pos++
			continue
		} else if c != '}' {
			return p.unexpected("',' or '}'")
		}
		p.pos++
		break
	}
	if !sorted {
		if err := p.reorder(open, p.members[base:]); err != nil {
			return err
		}
	}
	p.out = append(p.out, '}')
	p.members = p.members[:base]
	p.depth--
	return nil
}

func (p *parser) duplicate(m member) error {
	return p.fail(m.off, "duplicate member name "+strconv.Quote(string(p.name(m))))
}

// reorder sorts ms and rewrites the object's members, which follow the '{'
// at out[open], in that order.
func (p *parser) reorder(open int, ms []member) error {
	slices.SortFunc(ms, p.cmp)
	for i := 1; i < len(ms); i++ {
		if p.cmp(ms[i-1], ms[i]) == 0 {
			if ms[i-1].off > ms[i].off {
				return p.duplicate(ms[i-1])
			}
			return p.duplicate(ms[i])
		}
	}
	base := open + 1
	p.tmp = append(p.tmp[:0], p.out[base:]...)
	p.out = p.out[:base]
	for i, m := range ms {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.tmp[m.start-base:m.end-base]...)
	}
	return nil
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units,
// the order RFC 8785 prescribes for member names.
//
// UTF-8 byte order is code point order, and UTF-16 order agrees with it
// except in one case: a character in U+E000..U+FFFF (UTF-8 lead byte 0xEE or
// 0xEF) sorts after a supplementary character (lead byte 0xF0..0xF4), whose
// first UTF-16 unit is a surrogate in 0xD800..0xDBFF. At the first differing
// byte both strings are at the same rune boundary, and any byte >= 0xEE is a
// lead byte, so that case can be detected there without decoding.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	ca, cb := a[i], b[i]
	if ca >= 0xEE && cb >= 0xEE && (ca >= 0xF0) != (cb >= 0xF0) {
		if ca >= 0xF0 {
			return -1
		}
		return 1
	}
	return cmp.Compare(ca, cb)
}
