package canonjson

import "unicode/utf8"

// str parses the string at p.pos and appends its canonical form to out.
// For a member name it also reports where the decoded name is: in[ks:ke]
// when the string had no escapes, keys[ks:ke] when inKeys is set.
//
// A string without backslashes is already canonical once it is known to be
// valid UTF-8 free of control characters, so it is copied as is. Only strings
// with escapes are decoded and re-escaped.
func (p *parser) str(key bool) (ks, ke int, inKeys bool, err error) {
	in, start := p.in, p.pos
	i := start + 1
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			p.out = append(p.out, in[start:i+1]...)
			p.pos = i + 1
			return start + 1, i, false, nil
		case c == '\\':
			return p.escapedStr(start, i, key)
		case c < 0x20:
			return 0, 0, false, p.fail(i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, false, p.fail(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return 0, 0, false, p.fail(start, "unterminated string")
}

// escapedStr continues str from the first backslash, at in[i]. It decodes the
// whole string into keys, then appends the canonical escaping of that to out.
// A string value's decoded copy is discarded; a member name's is kept.
func (p *parser) escapedStr(start, i int, key bool) (int, int, bool, error) {
	in := p.in
	ks := len(p.keys)
	p.keys = append(p.keys, in[start+1:i]...)
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			ke := len(p.keys)
			p.out = append(p.out, '"')
			p.out = appendEscaped(p.out, p.keys[ks:ke])
			p.out = append(p.out, '"')
			p.pos = i + 1
			if !key {
				p.keys = p.keys[:ks]
				return 0, 0, false, nil
			}
			return ks, ke, true, nil
		case c == '\\':
			if i+1 >= len(in) {
				return 0, 0, false, p.fail(start, "unterminated string")
			}
			var d byte
			switch in[i+1] {
			case '"', '\\', '/':
				d = in[i+1]
			case 'b':
				d = '\b'
			case 'f':
				d = '\f'
			case 'n':
				d = '\n'
			case 'r':
				d = '\r'
			case 't':
				d = '\t'
			case 'u':
				r, n, err := p.unicodeEscape(i)
				if err != nil {
					return 0, 0, false, err
				}
				p.keys = utf8.AppendRune(p.keys, r)
				i += n
				continue
			default:
				return 0, 0, false, p.fail(i, "invalid escape in string")
			}
			p.keys = append(p.keys, d)
			i += 2
		case c < 0x20:
			return 0, 0, false, p.fail(i, "control character in string")
		case c < utf8.RuneSelf:
			p.keys = append(p.keys, c)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, false, p.fail(i, "invalid UTF-8 in string")
			}
			p.keys = append(p.keys, in[i:i+size]...)
			i += size
		}
	}
	return 0, 0, false, p.fail(start, "unterminated string")
}

// unicodeEscape decodes the \uXXXX escape at in[i], joining a surrogate pair
// written as two escapes. It returns the rune and the bytes consumed.
// Unpaired surrogates are refused: they are not characters, cannot be
// written as UTF-8, and decoders disagree on how to repair them.
func (p *parser) unicodeEscape(i int) (rune, int, error) {
	r, ok := hex4(p.in, i+2)
	if !ok {
		return 0, 0, p.fail(i, "invalid \\u escape in string")
	}
	switch {
	case r < 0xD800 || r > 0xDFFF:
		return r, 6, nil
	case r >= 0xDC00:
		return 0, 0, p.fail(i, "unpaired low surrogate escape in string")
	}
	if i+12 <= len(p.in) && p.in[i+6] == '\\' && p.in[i+7] == 'u' {
		if lo, ok := hex4(p.in, i+8); ok && 0xDC00 <= lo && lo <= 0xDFFF {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
		}
	}
	return 0, 0, p.fail(i, "unpaired high surrogate escape in string")
}

// hex4 decodes the four hexadecimal digits at in[i:].
func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s, which is valid UTF-8, with RFC 8785's minimal
// escaping: only '"', '\\' and control characters below U+0020 are escaped.
// Bytes of multi-byte characters are all >= 0x80 and pass through unchanged.
func appendEscaped(dst, s []byte) []byte {
	last := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[last:i]...)
		last = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(dst, s[last:]...)
}
