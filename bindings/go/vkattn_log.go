package vkattn

// The library's messages (vkattn_set_log_callback): errors and warnings,
// and the categories VKATTN_LOG asks for (LogInfo, LogDebug).

/*
#cgo pkg-config: vkattn
void vkattnxGoRouteLog(int on);
*/
import "C"

import (
	"log"
	"strconv"
	"sync"
	"sync/atomic"
)

// LogLevel is a message's vkattn_log_level.
type LogLevel int

// Levels (values from the C header).
const (
	LogError   LogLevel = 1
	LogWarning LogLevel = 2
	LogInfo    LogLevel = 3
	LogDebug   LogLevel = 4
)

func (l LogLevel) String() string {
	switch l {
	case LogError:
		return "ERROR"
	case LogWarning:
		return "WARN"
	case LogInfo:
		return "INFO"
	case LogDebug:
		return "DEBUG"
	}
	return "LEVEL(" + strconv.Itoa(int(l)) + ")"
}

// LogHandler receives one message: a single line without its newline.
// It runs on the goroutine whose call logs, possibly on several at once,
// and must not call vkattn.
type LogHandler func(level LogLevel, message string)

// StdLogHandler hands messages to the standard library's log package
// ("vkattn: WARN: ..."), the default. (Go 1.21's log/slog takes them
// through a handler of one line: func(l LogLevel, m string) {
// slog.Default().Log(ctx, slogLevel(l), m) }.)
func StdLogHandler(level LogLevel, message string) {
	log.Printf("vkattn: %s: %s", level, message)
}

var (
	logHandler atomic.Value // LogHandler
	logMu      sync.Mutex
)

func init() {
	SetLogHandler(StdLogHandler)
}

// SetLogHandler routes the library's messages to h, process-wide; nil gives
// them back to the library, which prints them on stderr as "vkattn:
// <message>". Once it returns, the previous handler receives nothing more.
// A handler that panics loses its message; the call goes on.
func SetLogHandler(h LogHandler) {
	logMu.Lock()
	defer logMu.Unlock()
	if h == nil {
		C.vkattnxGoRouteLog(0) // returns once no message is being delivered
		logHandler.Store(LogHandler(nil))
		return
	}
	logHandler.Store(h)
	C.vkattnxGoRouteLog(1)
}

//export vkattnxGoLog
func vkattnxGoLog(level C.int, message *C.char) {
	h, _ := logHandler.Load().(LogHandler)
	if h == nil {
		return
	}
	msg := C.GoString(message)
	defer func() { _ = recover() }()
	h(LogLevel(level), msg)
}
