package cli

import (
	"net/http"
	"time"
)

// testClient is the client of the tests' requests: one the server never
// answers fails its test within a minute instead of hanging until go
// test's timeout.
var testClient = &http.Client{Timeout: time.Minute}
