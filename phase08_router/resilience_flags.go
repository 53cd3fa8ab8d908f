package main

import (
	"flag"
	"fmt"
	"time"

	"kvlab/phase08_router/router"
)

// resilienceFlags are the router's timeouts at the replicas, its retries
// and its outlier ejection (router/resilience.go), with the library's
// defaults.
type resilienceFlags struct {
	connect, response, idle time.Duration
	retries, ejectAfter     int
	ejectTime, maxEjectTime time.Duration
	maxEjectPercent         int
	registered              bool // false: not on a command line; the library's defaults apply
}

func (r *resilienceFlags) register(fs *flag.FlagSet) {
	r.registered = true
	fs.DurationVar(&r.connect, "replica-connect-timeout", router.DefaultConnectTimeout, "give up connecting to a replica after this time")
	fs.DurationVar(&r.response, "replica-response-timeout", router.DefaultResponseTimeout, "give up on a replica whose response headers have not come within this time: a stream's first event, a JSON answer's whole answer (llama-server's --timeout is 600 s)")
	fs.DurationVar(&r.idle, "replica-idle-timeout", router.DefaultIdleTimeout, "give up on a replica's answer when nothing of it arrives for this time (a stalled stream)")
	fs.IntVar(&r.retries, "retries", router.DefaultRetries, "how many other replicas a request that failed before its first byte reached the client is tried on (0: none)")
	fs.IntVar(&r.ejectAfter, "eject-after", router.DefaultEjectAfter, "eject a replica after this many failed requests in a row (5xx, timeouts, broken connections), whatever its /health says (0: never)")
	fs.DurationVar(&r.ejectTime, "eject-time", router.DefaultEjectTime, "how long a first ejection lasts; the n-th in a row lasts n times as long")
	fs.DurationVar(&r.maxEjectTime, "max-eject-time", router.DefaultMaxEjectTime, "the longest an ejection lasts")
	fs.IntVar(&r.maxEjectPercent, "max-eject-percent", router.DefaultMaxEjectPercent, "most replicas ejected at once, in percent of the fleet (at least one; never the last replica taking requests)")
}

// validate refuses values that could not work, naming the flag.
func (r *resilienceFlags) validate() error {
	if !r.registered {
		return nil
	}
	switch {
	case r.connect <= 0:
		return fmt.Errorf("-replica-connect-timeout must be > 0, have %v", r.connect)
	case r.response <= 0:
		return fmt.Errorf("-replica-response-timeout must be > 0, have %v", r.response)
	case r.idle <= 0:
		return fmt.Errorf("-replica-idle-timeout must be > 0, have %v", r.idle)
	case r.retries < 0:
		return fmt.Errorf("-retries must be ≥ 0, have %d", r.retries)
	case r.ejectAfter < 0:
		return fmt.Errorf("-eject-after must be ≥ 0 (0: never), have %d", r.ejectAfter)
	case r.ejectTime <= 0:
		return fmt.Errorf("-eject-time must be > 0, have %v", r.ejectTime)
	case r.maxEjectTime < r.ejectTime:
		return fmt.Errorf("-max-eject-time must be at least -eject-time (%v), have %v", r.ejectTime, r.maxEjectTime)
	case r.maxEjectPercent < 1 || r.maxEjectPercent > 100:
		return fmt.Errorf("-max-eject-percent must be in [1, 100], have %d", r.maxEjectPercent)
	}
	return nil
}

// apply sets the flags' values on o; a 0 that means none becomes the
// library's < 0.
func (r *resilienceFlags) apply(o *router.Options) {
	if !r.registered {
		return
	}
	o.ConnectTimeout, o.ResponseTimeout, o.IdleTimeout = r.connect, r.response, r.idle
	o.Retries, o.EjectAfter = r.retries, r.ejectAfter
	if r.retries == 0 {
		o.Retries = -1
	}
	if r.ejectAfter == 0 {
		o.EjectAfter = -1
	}
	o.EjectTime, o.MaxEjectTime, o.MaxEjectPercent = r.ejectTime, r.maxEjectTime, r.maxEjectPercent
}
