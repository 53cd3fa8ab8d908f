package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"kvlab/common/model"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// weightFlags choose how the model's weights come into memory: llama-server's
// --mlock and --no-mmap. By default the checkpoint's files are mapped
// (model.LoadWith).
type weightFlags struct {
	mlock, noMmap bool
	// who names the command in the load line: the flag set's name.
	who string
	// loaded describes the last load (load): its time, where the weights
	// went, and the resident memory after it.
	loaded string
}

func (f *weightFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.mlock, "mlock", false, "lock the mapped weights in RAM, faulting them all in at load, so the OS never evicts them (needs RLIMIT_MEMLOCK above the checkpoint's size: ulimit -l)")
	fs.BoolVar(&f.noMmap, "no-mmap", false, "read the weights into memory instead of mapping the checkpoint's files")
	f.who = fs.Name()
}

// load loads the checkpoint in dir onto be, and notes for report how long
// that took, where the weights are, the process's resident memory after
// it, and on the CPU backend the kernel set it runs.
func (f *weightFlags) load(dir string, be kernels.Backend) (*model.Model, error) {
	if f.mlock && f.noMmap {
		return nil, fmt.Errorf("-mlock locks the mapped weights, and -no-mmap reads them instead: give one")
	}
	start := time.Now()
	m, err := model.LoadWith(dir, be, model.LoadOptions{NoMmap: f.noMmap, Mlock: f.mlock})
	if err != nil {
		if le := (*model.LockError)(nil); errors.As(err, &le) {
			return nil, fmt.Errorf("-mlock: %w", err)
		}
		return nil, err
	}
	took := time.Since(start)
	var where string
	switch {
	case m.MappedBytes() > 0:
		where = byteSize(m.MappedBytes()) + " of weights mapped"
		if m.Locked() {
			where += " and locked"
		}
	case be.Name() != "cpu":
		where = "weights copied to the " + be.Name() + " device"
	default:
		where = "weights read into memory"
	}
	if f.mlock && !m.Locked() {
		where += "; -mlock: nothing to lock, no weight stays mapped"
	}
	f.loaded = fmt.Sprintf("model loaded in %.2f s (%s); %s", took.Seconds(), where, residentMemory())
	if be.Name() == "cpu" {
		// The kernel set the CPU backend runs (cpu.KernelSet: the fastest
		// this CPU has, or the one KVLAB_KERNEL_SET names).
		f.loaded += "; CPU kernels " + cpu.KernelSet()
	}
	return m, nil
}

// report prints the load line to w. serve prints it just before its
// listening line, once nothing can fail any more: an error after the load
// stays the one line a refused flag gets.
func (f *weightFlags) report(w io.Writer) {
	if f.loaded != "" {
		fmt.Fprintf(w, "%s: %s\n", f.who, f.loaded)
	}
}

// residentMemory describes the process's resident memory, split as
// /proc/self/status splits it: anonymous memory (the heap: copied weights,
// the KV pool) and pages of mapped files (mapped weights, which the page
// cache shares with every process that reads the file). "RSS unknown"
// where there is no /proc.
func residentMemory() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "RSS unknown"
	}
	kb := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "RssAnon" && key != "RssFile") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err == nil {
			kb[key] = n
		}
	}
	rss, ok := kb["VmRSS"]
	if !ok {
		return "RSS unknown"
	}
	s := "RSS " + byteSize(rss<<10)
	if anon, ok := kb["RssAnon"]; ok {
		s += fmt.Sprintf(" (%s anonymous, %s of mapped files)", byteSize(anon<<10), byteSize(kb["RssFile"]<<10))
	}
	return s
}
