// Hand-written part of the C# bindings: the exception and array pinning.
using System;
using System.Runtime.InteropServices;

namespace Vkattn {

/// <summary>A vkattn call failed. Message is the library's message for that
/// call (vkattn_last_error(), read in the same native call), or the
/// binding's own when it rejected the call first (disposed object, null
/// array, wrong array type or length).</summary>
public class VkattnException : Exception {
  public VkattnException(Status status, string message) : base(message) {
    Status = status;
  }

  /// <summary>The vkattn_status of the failed call.</summary>
  public Status Status { get; private set; }
}

/// <summary>A pinned array as native code sees it (vkattnx_span).</summary>
[StructLayout(LayoutKind.Sequential)]
internal struct VkattnSpan {
  public IntPtr Ptr;
  public long Count;
}

/// <summary>Pins a managed array for the duration of one native call.</summary>
internal sealed class VkattnPin : IDisposable {
  private GCHandle handle;
  public VkattnSpan Span;

  public VkattnPin(Array array) {
    if (array == null) return;
    handle = GCHandle.Alloc(array, GCHandleType.Pinned);
    Span.Ptr = handle.AddrOfPinnedObject();
    Span.Count = array.LongLength;
  }

  public void Dispose() {
    if (handle.IsAllocated) handle.Free();
  }
}

}
