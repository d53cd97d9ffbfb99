package org.vkattn;

/**
 * A vkattn call failed. {@link #getMessage()} is the library's message for
 * that call (vkattn_last_error(), read in the same native call), or the
 * binding's own when it rejected the call before reaching the library
 * (closed object, null array, wrong array type or length).
 */
public class VkattnException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int code;

  public VkattnException(int code, String message) {
    super(message);
    this.code = code;
  }

  /** The vkattn_status value. */
  public int code() {
    return code;
  }

  /** The status, or ERROR_INTERNAL for a code this binding does not know. */
  public Status status() {
    for (Status s : Status.values()) {
      if (s.swigValue() == code) return s;
    }
    return Status.ERROR_INTERNAL;
  }
}
