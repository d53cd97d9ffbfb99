package org.vkattn;

import java.nio.charset.StandardCharsets;

/**
 * The library's messages (vkattn_set_log_callback): errors and warnings, and
 * the categories {@code VKATTN_LOG} asks for as INFO and DEBUG. By default
 * they go to the {@link System.Logger} named "vkattn" at the matching level;
 * {@link #setHandler} takes them instead, and {@code setHandler(null)} gives
 * them back to the library, which prints them on stderr as "vkattn:
 * &lt;message&gt;". Process-wide; once setHandler returns, the previous
 * handler receives nothing more. A handler runs on the thread that logs
 * (attached to the JVM for the call where it was not), possibly on several
 * at once, and must not call vkattn; an exception it throws is dropped.
 */
public final class Log {
  /** Receives one message: a single line, without a newline. */
  @FunctionalInterface
  public interface Handler {
    void log(LogLevel level, String message);
  }

  private static final System.Logger LOGGER = System.getLogger("vkattn");
  private static final Handler TO_SYSTEM_LOGGER = (level, message) -> LOGGER.log(of(level), message);
  private static volatile Handler handler = TO_SYSTEM_LOGGER;

  private Log() {}

  static {
    NativeLoader.load();
    Vkattn.logRoute(1);
  }

  /** Initializes the class (its static block routes the messages here). */
  static void routeByDefault() {}

  /** The default: the System.Logger "vkattn". */
  public static Handler systemLogger() {
    return TO_SYSTEM_LOGGER;
  }

  /** Where messages go from now on; null: the library's stderr lines. */
  public static synchronized void setHandler(Handler h) {
    if (h == null) {
      Vkattn.logRoute(0); // returns once no message is being delivered
      handler = TO_SYSTEM_LOGGER;
      return;
    }
    handler = h;
    Vkattn.logRoute(1);
  }

  static System.Logger.Level of(LogLevel level) {
    switch (level) {
      case LOG_ERROR:
        return System.Logger.Level.ERROR;
      case LOG_WARNING:
        return System.Logger.Level.WARNING;
      case LOG_INFO:
        return System.Logger.Level.INFO;
      default:
        return System.Logger.Level.DEBUG;
    }
  }

  /** Called by the JNI glue for every message. */
  static void dispatch(int level, byte[] message) {
    LogLevel l;
    try {
      l = LogLevel.swigToEnum(level);
    } catch (IllegalArgumentException e) {
      l = LogLevel.LOG_WARNING;
    }
    try {
      handler.log(l, new String(message, StandardCharsets.UTF_8));
    } catch (RuntimeException e) {
      // A handler that throws loses its message; the library goes on.
    }
  }
}
