import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.After;
import org.junit.Test;
import org.vkattn.AttentionDesc;
import org.vkattn.Context;
import org.vkattn.Dtype;
import org.vkattn.Log;
import org.vkattn.LogLevel;
import org.vkattn.Tensor;

/**
 * The library's messages in Java (ctest bindings.java_log, run with
 * VKATTN_LOG=kernels,no-such-category-java): by default they reach the
 * System.Logger "vkattn" (java.util.logging here), a Log.Handler takes them
 * instead, from any thread, and setHandler(null) gives them back to stderr.
 */
public class VkattnLogTest {
  @After
  public void restore() {
    Log.setHandler(Log.systemLogger());
  }

  // One small call: VKATTN_LOG=kernels gives a DEBUG line per dispatch.
  static void call() {
    try (Context ctx = new Context();
        Tensor q = Tensor.of(ctx, new float[3 * 8], 3, 1, 8);
        Tensor o = new Tensor(ctx, Dtype.F32, 3, 1, 8)) {
      AttentionDesc d = new AttentionDesc();
      d.setNumHeads(1);
      d.setNumKvHeads(1);
      d.setHeadDim(8);
      ctx.attentionVarlen(d, new int[] {0, 3}, new int[] {0, 3}, q, q, q, o);
      ctx.synchronize();
    }
  }

  @Test
  public void messagesReachTheSystemLoggerByDefault() {
    List<LogRecord> got = Collections.synchronizedList(new ArrayList<>());
    Logger jul = Logger.getLogger("vkattn");
    Handler h =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            got.add(r);
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    jul.addHandler(h);
    jul.setLevel(java.util.logging.Level.ALL);
    try {
      call();
    } finally {
      jul.removeHandler(h);
    }
    boolean kernels = false;
    for (LogRecord r : got) kernels |= r.getMessage().startsWith("attention family=");
    assertTrue("a kernels line at DEBUG (FINE) in " + got.size() + " records", kernels);
  }

  @Test
  public void aHandlerTakesThemOnEveryThreadUntilReplaced() throws Exception {
    List<String> got = Collections.synchronizedList(new ArrayList<>());
    List<LogLevel> levels = Collections.synchronizedList(new ArrayList<>());
    Log.setHandler(
        (level, message) -> {
          levels.add(level);
          got.add(message);
        });
    call();
    Thread t = new Thread(VkattnLogTest::call);
    t.start();
    t.join();
    int lines = got.size();
    assertTrue("kernels lines from both threads: " + lines, lines >= 2);
    for (String m : got) {
      assertFalse(m, m.contains("\n"));
      assertFalse(m, m.startsWith("vkattn: "));
    }
    assertTrue(levels.contains(LogLevel.LOG_DEBUG));
    // A handler that throws loses its message; the call goes on.
    Log.setHandler(
        (level, message) -> {
          throw new IllegalStateException("handler failed");
        });
    call();
    // Back to stderr: the collecting handler receives nothing more.
    Log.setHandler(null);
    call();
    assertEquals(lines, got.size());
  }
}
