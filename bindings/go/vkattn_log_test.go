package vkattn

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// The library's messages reach a LogHandler from every goroutine until
// SetLogHandler(nil) gives them back to stderr (VKATTN_LOG set through the
// process environment, which the library reads at a context's creation).
func TestLogHandlerGetsTheMessagesUntilReplaced(t *testing.T) {
	old, had := os.LookupEnv("VKATTN_LOG")
	os.Setenv("VKATTN_LOG", "kernels,no-such-category-go")
	defer func() {
		if had {
			os.Setenv("VKATTN_LOG", old)
		} else {
			os.Unsetenv("VKATTN_LOG")
		}
		SetLogHandler(StdLogHandler)
	}()
	var mu sync.Mutex
	var got []string
	var levels []LogLevel
	SetLogHandler(func(level LogLevel, message string) {
		mu.Lock()
		defer mu.Unlock()
		got, levels = append(got, message), append(levels, level)
	})
	call := func() {
		c := must(NewContext())
		defer c.Close()
		q := must(c.TensorF32(make([]float32, 3*8), 3, 1, 8))
		defer q.Close()
		o := must(c.NewTensor(F32, 3, 1, 8))
		defer o.Close()
		d := NewAttentionDesc(1, 1, 8)
		if err := c.AttentionVarlen(&d, []int32{0, 3}, []int32{0, 3}, q, q, q, o); err != nil {
			t.Error(err)
		}
		if err := c.Synchronize(); err != nil {
			t.Error(err)
		}
	}
	call()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); call() }()
	wg.Wait()
	mu.Lock()
	n := len(got)
	mu.Unlock()
	SetLogHandler(func(LogLevel, string) { panic("a handler that panics") })
	call() // its messages are lost; the call goes on
	SetLogHandler(nil)
	call()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("%d messages after the handler was replaced", len(got)-n)
	}
	kernels, warning := false, false
	for i, m := range got {
		kernels = kernels || (strings.HasPrefix(m, "attention family=") && levels[i] == LogDebug)
		warning = warning || (strings.Contains(m, "no-such-category-go") && levels[i] == LogWarning)
		if strings.Contains(m, "\n") || strings.HasPrefix(m, "vkattn: ") {
			t.Errorf("message %q: one line, no prefix", m)
		}
	}
	if !kernels || !warning {
		t.Errorf("kernels line %v, unknown-category warning %v in %q", kernels, warning, got)
	}
}
