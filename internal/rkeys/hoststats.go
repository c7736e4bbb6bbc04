package rkeys

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// HostStats are the host figures a pipeline record carries, with the
// meaning of ArchiveBot's psutil-based report.
type HostStats struct {
	Load1, Load5, Load15 float64
	MemUsagePercent      float64 // (total - available) / total * 100
	MemAvailable         int64   // bytes
	DiskUsagePercent     float64 // used / (used + available to users) * 100
	DiskAvailable        int64   // bytes available to unprivileged users
}

// CollectHostStats reads /proc/loadavg, /proc/meminfo and statfs(dataDir).
func CollectHostStats(dataDir string) (HostStats, error) {
	var hs HostStats
	if err := readLoadAvg("/proc/loadavg", &hs); err != nil {
		return hs, err
	}
	if err := readMemInfo("/proc/meminfo", &hs); err != nil {
		return hs, err
	}
	if err := readDisk(dataDir, &hs); err != nil {
		return hs, err
	}
	return hs, nil
}

func readLoadAvg(path string, hs *HostStats) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("host stats: read %s: %w", path, err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return fmt.Errorf("host stats: %s %q: want at least 3 fields", path, strings.TrimSpace(string(b)))
	}
	vals := make([]float64, 3)
	for i := range vals {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return fmt.Errorf("host stats: %s field %d %q: %w", path, i+1, f[i], err)
		}
		vals[i] = v
	}
	hs.Load1, hs.Load5, hs.Load15 = vals[0], vals[1], vals[2]
	return nil
}

func readMemInfo(path string, hs *HostStats) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("host stats: open %s: %w", path, err)
	}
	defer fh.Close()
	var total, avail int64 = -1, -1
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = kb * 1024
		case "MemAvailable:":
			avail = kb * 1024
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("host stats: read %s: %w", path, err)
	}
	if total <= 0 || avail < 0 {
		return fmt.Errorf("host stats: %s: MemTotal and MemAvailable must be present", path)
	}
	hs.MemAvailable = avail
	hs.MemUsagePercent = round1(float64(total-avail) / float64(total) * 100)
	return nil
}

func readDisk(dir string, hs *HostStats) error {
	st, err := statfs(dir)
	if err != nil {
		return err
	}
	bsize := int64(st.Bsize)
	used := (int64(st.Blocks) - int64(st.Bfree)) * bsize
	avail := int64(st.Bavail) * bsize
	hs.DiskAvailable = avail
	if used+avail > 0 {
		hs.DiskUsagePercent = round1(float64(used) / float64(used+avail) * 100)
	}
	return nil
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func statfs(dir string) (syscall.Statfs_t, error) {
	if dir == "" {
		dir = "/"
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return st, fmt.Errorf("host stats: statfs %s: %w", dir, err)
	}
	return st, nil
}

// DiskAvailable is the bytes available to unprivileged users on the
// filesystem of dir (HostStats.DiskAvailable; the disk guard's reading).
func DiskAvailable(dir string) (int64, error) {
	st, err := statfs(dir)
	if err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
