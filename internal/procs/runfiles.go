package procs

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MarkerEnv is the environment variable set to the attempt ID in every hook
// process; processes that escape the process group are found by it.
const MarkerEnv = "ARCHIVEFLOW_ATTEMPT_ID"

// Runner file suffixes, after "STEM.ID".
const (
	SuffixStdout = ".stdout.log"
	SuffixStderr = ".stderr.log"
	SuffixPID    = ".pid"
	SuffixSh     = ".sh"
)

var attemptIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewAttemptID returns a fresh attempt ID: 32 lower-case hex characters.
func NewAttemptID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate attempt ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ValidAttemptID reports whether id has the attempt ID shape.
func ValidAttemptID(id string) bool { return attemptIDRe.MatchString(id) }

// RunnerFile is the name of one of the runner's own files, split:
// STEM.ATTEMPTID + Suffix (DESIGN.md §3). This is the only definition of
// that name pattern; everything that must tell runner files from hook
// output (the runner, the sweep, the built-in hooks) asks ParseRunnerFile.
type RunnerFile struct {
	Stem      string // the hook's file name without its extension; never empty
	AttemptID string // 32 lower-case hex characters
	Suffix    string // SuffixStdout, SuffixStderr, SuffixPID or SuffixSh
}

// ParseRunnerFile splits the base name of path when it is a runner file:
// a non-empty STEM, a dot, 32 lower-case hex characters and one of the
// runner suffixes. It is checked for every output file, so it avoids
// regular expressions.
func ParseRunnerFile(path string) (RunnerFile, bool) {
	name := filepath.Base(path)
	for _, suf := range []string{SuffixStdout, SuffixStderr, SuffixPID, SuffixSh} {
		if rest, ok := strings.CutSuffix(name, suf); ok {
			n := len(rest)
			if n > 33 && rest[n-33] == '.' && isLowerHex(rest[n-32:]) {
				return RunnerFile{Stem: rest[:n-33], AttemptID: rest[n-32:], Suffix: suf}, true
			}
			return RunnerFile{}, false
		}
	}
	return RunnerFile{}, false
}

// IsRunnerFile reports whether the base name of path is one of the runner's
// own files (STEM.<32 hex>.stdout.log|stderr.log|pid|sh), which are never
// hook output.
func IsRunnerFile(path string) bool {
	_, ok := ParseRunnerFile(path)
	return ok
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Files are the paths of one attempt's runner files.
type Files struct {
	Stdout string // STEM.ID.stdout.log: the hook's stdout, byte for byte
	Stderr string // STEM.ID.stderr.log: the hook's stderr, byte for byte
	PID    string // STEM.ID.pid: pid, start time, cmdline; removed when the attempt ends
	Sh     string // STEM.ID.sh: the command line, shell-quoted, for humans
}

func runnerFiles(dir, stem, id string) Files {
	base := filepath.Join(dir, stem+"."+id)
	return Files{
		Stdout: base + SuffixStdout,
		Stderr: base + SuffixStderr,
		PID:    base + SuffixPID,
		Sh:     base + SuffixSh,
	}
}

// pidFile is the content of a runner .pid file:
//
//	PID                      (first line alone, so `kill $(head -n1 F)` works)
//	starttime TICKS          (/proc/PID/stat field 22)
//	cmdline ["argv0",...]    (JSON array of the executed argv)
//	owner PID TICKS          (the runner process that started the hook)
type pidFile struct {
	Proc    procRef
	Cmdline []string
	Owner   procRef
}

func (p pidFile) encode() ([]byte, error) {
	cmd, err := json.Marshal(p.Cmdline)
	if err != nil {
		return nil, fmt.Errorf("encode cmdline: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\nstarttime %d\ncmdline %s\nowner %d %d\n",
		p.Proc.PID, p.Proc.StartTime, cmd, p.Owner.PID, p.Owner.StartTime)
	return b.Bytes(), nil
}

func parsePIDFile(b []byte) (pidFile, error) {
	var p pidFile
	var haveStart, haveCmd bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 0; sc.Scan(); n++ {
		line := sc.Text()
		if n == 0 {
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || pid <= 0 {
				return pidFile{}, fmt.Errorf("pid file line 1 %q: must be a positive pid", line)
			}
			p.Proc.PID = pid
			continue
		}
		key, val, _ := strings.Cut(line, " ")
		switch key {
		case "starttime":
			v, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return pidFile{}, fmt.Errorf("pid file starttime %q: must be an unsigned integer", val)
			}
			p.Proc.StartTime, haveStart = v, true
		case "cmdline":
			if err := json.Unmarshal([]byte(val), &p.Cmdline); err != nil {
				return pidFile{}, fmt.Errorf("pid file cmdline %q: must be a JSON array of strings: %w", val, err)
			}
			haveCmd = true
		case "owner":
			f := strings.Fields(val)
			if len(f) == 2 {
				pid, err1 := strconv.Atoi(f[0])
				st, err2 := strconv.ParseUint(f[1], 10, 64)
				if err1 == nil && err2 == nil {
					p.Owner = procRef{PID: pid, StartTime: st}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return pidFile{}, fmt.Errorf("read pid file: %w", err)
	}
	if p.Proc.PID == 0 || !haveStart || !haveCmd {
		return pidFile{}, fmt.Errorf("pid file: want pid, starttime and cmdline lines")
	}
	return p, nil
}

// writePIDFile writes the .pid file and sets its mtime to the start time.
func writePIDFile(path string, p pidFile, started time.Time) error {
	b, err := p.encode()
	if err != nil {
		return fmt.Errorf("write pid file %s: %w", path, err)
	}
	if err := writeNewFile(path, b, started); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// shellQuote quotes s for a POSIX shell; safe words are left bare.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellCommand renders argv as one shell-quoted command line.
func shellCommand(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// writeShFile writes the human-readable command file. It is never executed
// by the runner; the environment is not included (it may hold secrets).
func writeShFile(path, dir, id string, argv []string) error {
	content := "#!/bin/sh\n" +
		"# archiveflow hook attempt " + id + ": the exact command line, for humans.\n" +
		"# Not executed by the runner; the environment is not recorded here.\n" +
		"cd " + shellQuote(dir) + " || exit 1\n" +
		"exec " + shellCommand(argv) + "\n"
	if err := writeNewFile(path, []byte(content), time.Time{}); err != nil {
		return fmt.Errorf("write command file: %w", err)
	}
	return nil
}
