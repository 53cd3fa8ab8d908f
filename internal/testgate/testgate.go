// Package testgate separates the tests that prove behaviour from the
// experiments that measure. `make test` runs the first kind, quickly and
// robustly on a busy 2-core machine; an experiment — a full-size workload
// run many times over to pin the numbers a doc quotes — runs only in
// `make test-long`, which sets KVLAB_TEST_LONG=1 (CI runs both).
package testgate

import (
	"os"
	"testing"
)

// Env is the environment variable that lets experiments run.
const Env = "KVLAB_TEST_LONG"

// Long skips tb unless experiments were asked for (Env=1); why says what
// the experiment costs, for the skip message.
func Long(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv(Env) != "1" {
		tb.Skipf("an experiment (%s): make test-long runs it", why)
	}
}
