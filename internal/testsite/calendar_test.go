package testsite

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCalendarPathsRoundTrip(t *testing.T) {
	for _, c := range []struct {
		m    int64
		day  int
		path string
	}{
		{calendarEntryYM, 0, "/calendar/2024/06/"},
		{calendarEntryYM, 30, "/calendar/2024/06/30/"},
		{2024*12 + 1, 29, "/calendar/2024/02/29/"},
		{calendarMinMonth, 0, "/calendar/0001/01/"},
		{999*12 + 11, 31, "/calendar/0999/12/31/"},
		{10000 * 12, 1, "/calendar/10000/01/01/"},
	} {
		k := calendarKey(c.m, c.day)
		assert.Equal(t, c.path, calendarPath(k))
		got, ok := parseCalendar(c.path)
		assert.True(t, ok, c.path)
		assert.Equal(t, k, got, c.path)
	}
	for _, bad := range []string{
		"/calendar/2024/13/", "/calendar/2023/02/29/", "/calendar/24/01/", "/calendar/2024/1/",
		"/calendar/0000/01/", "/calendar/2024/06", "/calendar/2024/06/01", "/calendar/-2024/06/",
		"/calendar/+2024/06/", "/calendar/02024/06/", "/calendar/2024/06/00/", "/calendar/", "/p/1.html",
	} {
		_, ok := parseCalendar(bad)
		assert.False(t, ok, bad)
	}
}

func TestCalendarLinksForeverForwardAndStopAtYearOne(t *testing.T) {
	home := key(7)
	june := calendarLinks(calendarKey(calendarEntryYM, 0), home)
	require.Len(t, june, 2+30+1)
	assert.Equal(t, calendarKey(calendarEntryYM-1, 0), june[0], "previous month")
	assert.Equal(t, calendarKey(calendarEntryYM+1, 0), june[1], "next month")
	assert.Equal(t, calendarKey(calendarEntryYM, 1), june[2])
	assert.Equal(t, home, june[len(june)-1])
	first := calendarLinks(calendarKey(calendarMinMonth, 0), home)
	assert.Equal(t, calendarKey(calendarMinMonth+1, 0), first[0], "no month before 0001/01")
	assert.Equal(t, []key{calendarKey(calendarEntryYM, 0), home}, calendarLinks(calendarKey(calendarEntryYM, 12), home))
}

func TestCalendarSkipPatternSkipsExactlyBeyondTheWindow(t *testing.T) {
	srv := &Server{bases: [2]string{"http://127.0.0.1:8080", "http://127.0.0.2:9090"}}
	for _, window := range []int{0, 1, 6, 13, 100} {
		p, err := srv.CalendarSkipPattern(window)
		require.NoError(t, err)
		re := regexp.MustCompile(p)
		// every month near the window's edges, a sample of the rest, the
		// ends of four-digit years
		months := []int64{calendarMinMonth, calendarMinMonth + 1, 9999*12 + 11, 10000 * 12, 123456 * 12}
		for m := int64(calendarEntryYM - window - 30); m <= calendarEntryYM+int64(window)+30; m++ {
			months = append(months, m)
		}
		for m := int64(calendarEntryYM - 3000); m <= calendarEntryYM+3000; m += 37 {
			months = append(months, m)
		}
		for _, m := range months {
			far := m < calendarEntryYM-int64(window) || m > calendarEntryYM+int64(window)
			for _, day := range []int{0, 1, daysIn(m)} {
				u := srv.URL(calendarPath(calendarKey(m, day)))
				if re.MatchString(u) != far {
					t.Fatalf("window %d: %s: skipped = %v, want %v (pattern %s)", window, u, !far, far, p)
				}
			}
		}
		assert.False(t, re.MatchString(srv.URL(PathStart)))
		assert.False(t, re.MatchString(srv.OtherURL("/calendar/1990/01/")), "other host")
	}
	_, err := srv.CalendarSkipPattern(-1)
	require.ErrorContains(t, err, "months -1: must be 0..1200")
	assert.Regexp(t, srv.CalendarPattern(), srv.URL(PathCalendar))
}
