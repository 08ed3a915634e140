package testenv

import "github.com/relay-demo/relay/retry/retrytest"

// Buffer is a bytes.Buffer safe for concurrent writers: a service's or a
// process's output that a test reads while it runs (retrytest.Buffer).
type Buffer = retrytest.Buffer
