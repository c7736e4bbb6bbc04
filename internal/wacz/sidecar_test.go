package wacz

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/warc"
)

// appendWARC appends a response record for u to the WARC at path.
func appendWARC(t *testing.T, path, u string, at time.Time) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	body := "<title>" + u + "</title>"
	_, err = warc.NewWriter(f).Write(warc.Record{Type: "response", Date: at, TargetURI: u, ContentType: "application/http;msgtype=response",
		Block: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body)})
	require.NoError(t, err)
}

func TestTheKeptIndexGrowsWithItsWARC(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job-h-00001.warc.gz")
	writeWARC(t, path, t0.Add(123456*time.Microsecond), "https://example.com/", "https://example.com/a")

	first, complete, err := UpdateIndex(path, "job-h-00001.warc.gz")
	require.NoError(t, err)
	require.Len(t, first, 2)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), complete)
	require.FileExists(t, path+SidecarSuffix)

	// Damage the first record in place (same file, same inode): a kept
	// index that is read again, not rebuilt, does not notice.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("XXXX"), 200)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, _, err = IndexWARC(path, "x.warc.gz")
	require.Error(t, err, "the damage is there for a reader from the start")

	appendWARC(t, path, "https://example.com/b", t0.Add(time.Hour))
	all, complete, err := UpdateIndex(path, "renamed.warc.gz")
	require.NoError(t, err, "only the appended record was read")
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), complete)
	require.Len(t, all, 3)
	assert.Equal(t, first[0].Time, all[0].Time, "the kept index keeps the WARC-Date as the record has it")
	assert.Equal(t, 123456000, all[0].Time.Nanosecond(), "beyond the CDXJ timestamp's seconds")
	assert.Equal(t, "https://example.com/b", all[2].URL)
	for _, e := range all {
		assert.Equal(t, "renamed.warc.gz", e.Filename, "named as the caller names the WARC")
	}
	assert.Greater(t, all[2].Offset, all[1].Offset)
}

func TestAKeptIndexThatDoesNotFitIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job-h-00001.warc.gz")
	writeWARC(t, path, t0, "https://example.com/", "https://example.com/a")
	_, _, err := UpdateIndex(path, "w.warc.gz")
	require.NoError(t, err)

	// Replaced by a new file (as warc.Edit does: a new inode) with other
	// records: the kept index is not trusted.
	tmp := path + ".new"
	writeWARC(t, tmp, t0, "https://example.org/only")
	require.NoError(t, os.Rename(tmp, path))
	got, _, err := UpdateIndex(path, "w.warc.gz")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "https://example.org/only", got[0].URL)

	// A malformed kept index is rebuilt too.
	require.NoError(t, os.WriteFile(path+SidecarSuffix, []byte(sidecarMagic+" 99999999 1\ngarbage\n"), 0o644))
	got, _, err = UpdateIndex(path, "w.warc.gz")
	require.NoError(t, err)
	require.Len(t, got, 1)
}

func TestCreateKeepsEachWARCsIndex(t *testing.T) {
	dir, warcs := buildFixture(t)
	out := filepath.Join(dir, "job.wacz")
	first, err := Create(out, warcs, nil, Options{Title: "job", DetectPages: true})
	require.NoError(t, err)
	for _, w := range warcs {
		assert.FileExists(t, w.Path+SidecarSuffix)
	}
	appendWARC(t, warcs[0].Path, "https://example.com/later", t0.Add(2*time.Hour))
	second, err := Create(out, warcs, nil, Options{Title: "job", DetectPages: true})
	require.NoError(t, err)
	assert.Equal(t, first.Entries+1, second.Entries)
	_, err = Validate(out)
	require.NoError(t, err)
}
