// Package bytesize owns the text form of byte sizes in configuration and
// messages: parsing "512MiB", "2GB" or "1048576", and rendering "64 MiB".
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units maps each accepted unit (lower-cased) to its factor: SI units are
// powers of 1000, IEC units powers of 1024.
var units = map[string]float64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// Parse reads a non-negative size: a number (fractions allowed) followed,
// optionally after a space, by a unit: B, KB, MB, GB, TB (powers of 1000)
// or KiB, MiB, GiB, TiB (powers of 1024), in any case. A bare number is in
// bytes. A single-letter unit (512M) is refused, because tools disagree on
// whether it means MB or MiB. Fractions of a byte are dropped.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q: must be a number of bytes with an optional unit (e.g. 512MiB, 2GB)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	factor, ok := units[unit]
	if !ok {
		if len(unit) == 1 && strings.Contains("kmgt", unit) {
			u := strings.ToUpper(unit)
			return 0, fmt.Errorf("size %q: unit %q is ambiguous: write %s%siB (powers of 1024) or %s%sB (powers of 1000)", s, t[i:], num, u, num, u)
		}
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, t[i:])
	}
	v := math.Floor(f * factor)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}

// Format renders n bytes with the largest IEC unit it reaches: "64 MiB",
// "1.5 GiB", "900 B". Whole multiples have no fraction.
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	name := string("KMGTPE"[exp]) + "iB"
	if n%div == 0 {
		return strconv.FormatInt(n/div, 10) + " " + name
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + name
}
