// The library's messages in C# (vkattn_set_log_callback): the Log.Message
// event. Hand-written part of the bindings.
using System;

namespace Vkattn {

/// <summary>The library's messages: errors and warnings, and the
/// categories VKATTN_LOG asks for (LogLevel.LOG_INFO, LOG_DEBUG). While
/// Message has a subscriber every message goes to it (one line, without a
/// newline); with none, the library prints them on stderr as "vkattn:
/// &lt;message&gt;". Process-wide; once the last subscriber is removed it
/// receives nothing more. Handlers run on the thread that logs, possibly on
/// several at once, and must not call vkattn; an exception a handler throws
/// is dropped.</summary>
public static class Log {
  static readonly object gate = new object();
  static Action<LogLevel, string> handlers;
  // Kept alive for as long as native code may call it.
  static readonly LibraryPINVOKE.VkattnxLogDelegate native = Dispatch;

  /// <summary>Raised for every message of the library.</summary>
  public static event Action<LogLevel, string> Message {
    add {
      lock (gate) {
        bool first = handlers == null;
        handlers += value;
        if (first && handlers != null) LibraryPINVOKE.VkattnxRouteLog(native);
      }
    }
    remove {
      lock (gate) {
        handlers -= value;
        if (handlers == null) LibraryPINVOKE.VkattnxRouteLog(null);
      }
    }
  }

  static void Dispatch(int level, string message) {
    Action<LogLevel, string> h = handlers;
    if (h == null) return;
    try {
      h((LogLevel)level, message);
    } catch (Exception) {
      // A handler that throws loses its message; the library goes on.
    }
  }
}

}
