// The library's messages in C#: the Log.Message event (VKATTN_LOG set
// through the process environment, which the library reads at a context's
// creation).
using System;
using System.Collections.Generic;
using System.Threading;
using NUnit.Framework;
using Vkattn;

[TestFixture]
public class VkattnLogTests {
  static void Call() {
    using (var ctx = new Context())
    using (var q = Tensor.Of(ctx, new float[3 * 8], 3, 1, 8))
    using (var o = new Tensor(ctx, Dtype.F32, 3, 1, 8)) {
      var d = new AttentionDesc();
      d.NumHeads = 1;
      d.NumKvHeads = 1;
      d.HeadDim = 8;
      ctx.AttentionVarlen(d, new[] { 0, 3 }, new[] { 0, 3 }, q, q, q, o);
      ctx.Synchronize();
    }
  }

  [Test]
  public void SubscribersGetTheMessagesOnEveryThreadUntilTheyLeave() {
    var got = new List<string>();
    var levels = new List<LogLevel>();
    Action<LogLevel, string> take = (level, message) => {
      lock (got) {
        got.Add(message);
        levels.Add(level);
      }
    };
    Action<LogLevel, string> throws = (level, message) => { throw new InvalidOperationException(); };
    string old = Environment.GetEnvironmentVariable("VKATTN_LOG");
    Environment.SetEnvironmentVariable("VKATTN_LOG", "kernels,no-such-category-cs");
    try {
      Log.Message += take;
      Log.Message += throws;  // dropped; `take` still gets every message
      Call();
      var t = new Thread(Call);
      t.Start();
      t.Join();
      Log.Message -= throws;
      Log.Message -= take;
      int n;
      lock (got) n = got.Count;
      Call();  // no subscriber: stderr
      lock (got) {
        Assert.AreEqual(n, got.Count);
        Assert.IsTrue(got.Exists(m => m.StartsWith("attention family=")), string.Join("|", got));
        Assert.IsTrue(got.Exists(m => m.Contains("no-such-category-cs")), string.Join("|", got));
        Assert.IsTrue(levels.Contains(LogLevel.LOG_DEBUG));
        Assert.IsTrue(levels.Contains(LogLevel.LOG_WARNING));
        foreach (string m in got) {
          Assert.IsFalse(m.Contains("\n"), m);
          Assert.IsFalse(m.StartsWith("vkattn: "), m);
        }
      }
    } finally {
      Environment.SetEnvironmentVariable("VKATTN_LOG", old);
    }
  }
}
