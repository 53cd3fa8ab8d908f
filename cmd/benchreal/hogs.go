package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

// hogFlag, as benchreal's only argument, turns the process into one CPU
// hog: a busy loop on one thread until its standard input closes, which
// happens when benchreal stops it or dies, so no hog outlives a run.
const hogFlag = "-benchreal-hog"

// hog is the hog process's body.
func hog() {
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	for n := uint64(0); ; n++ {
		if n%(1<<20) == 0 {
			select {
			case <-done:
				return
			default:
			}
		}
	}
}

// hogs are running hog processes.
type hogs struct {
	cmds  []*exec.Cmd
	pipes []io.Closer
}

// startHogs starts n hogs, each benchreal's own binary run with hogFlag
// and GOMAXPROCS=1, so that each keeps one core busy.
func startHogs(n int) (*hogs, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("-hogs: %w", err)
	}
	h := &hogs{}
	for range n {
		cmd := exec.Command(self, hogFlag)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		in, err := cmd.StdinPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			h.stop()
			return nil, fmt.Errorf("-hogs: starting a hog: %w", err)
		}
		h.cmds, h.pipes = append(h.cmds, cmd), append(h.pipes, in)
	}
	return h, nil
}

// stop ends every hog and waits for it.
func (h *hogs) stop() {
	for i, cmd := range h.cmds {
		h.pipes[i].Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	h.cmds, h.pipes = nil, nil
}
