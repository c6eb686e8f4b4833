package canonjson

import (
	"bytes"
	"math"
	"strconv"
)

// number validates a JSON number and appends its ECMAScript form.
func (p *parser) number() error {
	in, start := p.in, p.pos
	i := start
	if in[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
	default:
		return p.fail(start, "invalid number")
	}
	intDigits := i - digits
	integer := true
	if i < len(in) && in[i] == '.' {
		integer = false
		i++
		if i = skipDigits(in, i); i < 0 {
			return p.fail(start, "invalid number")
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		integer = false
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i = skipDigits(in, i); i < 0 {
			return p.fail(start, "invalid number")
		}
	}
	p.pos = i
	lit := in[start:i]
	// Integers of up to 15 digits are exact doubles and ECMAScript prints
	// them unchanged, so they need no conversion. Only -0 changes.
	if integer && intDigits <= 15 {
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			lit = lit[1:]
		}
		p.out = append(p.out, lit...)
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil { // the syntax is valid, so this is overflow
		return p.fail(start, "number out of range of float64")
	}
	p.out = appendNumber(p.out, f)
	return nil
}

// skipDigits returns the index after one or more digits at in[i:], or -1.
func skipDigits(in []byte, i int) int {
	j := i
	for j < len(in) && '0' <= in[j] && in[j] <= '9' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// appendNumber appends f as ECMAScript's Number::toString does (RFC 8785
// section 3.2.2.3): the shortest digits that round-trip, in plain notation
// for magnitudes in [1e-6, 1e21) and exponent notation otherwise.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also for -0
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go pads the exponent to two digits (1e-07); ECMAScript does not (1e-7).
	e := n + bytes.LastIndexByte(dst[n:], 'e')
	if len(dst)-e == 4 && dst[e+2] == '0' {
		dst = append(dst[:e+2], dst[e+3])
	}
	return dst
}
