package htmldoc

import "strings"

// srcsetURLs returns the URL of every image candidate of a srcset or
// imagesrcset attribute, split as the HTML standard's "parse a srcset
// attribute" does: a URL is a run of non-whitespace (commas inside it are
// kept; trailing commas end the candidate there), and its descriptors run
// to the next comma outside parentheses. Descriptors are not checked: a
// candidate a browser would drop for a bad descriptor is still listed.
func srcsetURLs(s string) []string {
	var urls []string
	i := 0
	for {
		for i < len(s) && (isHTMLSpace(s[i]) || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return urls
		}
		start := i
		for i < len(s) && !isHTMLSpace(s[i]) {
			i++
		}
		u := s[start:i]
		if strings.HasSuffix(u, ",") {
			urls = append(urls, strings.TrimRight(u, ","))
			continue
		}
		urls = append(urls, u)
		for inParens := false; i < len(s); i++ {
			if c := s[i]; c == '(' {
				inParens = true
			} else if c == ')' {
				inParens = false
			} else if c == ',' && !inParens {
				i++
				break
			}
		}
	}
}

// isHTMLSpace is the HTML standard's ASCII whitespace.
func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}
