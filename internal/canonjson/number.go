package canonjson

import (
	"bytes"
	"math"
	"strconv"
)

// number validates a JSON number and appends its canonical form: an integer
// written as plain digits as it is, any other number in ECMAScript's form of
// the nearest double (see the package documentation).
func (p *parser) number() error {
	in, start := p.in, p.pos
	i := start
	if in[i] == '-' {
		i++
	}
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
	if integer {
		// Plain digits are an integer, kept exactly at any size. JSON
		// allows no leading zeros and no '+', so only -0 has another form.
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
	n := len(p.out)
	p.out = appendNumber(p.out, f)
	return p.checkInteger(start, lit, p.out[n:])
}

// checkInteger refuses lit, a number with a fraction or an exponent, when
// its value is an integer that its ECMAScript form out does not denote
// exactly: the double rounded it. 1e2 and 1.5e1 pass (100, 15), as does
// 1e21 (1e+21 is still exactly 10^21); 9007199254740993.0 does not.
// Fractions are doubles by definition and are not checked.
func (p *parser) checkInteger(off int, lit, out []byte) error {
	var want decimal
	p.num, want = parseDecimal(p.num[:0], lit)
	if !want.integer() {
		return nil
	}
	var got decimal
	p.num, got = parseDecimal(p.num, out)
	if got.equal(want) {
		return nil
	}
	shown := string(lit)
	if len(shown) > 40 {
		shown = shown[:37] + "..."
	}
	return p.fail(off, "integer "+shown+" has no exact double; write it as plain digits, without fraction or exponent, to keep it exact")
}

// decimal is the exact value of a number literal: ±digits × 10^exp, where
// digits holds no leading or trailing zeros and is empty for zero.
type decimal struct {
	neg    bool
	digits []byte
	exp    int64
}

// maxExp bounds the exponents parseDecimal reads. Any larger exponent
// written in an accepted literal is negative (its value underflows, so it
// is no integer) or belongs to a zero; capping it changes neither fact.
const maxExp = 1 << 40

// parseDecimal reads the exact value of lit, a valid JSON number. It
// appends the digits to buf, which it returns, so repeated calls reuse one
// scratch buffer; earlier results stay valid.
func parseDecimal(buf, lit []byte) ([]byte, decimal) {
	var d decimal
	i := 0
	if lit[0] == '-' {
		d.neg = true
		i++
	}
	start := len(buf)
	var frac int64 // digits after the point
	inFrac := false
mantissa:
	for ; i < len(lit); i++ {
		switch c := lit[i]; c {
		case '.':
			inFrac = true
		case 'e', 'E':
			break mantissa
		default:
			if inFrac {
				frac++
			}
			if c != '0' || len(buf) > start {
				buf = append(buf, c)
			}
		}
	}
	var exp int64
	if i < len(lit) { // at the 'e'
		i++
		neg := false
		if lit[i] == '+' || lit[i] == '-' {
			neg = lit[i] == '-'
			i++
		}
		for ; i < len(lit); i++ {
			if exp < maxExp {
				exp = exp*10 + int64(lit[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	end := len(buf)
	for end > start && buf[end-1] == '0' {
		end--
	}
	d.digits = buf[start:end:end]
	if len(d.digits) == 0 {
		return buf, decimal{} // zero, and -0 is 0
	}
	d.exp = exp - frac + int64(len(buf)-end)
	return buf[:end], d
}

// integer reports whether d is an integer.
func (d decimal) integer() bool { return d.exp >= 0 }

func (d decimal) equal(e decimal) bool {
	return d.neg == e.neg && d.exp == e.exp && bytes.Equal(d.digits, e.digits)
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
