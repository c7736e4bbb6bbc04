package plugins_test

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"strconv"
	"strings"
)

// warcRecord is the part of a WARC record the tests look at.
type warcRecord struct {
	Type      string // WARC-Type
	TargetURI string // WARC-Target-URI
	Status    int    // HTTP status of a response record, 0 otherwise
}

// readWARC lists the records of a gzipped WARC file, parsing just the WARC
// headers and, for response records, the HTTP status line.
func readWARC(path string) ([]warcRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("open gzip %s: %w", path, err)
	}
	r := bufio.NewReader(gz)
	var recs []warcRecord
	for {
		version, err := r.ReadString('\n')
		if err == io.EOF && version == "" {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("read WARC version line: %w", err)
		}
		if strings.TrimSpace(version) == "" {
			continue // blank lines between records
		}
		if !strings.HasPrefix(version, "WARC/") {
			return recs, fmt.Errorf("WARC record starts with %q", version)
		}
		hdr, err := textproto.NewReader(r).ReadMIMEHeader()
		if err != nil {
			return recs, fmt.Errorf("read WARC headers: %w", err)
		}
		n, err := strconv.ParseInt(hdr.Get("Content-Length"), 10, 64)
		if err != nil {
			return recs, fmt.Errorf("WARC Content-Length %q: %w", hdr.Get("Content-Length"), err)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return recs, fmt.Errorf("read WARC block: %w", err)
		}
		rec := warcRecord{Type: hdr.Get("WARC-Type"), TargetURI: hdr.Get("WARC-Target-URI")}
		if rec.Type == "response" && strings.HasPrefix(string(body), "HTTP/") {
			if fields := strings.Fields(strings.SplitN(string(body), "\n", 2)[0]); len(fields) > 1 {
				rec.Status, _ = strconv.Atoi(fields[1])
			}
		}
		recs = append(recs, rec)
	}
}

// warcResponses maps each response record's target URI to its HTTP status.
func warcResponses(recs []warcRecord) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		if r.Type == "response" {
			out[strings.Trim(r.TargetURI, "<>")] = r.Status
		}
	}
	return out
}
