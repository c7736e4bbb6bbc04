package testsite

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The calendar trap: /calendar/YYYY/MM/ (a month, YYYY at least four
// digits) links the previous month (down to 0001/01), the next month
// (forever), each of its days /calendar/YYYY/MM/DD/ and the start page; a
// day links its month and the start page. The start page links
// PathCalendar (2024/06).

// calendarMinMonth is the month index of 0001/01, where prev links stop.
const calendarMinMonth = 12

// calendarKey names month m (year*12 + month-1) or its day (1..31; 0 is the
// month page).
func calendarKey(m int64, day int) key { return key(-1 - (m*32 + int64(day))) }

func calendarDecode(k key) (m int64, day int) {
	v := -1 - int64(k)
	return v / 32, int(v % 32)
}

func daysIn(m int64) int {
	return time.Date(int(m/12), time.Month(m%12+2), 0, 0, 0, 0, 0, time.UTC).Day()
}

func calendarPath(k key) string {
	m, day := calendarDecode(k)
	var b strings.Builder
	b.Grow(24)
	b.WriteString("/calendar/")
	y := strconv.FormatInt(m/12, 10)
	for i := len(y); i < 4; i++ {
		b.WriteByte('0')
	}
	b.WriteString(y)
	b.WriteByte('/')
	two(&b, int(m%12)+1)
	if day > 0 {
		two(&b, day)
	}
	return b.String()
}

func two(b *strings.Builder, v int) {
	b.WriteByte(byte('0' + v/10))
	b.WriteByte(byte('0' + v%10))
	b.WriteByte('/')
}

// parseCalendar returns the key of a calendar path, accepting exactly the
// paths calendarPath writes.
func parseCalendar(path string) (key, bool) {
	rest, ok := strings.CutPrefix(path, "/calendar/")
	if !ok {
		return 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 && len(parts) != 4 || parts[len(parts)-1] != "" {
		return 0, false
	}
	y, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || y < 1 || y > 1<<40 {
		return 0, false
	}
	mo, err := strconv.Atoi(parts[1])
	if err != nil || mo < 1 || mo > 12 {
		return 0, false
	}
	m := y*12 + int64(mo-1)
	day := 0
	if len(parts) == 4 {
		if day, err = strconv.Atoi(parts[2]); err != nil || day < 1 || day > daysIn(m) {
			return 0, false
		}
	}
	k := calendarKey(m, day)
	if calendarPath(k) != path { // leading zeros, signs, ...
		return 0, false
	}
	return k, true
}

// calendarLinks returns a calendar page's links in document order.
func calendarLinks(k key, home key) []key {
	m, day := calendarDecode(k)
	if day > 0 {
		return []key{calendarKey(m, 0), home}
	}
	n := daysIn(m)
	links := make([]key, 0, n+3)
	if m > calendarMinMonth {
		links = append(links, calendarKey(m-1, 0))
	}
	links = append(links, calendarKey(m+1, 0))
	for d := 1; d <= n; d++ {
		links = append(links, calendarKey(m, d))
	}
	return append(links, home)
}

// MaxCalendarWindow bounds CalendarSkipPattern's months.
const MaxCalendarWindow = 1200

// CalendarPattern returns an RE2 pattern matching every calendar page of
// the server (a rule that skips the whole calendar).
func (s *Server) CalendarPattern() string {
	return "^" + regexp.QuoteMeta(s.bases[hostMain]) + "/calendar/"
}

// CalendarSkipPattern returns an RE2 pattern matching the calendar pages
// (months and their days) more than months months away from the calendar's
// entry (PathCalendar): the `skip` rule that contains the trap while
// keeping 2*months+1 months of it. months is 0..MaxCalendarWindow.
func (s *Server) CalendarSkipPattern(months int) (string, error) {
	if months < 0 || months > MaxCalendarWindow {
		return "", fmt.Errorf("testsite: calendar skip pattern: months %d: must be 0..%d", months, MaxCalendarWindow)
	}
	var keep []string
	for m := max(calendarMinMonth, int64(calendarEntryYM-months)); m <= calendarEntryYM+int64(months); m++ {
		keep = append(keep, strings.TrimSuffix(strings.TrimPrefix(calendarPath(calendarKey(m, 0)), "/calendar/"), "/"))
	}
	slices.Sort(keep)
	other, _ := complementOf(keep, 0, "dddd/dd")
	alts := "[0-9]{5,}/"
	if other != "" {
		alts = other + "|" + alts
	}
	return s.CalendarPattern() + "(?:" + alts + ")", nil
}

// complementOf returns a regexp matching the strings of the given format
// ('d' a digit, anything else itself) that are not in set (sorted, all of
// that format), looking from position i on; ok is false when there are
// none.
func complementOf(set []string, i int, format string) (re string, ok bool) {
	if i == len(format) {
		return "", false
	}
	var alts []string
	if format[i] == 'd' {
		var missing []byte
		for c := byte('0'); c <= '9'; c++ {
			if !slices.ContainsFunc(set, func(s string) bool { return s[i] == c }) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			alts = append(alts, "["+string(missing)+"]"+anyOf(format[i+1:]))
		}
	}
	for start := 0; start < len(set); {
		end := start
		for end < len(set) && set[end][i] == set[start][i] {
			end++
		}
		if sub, ok := complementOf(set[start:end], i+1, format); ok {
			alts = append(alts, regexp.QuoteMeta(set[start][i:i+1])+sub)
		}
		start = end
	}
	switch len(alts) {
	case 0:
		return "", false
	case 1:
		return alts[0], true
	}
	return "(?:" + strings.Join(alts, "|") + ")", true
}

// anyOf returns a regexp matching every string of format.
func anyOf(format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] == 'd' {
			b.WriteString("[0-9]")
		} else {
			b.WriteString(regexp.QuoteMeta(format[i : i+1]))
		}
	}
	return b.String()
}
