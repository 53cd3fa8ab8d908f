package workload

import "time"

// Engine is all Run needs from a serving engine: a way in, a way to turn the
// crank, and a way to know when it has stopped turning.
type Engine interface {
	// Submit queues a request; a bad request returns an error and must not
	// disturb others. The engine may keep prompt; Run never modifies it.
	Submit(id int, prompt []int32, maxTokens int) error
	// Step runs one engine iteration and returns the tokens it produced.
	Step() []Token
	// Busy reports whether any submitted request is unfinished.
	Busy() bool
}

// Token is one event of one request, as returned by Engine.Step.
//
// The convention: an event with Err == nil carries exactly one generated
// token in Token, and Done marks that token as the request's last. An event
// with Err != nil carries no token and ends the request (Done is implied),
// whatever it produced before. After its final event a request's ID must not
// appear again.
//
// At is when the event was observed. An engine that steps in the caller's
// goroutine leaves it zero and Run stamps the event when Step returns; an
// engine whose tokens arrive on their own (a remote server read by other
// goroutines) sets it when the token was read, so the timestamp does not
// depend on when Run came round to collect it.
type Token struct {
	ID    int
	Token int32
	Done  bool
	Err   error
	At    time.Time
}

// CacheReporter is optionally implemented by an engine that knows how many
// prompt tokens of a request it served from its prefix cache. Run asks right
// after the step that finished the request and stores the answer in the
// request's record.
type CacheReporter interface {
	CachedTokens(id int) int
}

// Waiter is optionally implemented by an engine that makes progress without
// being stepped, such as a client of a remote server. Run then calls Wait
// instead of Step, so that it neither spins while the server works nor
// sleeps through an arrival.
type Waiter interface {
	// Wait returns the events that are ready, first waiting up to d of
	// wall time for at least one; d < 0 waits until there is one. It
	// returns nothing when d passes without an event.
	Wait(d time.Duration) []Token
}
